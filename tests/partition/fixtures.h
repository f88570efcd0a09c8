// Graphs shared by the partition tests: a small CSBM (dense features) and a hand-made graph with
// self-loops, duplicates, one-directional edges, an isolated node and sparse features.
#pragma once

#include <cstdint>
#include <vector>

#include "adgnn/loaders.h"

namespace adgnn::test {

inline Graph small_csbm() {
  adgnn::CsbmParams c;
  c.name = "small";
  c.nodes = 300;
  c.classes = 3;
  c.avg_degree = 6;
  c.degree_dist = "powerlaw";
  c.features = 5;
  c.seed = 4;
  c.threads = 1;
  return adgnn::generate_csbm(c);
}

// 12 nodes: self-loops (0, 5), duplicates (1 -> 2 twice, 3 -> 4 and 4 -> 3), one-directional
// edges, an isolated node (11); sparse features, two splits.
inline Graph hand_made() {
  Graph g;
  g.name = "hand";
  g.directed = true;
  g.num_nodes = 12;
  const std::vector<std::vector<int32_t>> rows = {
      {0, 1, 7}, {2, 2, 0}, {3}, {4, 4}, {3, 9}, {5, 6}, {}, {8, 0}, {10}, {}, {8, 2}, {}};
  g.adj.rows = g.adj.cols = g.num_nodes;
  for (const auto& r : rows) {
    g.adj.indices.insert(g.adj.indices.end(), r.begin(), r.end());
    g.adj.indptr.push_back(static_cast<int64_t>(g.adj.indices.size()));
  }
  g.features.rows = 12;
  g.features.cols = 6;
  g.features.sparse = true;
  Csr& f = g.features.csr;
  f.rows = 12;
  f.cols = 6;
  for (int32_t u = 0; u < 12; ++u) {
    for (int32_t c = 0; c < 6; ++c)
      if ((u + c) % 3 == 0) {
        f.indices.push_back(c);
        f.values.push_back(static_cast<float>(u * 10 + c));
      }
    f.indptr.push_back(static_cast<int64_t>(f.indices.size()));
  }
  g.num_classes = 3;
  for (int64_t u = 0; u < 12; ++u) g.labels.push_back(u % 3);
  adgnn::SplitSet s;
  s.name = "two";
  s.count = 2;
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t u = 0; u < 12; ++u) {
      s.train.push_back((u + k) % 3 == 0);
      s.val.push_back((u + k) % 3 == 1);
      s.test.push_back((u + k) % 3 == 2);
    }
  g.splits.push_back(s);
  g.validate("hand_made");
  return g;
}

}  // namespace adgnn::test
