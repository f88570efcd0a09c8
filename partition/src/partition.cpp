// Graph partitioning: METIS k-way (idx_t is 32-bit in Debian's METIS 5.1) and two baselines.
#include "adgnn/partition.h"

#include <metis.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "fmt/format.h"
#include "internal.h"

namespace adgnn {

namespace {

// Measured on 4 parts with log strata: 8 or 18 nodes in the top stratum balanced within 4%
// (Photo, Film, DBLP); 3 or 5 nodes broke every constraint (node imbalance 1.26-1.58).
constexpr int64_t kMinStratumPerPart = 2;

const char* metis_status_name(int rc) {
  switch (rc) {
    case METIS_ERROR_INPUT: return "METIS_ERROR_INPUT";
    case METIS_ERROR_MEMORY: return "METIS_ERROR_MEMORY";
    case METIS_ERROR: return "METIS_ERROR";
    default: return "unknown METIS status";
  }
}

// Unbiased integer in [0, bound) from a 64-bit engine; fixed algorithm so that results do not
// depend on the standard library (std::uniform_int_distribution and std::shuffle do).
uint64_t bounded(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x;
  do x = rng(); while (x >= limit);
  return x % bound;
}

void shuffle(std::vector<int64_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[bounded(rng, i)]);
}

Partition stats_of(const Csr& sym, int32_t parts, std::vector<int32_t> owner) {
  Partition p;
  p.parts = parts;
  p.owner = std::move(owner);
  p.part_nodes.assign(static_cast<size_t>(parts), 0);
  p.part_edges.assign(static_cast<size_t>(parts), 0);
  const int64_t n = sym.rows;
  for (int64_t u = 0; u < n; ++u) {
    const int32_t pu = p.owner[u];
    ++p.part_nodes[pu];
    p.part_edges[pu] += sym.degree(u);
    for (int64_t k = sym.indptr[u]; k < sym.indptr[u + 1]; ++k) {
      const int64_t v = sym.indices[k];
      if (v > u && p.owner[v] != pu) ++p.edge_cut;
    }
  }
  auto imbalance = [parts](const std::vector<int64_t>& x) {
    const int64_t total = std::accumulate(x.begin(), x.end(), int64_t{0});
    if (total == 0) return 1.0;
    const int64_t mx = *std::max_element(x.begin(), x.end());
    return static_cast<double>(mx) * parts / static_cast<double>(total);
  };
  p.node_imbalance = imbalance(p.part_nodes);
  p.edge_imbalance = imbalance(p.part_edges);
  return p;
}

// strata_bin (method "stratified"): each node's benefit bin; one constraint per bin replaces the
// node-count constraint.
std::vector<int32_t> metis_kway(const Csr& sym, int32_t parts, const PartitionOptions& opt,
                                const std::vector<uint8_t>* train_mask,
                                const std::vector<int32_t>* strata_bin) {
  constexpr int64_t idx_max = std::numeric_limits<idx_t>::max();
  const int64_t n = sym.rows;
  if (n > idx_max || sym.nnz() > idx_max)
    throw InputError(fmt::format(
        "--partition metis: the graph has {} nodes and {} adjacency entries; this METIS build "
        "({}-bit idx_t) is limited to {}",
        n, sym.nnz(), IDXTYPEWIDTH, idx_max));

  std::vector<idx_t> xadj(sym.indptr.begin(), sym.indptr.end());
  std::vector<idx_t> adjncy(sym.indices.begin(), sym.indices.end());
  idx_t nvtxs = static_cast<idx_t>(n);
  const idx_t first = strata_bin ? static_cast<idx_t>(opt.strata) : 1;
  idx_t ncon = first + (opt.balance_train ? 1 : 0) + (opt.balance_edges ? 1 : 0);
  idx_t nparts = parts;

  // Multi-constraint vertex weights, row-major [node][constraint]: 1 per node (stratified: the
  // indicator of the node's bin), the training-node indicator, the degree. METIS needs ncon == 1
  // to mean "unit weights" only when vwgt is NULL.
  std::vector<idx_t> vwgt;
  if (ncon > 1) {
    vwgt.resize(static_cast<size_t>(n) * static_cast<size_t>(ncon));
    for (int64_t u = 0; u < n; ++u) {
      idx_t* w = &vwgt[static_cast<size_t>(u) * static_cast<size_t>(ncon)];
      int c = first;
      if (strata_bin) w[(*strata_bin)[u]] = 1;
      else w[0] = 1;
      if (opt.balance_train) w[c++] = (*train_mask)[u] ? 1 : 0;
      // A zero-degree vertex still counts a little, so that isolated nodes spread too.
      if (opt.balance_edges) w[c++] = static_cast<idx_t>(std::max<int64_t>(sym.degree(u), 1));
    }
  }

  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_OBJTYPE] = opt.objective == "vol" ? METIS_OBJTYPE_VOL : METIS_OBJTYPE_CUT;
  options[METIS_OPTION_SEED] = static_cast<idx_t>(opt.seed % static_cast<uint64_t>(idx_max));
  options[METIS_OPTION_NUMBERING] = 0;
  if (opt.imbalance > 0)
    options[METIS_OPTION_UFACTOR] = std::max<idx_t>(1, static_cast<idx_t>(std::lround((opt.imbalance - 1) * 1000)));

