// permute_nodes: every array follows its node, statistics are unchanged, the inverse order gives
// the graph back, original_id composes and survives the HDF5 round trip; bad orders are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "../partition/fixtures.h"
#include "adgnn/loaders.h"
#include "fixtures.h"

using adgnn::Graph;
using adgnn::InputError;

namespace {

std::vector<int64_t> shuffled(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& order) {
  std::vector<int64_t> inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv[size_t(order[i])] = int64_t(i);
  return inv;
}


}  // namespace

TEST(PermuteNodes, EveryArrayFollowsItsNode) {
  for (const Graph& g : {adgnn::test::hand_made(), adgnn::test::small_csbm()}) {
    const int64_t n = g.num_nodes;
    const auto order = shuffled(n, 7);
    const auto new_of = inverse(order);
    const Graph h = adgnn::permute_nodes(g, order);
    h.validate("permuted");
    ASSERT_EQ(h.original_id, order);
    const auto gd = g.features.to_dense(), hd = h.features.to_dense();
    const size_t f = size_t(g.features.cols);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = order[size_t(i)];
      EXPECT_EQ(h.labels[size_t(i)], g.labels[size_t(o)]);
      ASSERT_EQ(h.adj.degree(i), g.adj.degree(o));
      for (int64_t k = 0; k < h.adj.degree(i); ++k)  // same entries, same order, new ids
        EXPECT_EQ(h.adj.indices[size_t(h.adj.indptr[size_t(i)] + k)],
                  new_of[size_t(g.adj.indices[size_t(g.adj.indptr[size_t(o)] + k)])]);
      for (size_t c = 0; c < f; ++c) EXPECT_EQ(hd[size_t(i) * f + c], gd[size_t(o) * f + c]);
      for (size_t s = 0; s < g.splits.size(); ++s)
        for (int64_t k = 0; k < g.splits[s].count; ++k) {
          EXPECT_EQ(h.splits[s].train[size_t(k * n + i)], g.splits[s].train[size_t(k * n + o)]);
          EXPECT_EQ(h.splits[s].test[size_t(k * n + i)], g.splits[s].test[size_t(k * n + o)]);
        }
    }
    // Renumbering changes no statistic.
    const auto a = adgnn::compute_stats(g), b = adgnn::compute_stats(h);
    EXPECT_EQ(a.undirected_edges, b.undirected_edges);
    EXPECT_EQ(a.self_loops, b.self_loops);
    EXPECT_EQ(a.duplicates, b.duplicates);
    EXPECT_EQ(a.components, b.components);
    EXPECT_EQ(a.largest_component, b.largest_component);
    EXPECT_DOUBLE_EQ(a.edge_homophily, b.edge_homophily);
    EXPECT_EQ(a.degree_max, b.degree_max);
    // The inverse order gives the graph back, and original_id composes to the identity.
    const Graph back = adgnn::permute_nodes(h, new_of);
    fixtures::expect_same_content(back, g);
    std::vector<int64_t> identity(static_cast<size_t>(n));
    std::iota(identity.begin(), identity.end(), int64_t{0});
    EXPECT_EQ(back.original_id, identity);
  }
}

TEST(PermuteNodes, OriginalIdSurvivesTheH5RoundTripAndIsChecked) {
  const Graph g = adgnn::test::small_csbm();
  const Graph h = adgnn::permute_nodes(g, shuffled(g.num_nodes, 3));
  const std::string dir = fixtures::scratch_dir();
  adgnn::write_graph_h5(h, dir + "/p.h5");
  const Graph r = adgnn::read_graph_h5(dir + "/p.h5");
  EXPECT_EQ(r.original_id, h.original_id);
  fixtures::expect_same_content(r, h);
  adgnn::write_graph_h5(g, dir + "/g.h5");  // never renumbered: no /original_id
  EXPECT_TRUE(adgnn::read_graph_h5(dir + "/g.h5").original_id.empty());
  Graph bad = h;
  bad.original_id[1] = bad.original_id[0];
  EXPECT_THROW(bad.validate("bad"), InputError);
}

TEST(PermuteNodes, RefusesWhatIsNotAPermutation) {
  const Graph g = adgnn::test::hand_made();
  std::vector<int64_t> order(12);
  std::iota(order.begin(), order.end(), int64_t{0});
  auto expect_error = [&](std::vector<int64_t> o, const std::string& what) {
    try {
      adgnn::permute_nodes(g, o, "--order x");
      ADD_FAILURE() << "accepted " << what;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--order x:"), std::string::npos) << e.what();
    }
  };
  expect_error(std::vector<int64_t>(order.begin(), order.end() - 1), "too short");
  auto dup = order;
  dup[3] = 4;
  expect_error(dup, "a repeated node");
  auto out = order;
  out[0] = 12;
  expect_error(out, "a node out of range");
}
