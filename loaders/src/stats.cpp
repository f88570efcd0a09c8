// Graph statistics with the definitions of ../shared/data/README.md: counts on the stored edges,
// homophily and degrees on the symmetric, self-loop-free, deduplicated graph.
#include <algorithm>
#include <numeric>

#include "adgnn/loaders.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"

namespace adgnn {

GraphStats compute_stats(const Graph& g) {
  GraphStats s;
  const int64_t n = g.num_nodes;
  s.nodes = n;
  s.stored_edges = g.adj.nnz();
  s.features = g.features.cols;
  s.feature_nnz = g.features.nnz();
  s.classes = g.num_classes;
  s.class_sizes.assign(static_cast<size_t>(g.num_classes), 0);
  for (auto y : g.labels)
    if (y != kUnlabelled) ++s.class_sizes[y];
  // Homophily counts the edges whose two ends are labelled.
  auto labelled = [&](int64_t v) { return g.labels[v] != kUnlabelled; };

  // Stored entries: self-loops, duplicate (u, v) entries, homophily over every stored entry.
  int64_t same_stored = 0, labelled_stored = 0;
  std::vector<int32_t> row;
  for (int64_t u = 0; u < n; ++u) {
    row.assign(g.adj.indices.begin() + g.adj.indptr[u], g.adj.indices.begin() + g.adj.indptr[u + 1]);
    for (auto v : row) {
      if (v == u) ++s.self_loops;
      if (!labelled(u) || !labelled(v)) continue;
      ++labelled_stored;
      if (g.labels[v] == g.labels[u]) ++same_stored;
    }
    std::sort(row.begin(), row.end());
    s.duplicates += static_cast<int64_t>(row.size()) -
                    (std::unique(row.begin(), row.end()) - row.begin());
  }
  s.edge_homophily_stored = labelled_stored ? double(same_stored) / double(labelled_stored) : 0.0;

  // Pairs stored in both directions: (u, v) with u < v present as u->v and v->u.
  {
    std::vector<uint64_t> fwd, bwd;
    for (int64_t u = 0; u < n; ++u)
      for (int64_t k = g.adj.indptr[u]; k < g.adj.indptr[u + 1]; ++k) {
        const int64_t v = g.adj.indices[k];
        if (u < v) fwd.push_back((uint64_t(u) << 32) | uint64_t(v));
        if (v < u) bwd.push_back((uint64_t(v) << 32) | uint64_t(u));
      }
    for (auto* a : {&fwd, &bwd}) {
      std::sort(a->begin(), a->end());
      a->erase(std::unique(a->begin(), a->end()), a->end());
    }
    std::vector<uint64_t> both;
    std::set_intersection(fwd.begin(), fwd.end(), bwd.begin(), bwd.end(),
                          std::back_inserter(both));
    s.reciprocal_pairs = static_cast<int64_t>(both.size());
  }

  const Csr sym = g.symmetric();
  s.undirected_edges = sym.nnz() / 2;
  std::vector<int64_t> deg(static_cast<size_t>(n));
  int64_t same_edges2 = 0;  // same-label entries of the symmetric graph (each edge twice)
  int64_t labelled2 = 0;    // entries with both ends labelled
  int64_t labelled_nodes = 0, labelled_with_edges = 0;
  double node_h_sum = 0;
  const int64_t C = g.num_classes;
  std::vector<double> class_deg(static_cast<size_t>(C), 0.0), class_same(static_cast<size_t>(C), 0.0);
  for (int64_t u = 0; u < n; ++u) {
    deg[u] = sym.degree(u);
    if (deg[u] == 0) ++s.isolated;
    if (!labelled(u)) continue;
    ++labelled_nodes;
    int64_t same = 0, known = 0;
    for (int64_t k = sym.indptr[u]; k < sym.indptr[u + 1]; ++k) {
      if (!labelled(sym.indices[k])) continue;
      ++known;
      same += g.labels[sym.indices[k]] == g.labels[u];
    }
    same_edges2 += same;
    labelled2 += known;
    class_deg[g.labels[u]] += double(known);
    class_same[g.labels[u]] += double(same);
    if (known > 0) {
      ++labelled_with_edges;
      node_h_sum += double(same) / double(known);
    }
  }
  s.edge_homophily = labelled2 ? double(same_edges2) / double(labelled2) : 0.0;
  s.node_homophily = labelled_with_edges ? node_h_sum / double(labelled_with_edges) : 0.0;
  // Adjusted homophily (Platonov et al. 2023): edge homophily corrected for the degree-weighted
  // class distribution.
  const double two_m = double(labelled2);
  double sum_p2 = 0;
  for (int64_t c = 0; c < C; ++c) {
    const double p = two_m > 0 ? class_deg[c] / two_m : 0.0;
    sum_p2 += p * p;
  }
  s.adjusted_homophily = sum_p2 < 1.0 ? (s.edge_homophily - sum_p2) / (1.0 - sum_p2) : 0.0;
  // Class-insensitive homophily (Lim et al. 2021).
  if (C > 1) {
    double acc = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double hk = class_deg[c] > 0 ? class_same[c] / class_deg[c] : 0.0;
      acc += std::max(0.0, hk - double(s.class_sizes[c]) / double(std::max<int64_t>(labelled_nodes, 1)));
    }
    s.class_insensitive_homophily = acc / double(C - 1);
  }

