// Every dataset in ../shared/data loads and its statistics equal those in its README.md.
#include <gtest/gtest.h>

#include "adgnn/loaders.h"
#include "fixtures.h"

namespace {

struct Expected {
  const char* name;
  int64_t nodes, stored, self_loops, duplicates, reciprocal, undirected, isolated, components,
      largest, features, feature_nnz;
  std::vector<int64_t> class_sizes;
  double edge_h, edge_h_stored, node_h, ci_h, adj_h;  // stored < 0: not given in the README
};

const std::vector<Expected>& expected() {
  static const std::vector<Expected> e{
      {"cora_ml", 2995, 8416, 0, 0, 258, 8158, 0, 61, 2810, 2879, 151171,
       {354, 402, 452, 442, 857, 193, 295}, 0.7886, 0.7921, 0.8098, 0.7401, 0.7490},
      {"citeseer", 4230, 5358, 0, 0, 21, 5337, 0, 515, 1681, 602, 19391,
       {628, 740, 778, 831, 558, 695}, 0.9494, 0.9494, 0.9577, 0.9437, 0.9378},
      // 248 self-loop entries (124 loops listed twice) + 112 other duplicates: 124 + 112 extra.
      {"citeseer_planetoid", 3327, 9464, 248, 236, 4552, 4552, 48, 438, 2120, 3703, 105165,
       {264, 590, 668, 701, 596, 508}, 0.7355, 0.7439, 0.7166, 0.6267, 0.6707},
      {"dblp", 17716, 105734, 0, 0, 52867, 52867, 0, 589, 16191, 1639, 92192,
       {7920, 5645, 1982, 2169}, 0.8279, -1, 0.8128, 0.6522, 0.6794},
      {"photo", 7650, 143663, 1, 0, 24581, 119081, 115, 136, 7487, 745, 1979909,
       {369, 1686, 703, 915, 882, 823, 1941, 331}, 0.8272, 0.8306, 0.8493, 0.7722, 0.7850},
      // Film: the README counts 40,987 feature entries, 10 of which repeat an index already on
      // their line; binary features keep each index once (as PyG's Actor does): 40,977.
      {"film", 7600, 33391, 122, 3372, 3267, 26659, 0, 1, 7600, 932, 40977,
       {853, 1337, 1630, 1815, 1965}, 0.2167, 0.2193, 0.2199, 0.0064, 0.0028},
      {"cornell", 183, 298, 3, 0, 18, 277, 0, 1, 183, 1703, 17240, {38, 16, 30, 82, 17}, 0.1227,
       0.1309, 0.1110, 0.0383, -0.2201},
      {"texas", 183, 325, 16, 0, 30, 279, 0, 1, 183, 1703, 15266, {33, 1, 18, 101, 30}, 0.0609,
       0.1077, 0.0567, 0.0000, -0.2936},
      {"wisconsin", 251, 515, 16, 0, 49, 450, 0, 1, 251, 1703, 24057, {10, 70, 118, 32, 21},
       0.1778, 0.1961, 0.1552, 0.0461, -0.1733},
      {"chameleon", 890, 8854, 0, 0, 0, 8854, 0, 1, 890, 2325, 9903, {242, 134, 209, 164, 141},
       0.2361, -1, 0.2441, 0.0444, 0.0295},
      {"squirrel", 2223, 46998, 0, 0, 0, 46998, 0, 1, 2223, 2089, 32481,
       {756, 516, 397, 321, 233}, 0.2072, -1, 0.1905, 0.0398, 0.0086},
  };
  return e;
}

class RealDataset : public ::testing::TestWithParam<Expected> {};

TEST_P(RealDataset, StatisticsMatchTheDataReadme) {
  const std::string dir = fixtures::data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (set ADGNN_DATA to run this test)";
  const Expected& x = GetParam();
  const adgnn::Graph g = adgnn::load_dataset(x.name, dir);
  const adgnn::GraphStats s = adgnn::compute_stats(g);
  EXPECT_EQ(s.nodes, x.nodes);
  EXPECT_EQ(s.stored_edges, x.stored);
  EXPECT_EQ(s.self_loops, x.self_loops);
  EXPECT_EQ(s.duplicates, x.duplicates);
  EXPECT_EQ(s.reciprocal_pairs, x.reciprocal);
  EXPECT_EQ(s.undirected_edges, x.undirected);
  EXPECT_EQ(s.isolated, x.isolated);
  EXPECT_EQ(s.components, x.components);
  EXPECT_EQ(s.largest_component, x.largest);
  EXPECT_EQ(s.features, x.features);
  EXPECT_EQ(s.feature_nnz, x.feature_nnz);
  EXPECT_EQ(s.class_sizes, x.class_sizes);
  // The README gives four decimals.
  EXPECT_NEAR(s.edge_homophily, x.edge_h, 5e-5);
  if (x.edge_h_stored >= 0) {
    EXPECT_NEAR(s.edge_homophily_stored, x.edge_h_stored, 5e-5);
  }
  EXPECT_NEAR(s.node_homophily, x.node_h, 5e-5);
  EXPECT_NEAR(s.class_insensitive_homophily, x.ci_h, 5e-5);
  EXPECT_NEAR(s.adjusted_homophily, x.adj_h, 5e-5);
  EXPECT_EQ(s.degree_mean * double(x.nodes), 2.0 * double(x.undirected));
}

INSTANTIATE_TEST_SUITE_P(SharedData, RealDataset, ::testing::ValuesIn(expected()),
                         [](const auto& info) { return std::string(info.param.name); });

int64_t count(const std::vector<uint8_t>& m, int64_t split, int64_t n) {
  int64_t c = 0;
  for (int64_t v = 0; v < n; ++v) c += m[split * n + v];
  return c;
}

TEST(RealDatasetSplits, GeomGcnSplitFilesHaveTheDocumentedSizes) {
  const std::string dir = fixtures::data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (set ADGNN_DATA to run this test)";
  struct S { const char* name; int64_t train, val, test; };
  for (const S& x : {S{"film", 3648, 2432, 1520}, S{"cornell", 87, 59, 37},
                     S{"texas", 87, 59, 37}, S{"wisconsin", 120, 80, 51}}) {
    const auto g = adgnn::load_dataset(x.name, dir);
    const auto* s = g.find_splits("geom-gcn");
    ASSERT_NE(s, nullptr) << x.name;
    ASSERT_EQ(s->count, 10) << x.name;
    for (int64_t i = 0; i < 10; ++i) {
      EXPECT_EQ(count(s->train, i, g.num_nodes), x.train) << x.name << " split " << i;
      EXPECT_EQ(count(s->val, i, g.num_nodes), x.val) << x.name << " split " << i;
      EXPECT_EQ(count(s->test, i, g.num_nodes), x.test) << x.name << " split " << i;
      for (int64_t v = 0; v < g.num_nodes; ++v)  // disjoint and covering
        EXPECT_EQ(s->train[i * g.num_nodes + v] + s->val[i * g.num_nodes + v] +
                      s->test[i * g.num_nodes + v], 1);
    }
  }
}

TEST(RealDatasetSplits, PlanetoidPublicAndGeomGcnSplits) {
  const std::string dir = fixtures::data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (set ADGNN_DATA to run this test)";
  const auto g = adgnn::load_dataset("citeseer_planetoid", dir);
  const auto* pub = g.find_splits("public");
  ASSERT_NE(pub, nullptr);
  EXPECT_EQ(count(pub->train, 0, g.num_nodes), 120);
  EXPECT_EQ(count(pub->val, 0, g.num_nodes), 500);
  EXPECT_EQ(count(pub->test, 0, g.num_nodes), 1000);
  const auto* geom = g.find_splits("geom-gcn");
  ASSERT_NE(geom, nullptr);
  EXPECT_EQ(geom->count, 10);
  EXPECT_EQ(count(geom->train, 0, g.num_nodes), 1596);
  EXPECT_EQ(count(geom->val, 0, g.num_nodes), 1065);
  EXPECT_EQ(count(geom->test, 0, g.num_nodes), 666);
  EXPECT_EQ(count(geom->train, 4, g.num_nodes), 1017);  // largest component only
}

TEST(RealDatasetSplits, PlatonovMasksAreReadInFortranOrder) {
  const std::string dir = fixtures::data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (set ADGNN_DATA to run this test)";
  struct S { const char* name; int64_t tr_lo, tr_hi, va_lo, va_hi, te_lo, te_hi; };
  for (const S& x : {S{"chameleon", 409, 440, 268, 310, 159, 194},
                     S{"squirrel", 1047, 1085, 691, 739, 416, 483}}) {
    const auto g = adgnn::load_dataset(x.name, dir);
    const auto* s = g.find_splits("platonov");
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->count, 10);
    for (int64_t i = 0; i < 10; ++i) {
      const int64_t tr = count(s->train, i, g.num_nodes), va = count(s->val, i, g.num_nodes),
                    te = count(s->test, i, g.num_nodes);
      EXPECT_GE(tr, x.tr_lo); EXPECT_LE(tr, x.tr_hi);
      EXPECT_GE(va, x.va_lo); EXPECT_LE(va, x.va_hi);
      EXPECT_GE(te, x.te_lo); EXPECT_LE(te, x.te_hi);
      EXPECT_EQ(tr + va + te, g.num_nodes) << x.name << " split " << i;
    }
  }
}