  std::vector<idx_t> part(static_cast<size_t>(n), 0);
  idx_t objval = 0;
  const int rc = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(),
                                     vwgt.empty() ? nullptr : vwgt.data(), nullptr, nullptr,
                                     &nparts, nullptr, nullptr, options, &objval, part.data());
  if (rc != METIS_OK)
    throw InputError(fmt::format("--partition metis: METIS_PartGraphKway failed with {} ({}) for "
                                 "--parts {} on {} nodes",
                                 metis_status_name(rc), rc, parts, n));
  std::vector<int32_t> owner(part.begin(), part.end());
  for (int32_t o : owner)
    if (o < 0 || o >= parts)
      throw InputError(fmt::format("--partition metis: METIS returned part {} outside [0, {})",
                                   o, parts));
  return owner;
}

std::vector<int32_t> random_parts(int64_t n, int32_t parts, const PartitionOptions& opt,
                                  const std::vector<uint8_t>* train_mask) {
  std::mt19937_64 rng(opt.seed);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n));
  if (opt.balance_train) {
    // Training nodes first, then the rest, each shuffled; dealing the concatenation round robin
    // balances both the training nodes and all nodes.
    std::vector<int64_t> rest;
    for (int64_t u = 0; u < n; ++u) ((*train_mask)[u] ? order : rest).push_back(u);
    shuffle(order, rng);
    shuffle(rest, rng);
    order.insert(order.end(), rest.begin(), rest.end());
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    shuffle(order, rng);
  }
  std::vector<int32_t> owner(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) owner[order[i]] = static_cast<int32_t>(i % parts);
  return owner;
}

std::vector<int32_t> contiguous_parts(int64_t n, int32_t parts) {
  // Part p holds [ceil(p n / parts), ceil((p + 1) n / parts)): sizes differ by at most one.
  std::vector<int32_t> owner(static_cast<size_t>(n));
  for (int32_t p = 0; p < parts; ++p) {
    const int64_t b = (static_cast<int64_t>(p) * n + parts - 1) / parts;
    const int64_t e = ((static_cast<int64_t>(p) + 1) * n + parts - 1) / parts;
    std::fill(owner.begin() + b, owner.begin() + e, p);
  }
  return owner;
}

}  // namespace

Partition partition_stats(const Graph& g, int32_t parts, std::vector<int32_t> owner) {
  if (parts < 1) throw InputError(fmt::format("--parts {}: must be >= 1", parts));
  if (static_cast<int64_t>(owner.size()) != g.num_nodes)
    throw InputError(fmt::format("partition: {} owners for a graph of {} nodes", owner.size(),
                                 g.num_nodes));
  for (size_t u = 0; u < owner.size(); ++u)
    if (owner[u] < 0 || owner[u] >= parts)
      throw InputError(fmt::format("partition: node {} has owner {}, outside [0, {})", u,
                                   owner[u], parts));
  Partition p = stats_of(g.symmetric(), parts, std::move(owner));
  p.method = "given";
  return p;
}

