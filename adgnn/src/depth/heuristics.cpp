// Same-label heuristics for AD-GNN_fast (the paper's appendix comparison). Static functions of
// the graph: model.cpp computes them once per graph and caches d+.
#include "depth/heuristics.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "adgnn/loaders.h"

namespace adgnn::detail {

const std::vector<std::string>& heuristic_names() {
  static const std::vector<std::string> names{"degree", "common_neighbours", "jaccard", "adamic_adar",
                                              "betweenness", "kshell", "clustering"};
  return names;
}

bool known_heuristic(const std::string& name) {
  const auto& n = heuristic_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

void check_heuristic(const std::string& name) {
  if (known_heuristic(name)) return;
  std::string list;
  for (const auto& h : heuristic_names()) list += (list.empty() ? "" : ", ") + h;
  throw InputError("--heuristic " + name + ": unknown (" + list + ")");
}

namespace {

using Csr = std::pair<std::vector<int64_t>, std::vector<int64_t>>;

// Rows sorted, so that neighbour sets intersect by merging.
Csr host_csr(const at::Tensor& rowptr, const at::Tensor& col) {
  const at::Tensor rp = rowptr.to(torch::kCPU, torch::kInt64).contiguous();
  const at::Tensor c = col.to(torch::kCPU, torch::kInt64).contiguous();
  Csr out{std::vector<int64_t>(rp.data_ptr<int64_t>(), rp.data_ptr<int64_t>() + rp.numel()),
          std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel())};
  for (size_t v = 0; v + 1 < out.first.size(); ++v)
    std::sort(out.second.begin() + out.first[v], out.second.begin() + out.first[v + 1]);
  return out;
}

// Calls f(w) for every common neighbour w of u and v (sorted rows).
template <typename F>
void for_common(const std::vector<int64_t>& rp, const std::vector<int64_t>& col, int64_t u, int64_t v, F f) {
  int64_t i = rp[size_t(u)], ie = rp[size_t(u) + 1], j = rp[size_t(v)], je = rp[size_t(v) + 1];
  while (i < ie && j < je) {
    const int64_t a = col[size_t(i)], b = col[size_t(j)];
    if (a < b) {
      ++i;
    } else if (b < a) {
      ++j;
    } else {
      f(a);
      ++i;
      ++j;
    }
  }
}

}  // namespace

std::vector<double> betweenness_centrality(const std::vector<int64_t>& rp, const std::vector<int64_t>& col) {
  const int64_t n = int64_t(rp.size()) - 1;
  // Sources in fixed chunks with one accumulator each, summed in chunk order: the result does
  // not depend on the thread count.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(n, 64));
  std::vector<std::vector<double>> acc(size_t(chunks), std::vector<double>(size_t(std::max<int64_t>(n, 0)), 0.0));
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    std::vector<int64_t> dist(static_cast<size_t>(n)), order;
    std::vector<double> sigma(static_cast<size_t>(n)), delta(static_cast<size_t>(n));
    order.reserve(size_t(n));
    for (int64_t ch = cb; ch < ce; ++ch) {
      std::vector<double>& b = acc[size_t(ch)];
      for (int64_t s = ch * n / chunks; s < (ch + 1) * n / chunks; ++s) {
        std::fill(dist.begin(), dist.end(), -1);
        std::fill(sigma.begin(), sigma.end(), 0.0);
        std::fill(delta.begin(), delta.end(), 0.0);
        order.clear();
        dist[size_t(s)] = 0;
        sigma[size_t(s)] = 1;
        order.push_back(s);
        for (size_t head = 0; head < order.size(); ++head) {  // BFS; `order` is the queue
          const int64_t v = order[head];
          for (int64_t k = rp[size_t(v)]; k < rp[size_t(v) + 1]; ++k) {
            const int64_t w = col[size_t(k)];
            if (dist[size_t(w)] < 0) {
              dist[size_t(w)] = dist[size_t(v)] + 1;
              order.push_back(w);
            }
            if (dist[size_t(w)] == dist[size_t(v)] + 1) sigma[size_t(w)] += sigma[size_t(v)];
          }
        }
        for (size_t i = order.size(); i-- > 1;) {  // dependencies, farthest first
          const int64_t w = order[i];
          for (int64_t k = rp[size_t(w)]; k < rp[size_t(w) + 1]; ++k) {
            const int64_t v = col[size_t(k)];
            if (dist[size_t(v)] == dist[size_t(w)] - 1)
              delta[size_t(v)] += sigma[size_t(v)] / sigma[size_t(w)] * (1 + delta[size_t(w)]);
          }
          b[size_t(w)] += delta[size_t(w)];
        }
      }
    }
  });
  std::vector<double> out(size_t(std::max<int64_t>(n, 0)), 0.0);
  for (const auto& b : acc)
    for (int64_t v = 0; v < n; ++v) out[size_t(v)] += b[size_t(v)];
  for (double& x : out) x /= 2;  // undirected: every pair was counted from both ends
  return out;
}

