// The 6-node graph the hand-computed tests share: edges 0-1, 0-2, 0-3, 1-2, 3-4; node 5 isolated.
// Degrees 3, 2, 2, 2, 1, 0; N(0) = {1, 2, 3}, N(1) = {0, 2}, N(2) = {0, 1}, N(3) = {0, 4}, N(4) = {3}.
#pragma once

#include "adgnn/loaders.h"

namespace adgnn::testing {

inline Graph six_nodes() {
  Graph g;
  g.name = "six";
  g.num_nodes = 6;
  g.adj.rows = g.adj.cols = 6;
  g.adj.indptr = {0, 3, 4, 4, 5, 5, 5};
  g.adj.indices = {1, 2, 3, 2, 4};
  g.features.rows = 6;
  g.features.cols = 3;
  g.features.dense = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1};
  g.labels = {0, 0, 1, 1, 0, 1};
  g.num_classes = 2;
  g.validate("six");
  return g;
}

}  // namespace adgnn::testing