TEST(RealDatasetHdf5, ConvertedGraphsEqualTheirSource) {
  const std::string dir = fixtures::data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (set ADGNN_DATA to run this test)";
  const std::string tmp = fixtures::scratch_dir();
  for (const char* name : {"cora_ml", "film", "chameleon", "citeseer_planetoid"}) {
    const auto g = adgnn::load_dataset(name, dir);
    const std::string path = tmp + "/" + name + ".h5";
    adgnn::write_graph_h5(g, path);
    const auto h = adgnn::read_graph_h5(path);
    EXPECT_EQ(h.name, g.name);
    EXPECT_EQ(h.source_sha256, g.source_sha256);
    EXPECT_EQ(h.directed, g.directed);
    EXPECT_EQ(h.adj.indptr, g.adj.indptr);
    EXPECT_EQ(h.adj.indices, g.adj.indices);
    EXPECT_EQ(h.labels, g.labels);
    EXPECT_EQ(h.features.sparse, g.features.sparse);
    EXPECT_EQ(h.features.to_dense(), g.features.to_dense());
    ASSERT_EQ(h.splits.size(), g.splits.size());
    EXPECT_EQ(adgnn::compute_stats(h).edge_homophily, adgnn::compute_stats(g).edge_homophily);
  }
}

}  // namespace
