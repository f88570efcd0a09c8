// Same-label heuristics of the fast variant (the paper's appendix): every heuristic by hand on a
// 6-node graph, the model's use of them (d+ = sum of p_uv), the name check, and Exp-2's degree
// threshold.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "adgnn/model.h"
#include "depth/heuristics.h"
#include "six_nodes.h"

namespace {

using adgnn::testing::six_nodes;

using Edge = std::pair<int64_t, int64_t>;

// p_uv of every CSR entry, by unordered edge; checks that both directions agree.
std::map<Edge, double> per_edge(const std::string& name, const adgnn::GraphTensors& t) {
  const at::Tensor p = adgnn::detail::same_label_probability(name, t.rowptr, t.col);
  const at::Tensor rp = t.rowptr.to(torch::kInt64), col = t.col.to(torch::kInt64);
  std::map<Edge, double> out;
  for (int64_t v = 0; v < t.num_nodes; ++v)
    for (int64_t k = rp[v].item<int64_t>(); k < rp[v + 1].item<int64_t>(); ++k) {
      const int64_t u = col[k].item<int64_t>();
      const Edge e{std::min(u, v), std::max(u, v)};
      const double x = p[k].item<double>();
      if (out.count(e)) {
        EXPECT_DOUBLE_EQ(out[e], x) << name << " is not symmetric on " << e.first << "-" << e.second;
      }
      out[e] = x;
    }
  return out;
}

void expect_edges(const std::string& name, const adgnn::GraphTensors& t, const std::vector<double>& want) {
  const auto got = per_edge(name, t);
  const std::vector<Edge> edges{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {3, 4}};
  ASSERT_EQ(got.size(), edges.size()) << name;
  for (size_t i = 0; i < edges.size(); ++i)
    EXPECT_NEAR(got.at(edges[i]), want[i], 1e-12) << name << " on " << edges[i].first << "-" << edges[i].second;
}

TEST(Heuristics, NodeScoresByHand) {
  const auto t = adgnn::to_tensors(six_nodes(), torch::kCPU);
  const at::Tensor rp = t.rowptr.to(torch::kInt64), col = t.col.to(torch::kInt64);
  const std::vector<int64_t> r(rp.data_ptr<int64_t>(), rp.data_ptr<int64_t>() + rp.numel());
  const std::vector<int64_t> c(col.data_ptr<int64_t>(), col.data_ptr<int64_t>() + col.numel());
  // Betweenness: 0 lies on the unique shortest paths 1-3, 1-4, 2-3, 2-4; 3 on 4-0, 4-1, 4-2.
  EXPECT_EQ(adgnn::detail::betweenness_centrality(r, c), (std::vector<double>{4, 0, 0, 3, 0, 0}));
  // k-shell: the triangle 0-1-2 is the 2-core; 3 and 4 peel at 1; 5 is isolated.
  EXPECT_EQ(adgnn::detail::core_numbers(r, c), (std::vector<double>{2, 2, 2, 1, 1, 0}));
  // Clustering: 0 has one link (1-2) among its 3 neighbours' 3 pairs; 1 and 2 are closed; 3 has
  // an open pair; 4 and 5 have fewer than two neighbours.
  const auto cc = adgnn::detail::clustering_coefficients(r, c);
  const std::vector<double> want{1.0 / 3, 1, 1, 0, 0, 0};
  for (int v = 0; v < 6; ++v) EXPECT_NEAR(cc[size_t(v)], want[size_t(v)], 1e-15) << "node " << v;
}

TEST(Heuristics, SameLabelProbabilityByHand) {
  const auto t = adgnn::to_tensors(six_nodes(), torch::kCPU);
  // Edges in the order 0-1, 0-2, 0-3, 1-2, 3-4.
  // degree: d_u d_v = 6, 6, 6, 4, 2 over max 6.
  expect_edges("degree", t, {1, 1, 1, 4.0 / 6, 2.0 / 6});
  // common neighbours: {2}, {1}, {}, {0}, {} over max 1.
  expect_edges("common_neighbours", t, {1, 1, 0, 1, 0});
  // Jaccard: 1/|{0,1,2,3}|, 1/|{0,1,2,3}|, 0, 1/|{0,1,2}|, 0.
  expect_edges("jaccard", t, {0.25, 0.25, 0, 1.0 / 3, 0});
  // Adamic-Adar: 1/ln d_2, 1/ln d_1 (= 1/ln 2), 0, 1/ln d_0 (= 1/ln 3), 0 over max 1/ln 2.
  expect_edges("adamic_adar", t, {1, 1, 0, std::log(2.0) / std::log(3.0), 0});
  // Node-score similarity 1 - |s_u - s_v| / (max s - min s):
  // betweenness (4, 0, 0, 3, 0, 0), range 4.
  expect_edges("betweenness", t, {0, 0, 0.75, 1, 0.25});
  // k-shell (2, 2, 2, 1, 1, 0), range 2.
  expect_edges("kshell", t, {1, 1, 0.5, 1, 1});
  // clustering (1/3, 1, 1, 0, 0, 0), range 1.
  expect_edges("clustering", t, {1.0 / 3, 1.0 / 3, 2.0 / 3, 1, 1});
}

TEST(Heuristics, UnknownNameIsAnInputError) {
  try {
    adgnn::detail::check_heuristic("pagerank");
    FAIL() << "accepted an unknown heuristic";
  } catch (const adgnn::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--heuristic pagerank: unknown"), std::string::npos) << e.what();
  }
  const auto g = six_nodes();
  adgnn::ModelConfig c;
  c.variant = adgnn::Variant::AdFast;
  c.in_dim = 3;
  c.out_dim = 2;
  c.same_label_heuristic = "pagerank";
  EXPECT_THROW(adgnn::Model m(c), adgnn::InputError);
  c.same_label_heuristic = "degree";
  c.degree_threshold = 2;  // the threshold is a plain-model option
  EXPECT_THROW(adgnn::Model m(c), adgnn::InputError);
}

adgnn::ModelConfig fast(const std::string& heuristic) {
  adgnn::ModelConfig c;
  c.variant = adgnn::Variant::AdFast;
  c.layers = 2;
  c.hidden = 8;
  c.in_dim = 3;
  c.out_dim = 2;
  c.dropout = 0;
  c.seed = 3;
  c.normalisation = "log";
  c.same_label_heuristic = heuristic;
  return c;
}

TEST(Heuristics, ModelUsesTheSumOfTheEdgeProbabilities) {
  const auto g = six_nodes();
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  const std::vector<double> deg{3, 2, 2, 2, 1, 0};
  // Jaccard: d+ = (1/4 + 1/4 + 0, 1/4 + 1/3, 1/4 + 1/3, 0 + 0, 0, 0).
  const std::vector<double> d_plus{0.5, 7.0 / 12, 7.0 / 12, 0, 0, 0};
  std::vector<double> l;
  for (int v = 0; v < 6; ++v) {
    const double alpha = (1 + 2 * d_plus[size_t(v)] - deg[size_t(v)]) / (deg[size_t(v)] + 1);
    // Node 4: alpha = 0, floored at 1e-12 as in the model (eps~ = 0).
    l.push_back(2 * (2 * std::log(std::max(std::abs(alpha), 1e-12)) + std::log(deg[size_t(v)] + 1)));
  }
  const double lo = *std::min_element(l.begin(), l.end()), hi = *std::max_element(l.begin(), l.end());
  adgnn::Model model(fast("jaccard"));
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reads the cached d+
    const auto out = model.forward(mg, t.x, false, pass);
    for (int v = 0; v < 6; ++v)
      EXPECT_NEAR(out.eps[v].item<double>(), (l[size_t(v)] - lo) / (hi - lo), 1e-6) << "node " << v;
  }
  // The generic "degree" edge probabilities sum to the model's built-in degree estimate.
  adgnn::Model by_degree(fast("degree"));
  const auto e_deg = by_degree.forward(mg, t.x, false, 0).eps;
  const at::Tensor p = adgnn::detail::same_label_probability("degree", t.rowptr, t.col);
  const at::Tensor rows = torch::repeat_interleave(t.rowptr.to(torch::kInt64).diff());
  const at::Tensor dp = torch::zeros({6}, torch::kFloat64).index_add(0, rows, p);
  const at::Tensor d = torch::tensor(deg, torch::kFloat64);
  const at::Tensor ll = 2 * (2 * ((1 + 2 * dp - d) / (d + 1)).abs().log() + (d + 1).log());
  const at::Tensor want = (ll - ll.min()) / (ll.max() - ll.min());
  EXPECT_TRUE(torch::allclose(e_deg.to(torch::kFloat64), want, 1e-5, 1e-6));
}