Partition partition_graph(const Graph& g, int32_t parts, const PartitionOptions& opt,
                          const std::vector<uint8_t>* train_mask) {
  const int64_t n = g.num_nodes;
  if (parts < 1) throw InputError(fmt::format("--parts {}: must be >= 1", parts));
  if (parts > n)
    throw InputError(fmt::format("--parts {}: more parts than the graph's {} nodes", parts, n));
  if (opt.method != "metis" && opt.method != "stratified" && opt.method != "random" &&
      opt.method != "contiguous")
    throw InputError(fmt::format(
        "--partition {}: unknown method (metis, stratified, random, contiguous)", opt.method));
  if (opt.objective != "cut" && opt.objective != "vol")
    throw InputError(fmt::format("--objective {}: unknown objective (cut, vol)", opt.objective));
  if (opt.imbalance != 0) {
    if (!(opt.imbalance > 1 && opt.imbalance <= 2))
      throw InputError(fmt::format("--imbalance {}: must be in (1, 2] (the largest part's weight over the mean; "
                                   "METIS's default 1.03)",
                                   opt.imbalance));
    if (opt.method != "metis" && opt.method != "stratified")
      throw InputError(fmt::format("--imbalance: METIS's tolerance, for --partition metis or stratified (not {})",
                                   opt.method));
  }
  if (opt.balance_train) {
    if (train_mask == nullptr)
      throw InputError("--balance-train: needs the training mask, none was given");
    if (static_cast<int64_t>(train_mask->size()) != n)
      throw InputError(fmt::format("--balance-train: the training mask has {} entries, the graph "
                                   "{} nodes",
                                   train_mask->size(), n));
  }

  if (opt.strata < 1 || (opt.method == "stratified" && opt.strata > n))
    throw InputError(fmt::format("--strata {}: must be in [1, {}] (the number of nodes)",
                                 opt.strata, n));
  if (opt.strata_spacing != "equal" && opt.strata_spacing != "log")
    throw InputError(fmt::format("--strata-spacing {}: unknown (equal, log)", opt.strata_spacing));
  // The other methods only report strata: as many as there are nodes, at most, and equal ones
  // where the requested log spacing does not fit the graph.
  int32_t strata = static_cast<int32_t>(std::min<int64_t>(opt.strata, n));
  std::string spacing = opt.strata_spacing;

  const Csr sym = g.symmetric();
  // Position of every node in the benefit order; its bin is the position's quantile.
  const std::vector<int32_t> rank = detail::benefit_rank(fast_depth_benefit(sym));
  std::vector<int32_t> bin;
  try {
    bin = detail::bins_from_rank(rank, strata, spacing);
  } catch (const InputError&) {
    if (opt.method == "stratified") throw;
    spacing = "equal";
    bin = detail::bins_from_rank(rank, strata, spacing);
  }
  if (opt.method == "stratified" && parts > 1) {
    // A constraint of a few nodes per part cannot be met within METIS's tolerance, and METIS then
    // gives up the balance of every constraint (measured: node imbalance 1.58 on Cora ML with the
    // top 0.1% = 3 nodes as a stratum of 4 parts).
    std::vector<int64_t> size(static_cast<size_t>(strata), 0);
    for (int32_t b : bin) ++size[b];
    const int64_t smallest = *std::min_element(size.begin(), size.end());
    if (smallest < kMinStratumPerPart * parts)
      throw InputError(fmt::format(
          "--strata {}: the smallest benefit stratum ({} spacing) holds {} nodes, fewer than {} "
          "per part, too few for METIS to balance; use fewer strata{}",
          strata, spacing, smallest, kMinStratumPerPart,
          spacing == "log" ? " or --strata-spacing equal" : ""));
  }
  std::vector<int32_t> owner;
  if (parts == 1)
    owner.assign(static_cast<size_t>(n), 0);
  else if (opt.method == "metis")
    owner = metis_kway(sym, parts, opt, train_mask, nullptr);
  else if (opt.method == "stratified")
    owner = metis_kway(sym, parts, opt, train_mask, &bin);
  else if (opt.method == "random")
    owner = random_parts(n, parts, opt, train_mask);
  else
    owner = contiguous_parts(n, parts);
  Partition p = stats_of(sym, parts, std::move(owner));
  p.method = opt.method;
  detail::fill_strata(p, bin, strata);
  p.strata_spacing = spacing;
  detail::fill_top(p, rank);
  if (train_mask && static_cast<int64_t>(train_mask->size()) == n) {
    p.part_train.assign(static_cast<size_t>(parts), 0);
    for (int64_t u = 0; u < n; ++u) p.part_train[p.owner[u]] += (*train_mask)[u] ? 1 : 0;
    const int64_t total = std::accumulate(p.part_train.begin(), p.part_train.end(), int64_t{0});
    if (total > 0)
      p.train_imbalance = static_cast<double>(*std::max_element(p.part_train.begin(), p.part_train.end())) *
                          parts / static_cast<double>(total);
  }
  return p;
}

std::vector<int64_t> locality_order(const Graph& g, const std::string& method, int64_t block_nodes,
                                    uint64_t seed) {
  const int64_t n = g.num_nodes;
  if (block_nodes < 1) throw InputError(fmt::format("--block {}: must be >= 1", block_nodes));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (method == "identity") return order;
  if (method == "random") {
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    return order;
  }
  if (method == "benefit") {
    // Highest fast depth benefit first: AD-GNN_fast's active set at every layer (and its
    // surrogate band) is then a prefix of the rows.
    const std::vector<double> score = fast_depth_benefit(g);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return score[size_t(a)] > score[size_t(b)]; });
    return order;
  }
  if (method != "metis")
    throw InputError(fmt::format("--method {}: unknown (metis, benefit, random, identity)", method));
  const int64_t parts = (n + block_nodes - 1) / block_nodes;
  if (parts <= 1) return order;
  PartitionOptions opt;
  opt.seed = seed;
  const std::vector<int32_t> owner = metis_kway(g.symmetric(), static_cast<int32_t>(parts), opt, nullptr, nullptr);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return owner[size_t(a)] < owner[size_t(b)]; });
  return order;
}

double same_block_fraction(const Graph& g, int64_t block_nodes) {
  if (block_nodes < 1) throw InputError(fmt::format("--block {}: must be >= 1", block_nodes));
  const Csr sym = g.symmetric();
  if (sym.nnz() == 0) return 1.0;
  int64_t same = 0;
  for (int64_t v = 0; v < sym.rows; ++v)
    for (int64_t e = sym.indptr[size_t(v)]; e < sym.indptr[size_t(v) + 1]; ++e)
      same += (v / block_nodes) == (sym.indices[size_t(e)] / block_nodes);
  return double(same) / double(sym.nnz());
}

}  // namespace adgnn
