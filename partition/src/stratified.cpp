// The fast depth-benefit score without torch, its quantile bins, and per-part counts per bin:
// what the "stratified" partitioner balances and what every partition reports.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "adgnn/depth_benefit_formula.h"
#include "adgnn/partition.h"
#include "fmt/format.h"
#include "internal.h"

namespace adgnn {

std::vector<double> fast_depth_benefit(const Csr& sym) {
  const int64_t n = sym.rows;
  int64_t max_prod = 0;
  for (int64_t u = 0; u < n; ++u)
    for (int64_t k = sym.indptr[u]; k < sym.indptr[u + 1]; ++k)
      max_prod = std::max(max_prod, sym.degree(u) * sym.degree(sym.indices[k]));
  // As the model: the max over edges, 1 for a graph without edges (every d+ is 0 then).
  const double max_degree_product = max_prod > 0 ? static_cast<double>(max_prod) : 1.0;
  std::vector<double> score(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) {
    int64_t neighbour_degrees = 0;
    for (int64_t k = sym.indptr[v]; k < sym.indptr[v + 1]; ++k)
      neighbour_degrees += sym.degree(sym.indices[k]);
    const double d = static_cast<double>(sym.degree(v));
    score[v] = log_depth_benefit(d, fast_same_label_estimate(d, static_cast<double>(neighbour_degrees),
                                                             max_degree_product));
  }
  return score;
}

std::vector<double> fast_depth_benefit(const Graph& g) { return fast_depth_benefit(g.symmetric()); }

namespace detail {

std::vector<int32_t> benefit_rank(const std::vector<double>& score) {
  const int64_t n = static_cast<int64_t>(score.size());
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Ties (common: equal degree and neighbour degrees) broken by node id, so bins are exact.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return score[a] < score[b] || (score[a] == score[b] && a < b);
  });
  std::vector<int32_t> rank(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rank[order[i]] = static_cast<int32_t>(i);
  return rank;
}

}  // namespace detail

namespace detail {

std::vector<int32_t> bins_from_rank(const std::vector<int32_t>& rank, int32_t strata,
                                    const std::string& spacing) {
  const int64_t n = static_cast<int64_t>(rank.size());
  if (spacing != "equal" && spacing != "log")
    throw InputError(fmt::format("--strata-spacing {}: unknown (equal, log)", spacing));
  if (strata < 1 || strata > std::max<int64_t>(n, 1))
    throw InputError(fmt::format("--strata {}: must be in [1, {}] (the number of nodes)", strata,
                                 std::max<int64_t>(n, 1)));
  std::vector<int32_t> bin(static_cast<size_t>(n));
  if (spacing == "equal") {
    for (int64_t u = 0; u < n; ++u) bin[u] = static_cast<int32_t>(int64_t(rank[u]) * strata / n);
    return bin;
  }
  // "log": bin k >= 1 holds the nodes among the top ceil(n / 10^k) but not the top
  // ceil(n / 10^(k+1)); bin 0 the rest.
  std::vector<int64_t> top(static_cast<size_t>(strata) + 1, 0);
  for (int32_t k = 1; k < strata; ++k)
    top[k] = static_cast<int64_t>(std::ceil(double(n) / std::pow(10.0, k)));
  for (int32_t k = 1; k < strata; ++k)
    if (top[k] <= top[k + 1] || (k == 1 && top[1] >= n))
      throw InputError(fmt::format("--strata {}: log spacing leaves a stratum empty on {} nodes "
                                   "(it needs about 10^{} nodes)",
                                   strata, n, strata - 1));
  for (int64_t u = 0; u < n; ++u) {
    const int64_t from_top = n - 1 - rank[u];
    int32_t b = 0;
    for (int32_t k = strata - 1; k >= 1 && b == 0; --k)
      if (from_top < top[k]) b = k;
    bin[u] = b;
  }
  return bin;
}

}  // namespace detail

std::vector<int32_t> benefit_strata(const std::vector<double>& score, int32_t strata,
                                    const std::string& spacing) {
  return detail::bins_from_rank(detail::benefit_rank(score), strata, spacing);
}

namespace detail {

void fill_top(Partition& p, const std::vector<int32_t>& rank) {
  const int64_t n = static_cast<int64_t>(rank.size());
  const size_t k = std::size(kTopFractions);
  p.part_top.assign(static_cast<size_t>(p.parts) * k, 0);
  for (size_t f = 0; f < k; ++f) {
    // The ceil(f n) highest ranks (at least one node).
    const int64_t top = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(kTopFractions[f] * double(n))));
    for (int64_t u = 0; u < n; ++u)
      if (rank[u] >= n - top) ++p.part_top[size_t(p.owner[u]) * k + f];
  }
}

void fill_strata(Partition& p, const std::vector<int32_t>& bin, int32_t strata) {
  p.strata = strata;
  p.part_strata.assign(static_cast<size_t>(p.parts) * static_cast<size_t>(strata), 0);
  for (size_t u = 0; u < bin.size(); ++u)
    ++p.part_strata[size_t(p.owner[u]) * size_t(strata) + size_t(bin[u])];
  p.stratum_imbalance.assign(static_cast<size_t>(strata), 1.0);
  for (int32_t s = 0; s < strata; ++s) {
    int64_t total = 0, mx = 0;
    for (int32_t q = 0; q < p.parts; ++q) {
      const int64_t c = p.part_strata[size_t(q) * size_t(strata) + size_t(s)];
      total += c;
      mx = std::max(mx, c);
    }
    if (total > 0)
      p.stratum_imbalance[s] = static_cast<double>(mx) * p.parts / static_cast<double>(total);
  }
}

}  // namespace detail

void add_strata_stats(const Graph& g, Partition& p, int32_t strata, const std::string& spacing) {
  if (static_cast<int64_t>(p.owner.size()) != g.num_nodes)
    throw InputError(fmt::format("partition: {} owners for a graph of {} nodes", p.owner.size(),
                                 g.num_nodes));
  const std::vector<int32_t> rank = detail::benefit_rank(fast_depth_benefit(g));
  detail::fill_strata(p, detail::bins_from_rank(rank, strata, spacing), strata);
  p.strata_spacing = spacing;
  detail::fill_top(p, rank);
}

}  // namespace adgnn
