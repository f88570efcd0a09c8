// Statistics on a 6-node graph computed by hand.
#include <gtest/gtest.h>

#include "adgnn/loaders.h"

namespace {

// Stored edges: 0->1, 1->0 (reciprocal), 1->2, 2->3, 3->3 (loop), 2->3 (duplicate), 0->2.
// Node 4 and 5 are isolated except 4->5. Labels: 0 0 1 1 0 1.
adgnn::Graph toy() {
  adgnn::Graph g;
  g.name = "toy";
  g.num_nodes = 6;
  g.adj.rows = g.adj.cols = 6;
  g.adj.indptr = {0, 2, 4, 6, 7, 8, 8};
  g.adj.indices = {1, 2, 0, 2, 3, 3, 3, 5};
  g.features.rows = 6;
  g.features.cols = 2;
  g.features.dense = {1, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0, 3};
  g.labels = {0, 0, 1, 1, 0, 1};
  g.num_classes = 2;
  g.validate("toy");
  return g;
}

TEST(Stats, HandComputedValues) {
  const auto s = adgnn::compute_stats(toy());
  EXPECT_EQ(s.stored_edges, 8);
  EXPECT_EQ(s.self_loops, 1);
  EXPECT_EQ(s.duplicates, 1);
  EXPECT_EQ(s.reciprocal_pairs, 1);
  // Undirected: {0,1} {0,2} {1,2} {2,3} {4,5}.
  EXPECT_EQ(s.undirected_edges, 5);
  EXPECT_EQ(s.isolated, 0);
  EXPECT_EQ(s.components, 2);
  EXPECT_EQ(s.largest_component, 4);
  EXPECT_EQ(s.feature_nnz, 6);
  EXPECT_EQ(s.class_sizes, (std::vector<int64_t>{3, 3}));
  // Same-label undirected edges: {0,1}, {2,3} -> 2 / 5.
  EXPECT_DOUBLE_EQ(s.edge_homophily, 0.4);
  // Stored entries with equal labels: 0->1, 1->0, 2->3, 3->3, 2->3 -> 5 / 8.
  EXPECT_DOUBLE_EQ(s.edge_homophily_stored, 5.0 / 8.0);
  // Node homophily: 0: 1/2, 1: 1/2, 2: 1/3, 3: 1/1, 4: 0/1, 5: 0/1.
  EXPECT_NEAR(s.node_homophily, (0.5 + 0.5 + 1.0 / 3 + 1 + 0 + 0) / 6, 1e-12);
  // Degrees 2,2,3,1,1,1: class 0 (nodes 0,1,4) D0 = 5, class 1 D1 = 5; p = 0.5 each.
  EXPECT_NEAR(s.adjusted_homophily, (0.4 - 0.5) / (1 - 0.5), 1e-12);
  // h_0 = same-label endpoints in class 0 / D0 = (1 + 1 + 0) / 5; h_1 = (0 + 1 + 0) / 5... (2: 1 same of 3; 3: 1 of 1; 5: 0 of 1) = 2/5.
  const double h0 = 2.0 / 5, h1 = 2.0 / 5;
  EXPECT_NEAR(s.class_insensitive_homophily, std::max(0.0, h0 - 0.5) + std::max(0.0, h1 - 0.5), 1e-12);
  EXPECT_EQ(s.degree_min, 1);
  EXPECT_EQ(s.degree_max, 3);
  EXPECT_DOUBLE_EQ(s.degree_mean, 10.0 / 6);
  EXPECT_DOUBLE_EQ(s.degree_median, 1.5);
}

TEST(Stats, JsonAndTableNameTheDataset) {
  const auto g = toy();
  const auto s = adgnn::compute_stats(g);
  EXPECT_NE(adgnn::stats_json(g, s).find("\"edge_homophily\": 0.4"), std::string::npos);
  EXPECT_NE(adgnn::stats_table(g, s).find("undirected edges"), std::string::npos);
}

TEST(Validate, RejectsBrokenGraphs) {
  auto g = toy();
  g.labels[2] = 7;
  EXPECT_THROW(g.validate("x"), adgnn::InputError);
  g = toy();
  g.features.dense[3] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(g.validate("x"), adgnn::InputError);
  g = toy();
  g.adj.indices[0] = 6;
  EXPECT_THROW(g.validate("x"), adgnn::InputError);
}

}  // namespace