std::vector<double> core_numbers(const std::vector<int64_t>& rp, const std::vector<int64_t>& col) {
  // Batagelj-Zaversnik: nodes bucketed by current degree, peeled in increasing order.
  const int64_t n = int64_t(rp.size()) - 1;
  std::vector<int64_t> deg(static_cast<size_t>(n)), pos(static_cast<size_t>(n)), vert(static_cast<size_t>(n));
  int64_t max_deg = 0;
  for (int64_t v = 0; v < n; ++v) max_deg = std::max(max_deg, deg[size_t(v)] = rp[size_t(v) + 1] - rp[size_t(v)]);
  std::vector<int64_t> bin(size_t(max_deg + 1), 0);
  for (int64_t v = 0; v < n; ++v) ++bin[size_t(deg[size_t(v)])];
  for (int64_t d = 0, start = 0; d <= max_deg; ++d) {
    const int64_t c = bin[size_t(d)];
    bin[size_t(d)] = start;
    start += c;
  }
  for (int64_t v = 0; v < n; ++v) {
    pos[size_t(v)] = bin[size_t(deg[size_t(v)])]++;
    vert[size_t(pos[size_t(v)])] = v;
  }
  for (int64_t d = max_deg; d > 0; --d) bin[size_t(d)] = bin[size_t(d - 1)];
  if (max_deg >= 0 && !bin.empty()) bin[0] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = vert[size_t(i)];
    for (int64_t k = rp[size_t(v)]; k < rp[size_t(v) + 1]; ++k) {
      const int64_t u = col[size_t(k)];
      if (deg[size_t(u)] > deg[size_t(v)]) {  // move u to the front of its bin, then down one bin
        const int64_t du = deg[size_t(u)], pu = pos[size_t(u)], pw = bin[size_t(du)], w = vert[size_t(pw)];
        if (u != w) {
          pos[size_t(u)] = pw;
          vert[size_t(pu)] = w;
          pos[size_t(w)] = pu;
          vert[size_t(pw)] = u;
        }
        ++bin[size_t(du)];
        --deg[size_t(u)];
      }
    }
  }
  return std::vector<double>(deg.begin(), deg.end());
}

std::vector<double> clustering_coefficients(const std::vector<int64_t>& rp, const std::vector<int64_t>& col) {
  const int64_t n = int64_t(rp.size()) - 1;
  std::vector<double> c(size_t(std::max<int64_t>(n, 0)), 0.0);
  at::parallel_for(0, n, 64, [&](int64_t b, int64_t e) {
    std::vector<char> mark(static_cast<size_t>(n), 0);
    for (int64_t v = b; v < e; ++v) {
      const int64_t d = rp[size_t(v) + 1] - rp[size_t(v)];
      if (d < 2) continue;
      for (int64_t k = rp[size_t(v)]; k < rp[size_t(v) + 1]; ++k) mark[size_t(col[size_t(k)])] = 1;
      int64_t links = 0;  // each link among the neighbours is seen from both ends
      for (int64_t k = rp[size_t(v)]; k < rp[size_t(v) + 1]; ++k) {
        const int64_t u = col[size_t(k)];
        for (int64_t q = rp[size_t(u)]; q < rp[size_t(u) + 1]; ++q) links += mark[size_t(col[size_t(q)])];
      }
      for (int64_t k = rp[size_t(v)]; k < rp[size_t(v) + 1]; ++k) mark[size_t(col[size_t(k)])] = 0;
      c[size_t(v)] = double(links) / double(d * (d - 1));
    }
  });
  return c;
}

at::Tensor same_label_probability(const std::string& name, const at::Tensor& rowptr, const at::Tensor& col) {
  check_heuristic(name);
  const Csr csr = host_csr(rowptr, col);
  const std::vector<int64_t>& rp = csr.first;
  const std::vector<int64_t>& c = csr.second;
  const int64_t n = int64_t(rp.size()) - 1, nnz = int64_t(c.size());
  at::Tensor out = torch::zeros({nnz}, torch::kFloat64);
  double* p = out.data_ptr<double>();
  auto deg = [&](int64_t v) { return double(rp[size_t(v) + 1] - rp[size_t(v)]); };
  // Per entry (v, u): a score, then divided by its maximum over the entries.
  auto per_edge = [&](auto score) {
    at::parallel_for(0, n, 64, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v)
        for (int64_t k = rp[size_t(v)]; k < rp[size_t(v) + 1]; ++k) p[k] = score(v, c[size_t(k)]);
    });
  };
  auto by_max = [&] {
    const double m = nnz ? out.max().item<double>() : 0.0;
    if (m > 0) out.div_(m);
  };
  if (name == "degree") {
    per_edge([&](int64_t v, int64_t u) { return deg(u) * deg(v); });
    by_max();
  } else if (name == "common_neighbours" || name == "jaccard" || name == "adamic_adar") {
    per_edge([&](int64_t v, int64_t u) {
      double common = 0, aa = 0;
      for_common(rp, c, u, v, [&](int64_t w) {
        common += 1;
        aa += 1.0 / std::log(deg(w));  // a common neighbour of an edge's ends has degree >= 2
      });
      if (name == "jaccard") return common / (deg(u) + deg(v) - common);
      return name == "adamic_adar" ? aa : common;
    });
    if (name != "jaccard") by_max();
  } else {
    const std::vector<double> s = name == "betweenness" ? betweenness_centrality(rp, c)
                                  : name == "kshell"    ? core_numbers(rp, c)
                                                        : clustering_coefficients(rp, c);
    const double lo = s.empty() ? 0 : *std::min_element(s.begin(), s.end());
    const double hi = s.empty() ? 0 : *std::max_element(s.begin(), s.end());
    per_edge([&](int64_t v, int64_t u) {
      return hi > lo ? 1.0 - std::abs(s[size_t(u)] - s[size_t(v)]) / (hi - lo) : 1.0;
    });
  }
  return out;
}

}  // namespace adgnn::detail