TEST(DegreeThreshold, LowDegreeNodesNeverAggregate) {
  const auto g = six_nodes();
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  adgnn::ModelConfig c;
  c.variant = adgnn::Variant::Plain;
  c.layers = 2;
  c.hidden = 8;
  c.in_dim = 3;
  c.out_dim = 2;
  c.dropout = 0;
  c.seed = 5;
  adgnn::Model all(c);
  c.degree_threshold = 2;  // degrees 3, 2, 2, 2, 1, 0: only node 0 aggregates
  adgnn::Model thresholded(c);
  {  // same weights in both
    torch::NoGradGuard guard;
    auto a = all.named_parameters(), b = thresholded.named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) b[i].second.copy_(a[i].second);
  }
  const auto out = thresholded.forward(mg, t.x, false, 0);
  EXPECT_EQ(out.depth.to(torch::kCPU).equal(torch::tensor({2, 0, 0, 0, 0, 0}, torch::kInt64)), true);
  EXPECT_EQ(out.stats.active_rows, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(out.stats.edges_processed, (std::vector<int64_t>{3, 3}));
  // The isolated node 5 gets W h + b at both layers either way: the same logits.
  const auto ref = all.forward(mg, t.x, false, 0);
  EXPECT_TRUE(torch::allclose(out.logits[5], ref.logits[5], 1e-6, 1e-6));
  // Node 4 (degree 1) no longer reads node 3 at layer 1: its logits differ.
  EXPECT_FALSE(torch::allclose(out.logits[4], ref.logits[4], 1e-4, 1e-4));
}

}  // namespace