  if (n > 0) {
    std::vector<int64_t> sorted = deg;
    std::sort(sorted.begin(), sorted.end());
    s.degree_min = sorted.front();
    s.degree_max = sorted.back();
    s.degree_mean = double(sym.nnz()) / double(n);
    s.degree_median = n % 2 ? double(sorted[n / 2])
                            : 0.5 * double(sorted[n / 2 - 1] + sorted[n / 2]);
  }

  // Connected components by union-find with path halving.
  std::vector<int32_t> parent(static_cast<size_t>(n));
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int64_t u = 0; u < n; ++u)
    for (int64_t k = sym.indptr[u]; k < sym.indptr[u + 1]; ++k) {
      const int32_t a = find(static_cast<int32_t>(u)), b = find(sym.indices[k]);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  std::vector<int64_t> comp_size(static_cast<size_t>(n), 0);
  for (int64_t u = 0; u < n; ++u) ++comp_size[find(static_cast<int32_t>(u))];
  for (auto c : comp_size) {
    if (c > 0) ++s.components;
    s.largest_component = std::max(s.largest_component, c);
  }
  return s;
}

std::string stats_json(const Graph& g, const GraphStats& s) {
  nlohmann::ordered_json j;
  j["name"] = g.name;
  j["source"] = g.source;
  j["source_sha256"] = g.source_sha256;
  j["directed"] = g.directed;
  j["nodes"] = s.nodes;
  j["stored_edges"] = s.stored_edges;
  j["self_loops"] = s.self_loops;
  j["duplicates"] = s.duplicates;
  j["reciprocal_pairs"] = s.reciprocal_pairs;
  j["undirected_edges"] = s.undirected_edges;
  j["isolated_nodes"] = s.isolated;
  j["components"] = s.components;
  j["largest_component"] = s.largest_component;
  j["features"] = s.features;
  j["features_sparse"] = g.features.sparse;
  j["feature_nnz"] = s.feature_nnz;
  j["classes"] = s.classes;
  j["class_sizes"] = s.class_sizes;
  j["edge_homophily"] = s.edge_homophily;
  j["edge_homophily_stored"] = s.edge_homophily_stored;
  j["node_homophily"] = s.node_homophily;
  j["class_insensitive_homophily"] = s.class_insensitive_homophily;
  j["adjusted_homophily"] = s.adjusted_homophily;
  j["degree"] = {{"min", s.degree_min},
                 {"max", s.degree_max},
                 {"mean", s.degree_mean},
                 {"median", s.degree_median}};
  nlohmann::ordered_json splits = nlohmann::ordered_json::object();
  for (const auto& sp : g.splits) splits[sp.name] = sp.count;
  j["splits"] = splits;
  return j.dump(2);
}

std::string stats_table(const Graph& g, const GraphStats& s) {
  std::string out;
  auto row = [&](const std::string& k, const std::string& v) {
    out += fmt::format("{:<30} {}\n", k, v);
  };
  auto num = [](int64_t v) {
    std::string d = std::to_string(v < 0 ? -v : v), r;
    for (size_t i = 0; i < d.size(); ++i) {
      if (i && (d.size() - i) % 3 == 0) r += ',';
      r += d[i];
    }
    return v < 0 ? "-" + r : r;
  };
  row("dataset", g.name);
  row("source", g.source);
  row("sha256", g.source_sha256);
  row("directed (stored)", g.directed ? "yes" : "no");
  row("nodes", num(s.nodes));
  row("stored edges", num(s.stored_edges));
  row("  self-loops", num(s.self_loops));
  row("  duplicate entries", num(s.duplicates));
  row("  pairs in both directions", num(s.reciprocal_pairs));
  row("undirected edges", num(s.undirected_edges));
  row("isolated nodes", num(s.isolated));
  row("components (largest)", fmt::format("{} ({})", num(s.components), num(s.largest_component)));
  row("features", fmt::format("{} ({}, {} non-zeros)", num(s.features),
                              g.features.sparse ? "sparse" : "dense", num(s.feature_nnz)));
  row("classes", num(s.classes));
  std::vector<std::string> sizes;
  for (auto c : s.class_sizes) sizes.push_back(num(c));
  row("class sizes", fmt::format("{}", fmt::join(sizes, ", ")));
  row("edge homophily", fmt::format("{:.4f} ({:.4f} on stored entries)", s.edge_homophily,
                                    s.edge_homophily_stored));
  row("node homophily", fmt::format("{:.4f}", s.node_homophily));
  row("class-insensitive homophily", fmt::format("{:.4f}", s.class_insensitive_homophily));
  row("adjusted homophily", fmt::format("{:.4f}", s.adjusted_homophily));
  row("degree min / median / mean / max",
      fmt::format("{} / {} / {:.2f} / {}", s.degree_min, s.degree_median, s.degree_mean,
                  num(s.degree_max)));
  std::vector<std::string> sp;
  for (const auto& x : g.splits) sp.push_back(fmt::format("{} ({})", x.name, x.count));
  row("splits", sp.empty() ? "none" : fmt::format("{}", fmt::join(sp, ", ")));
  return out;
}

}  // namespace adgnn
