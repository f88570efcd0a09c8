// --depth-target (adgnn/src/depth/depth_target.cpp): its shares parsed and refused, the penalty
// by hand, its gradient by finite differences, and training that reaches the target's depths.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "adgnn/model.h"
#include "depth/depth_target.h"
#include "depth/surrogate.h"
#include "model_fixtures.h"
#include "six_nodes.h"

namespace {

using adgnn::detail::depth_target_at_least;

using adgnn::testing::config;
using adgnn::testing::expect_fd;

adgnn::Graph csbm(int64_t nodes, uint64_t seed) { return adgnn::testing::csbm(nodes, 0.6, seed); }

void expect_refused(const std::string& spec, int64_t layers, const std::string& says) {
  try {
    depth_target_at_least(spec, layers);
    FAIL() << "accepted --depth-target " << spec;
  } catch (const adgnn::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--depth-target " + spec + ": "), std::string::npos) << m;
    EXPECT_NE(m.find(says), std::string::npos) << m;
  }
}

}  // namespace

TEST(DepthTarget, SharesAreParsedAsTheShareReachingEachDepth) {
  EXPECT_TRUE(depth_target_at_least("", 3).empty());
  const std::vector<double> u = depth_target_at_least("uniform", 4);
  ASSERT_EQ(u.size(), 4u);
  for (int t = 1; t <= 4; ++t) EXPECT_NEAR(u[size_t(t - 1)], double(5 - t) / 4, 1e-15) << t;
  const std::vector<double> q = depth_target_at_least("0.1,0.2,0.3,0.4", 3);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_NEAR(q[0], 0.9, 1e-15);
  EXPECT_NEAR(q[1], 0.7, 1e-15);
  EXPECT_NEAR(q[2], 0.4, 1e-15);
  expect_refused("0.5,0.5", 3, "expected uniform or 4 shares");
  expect_refused("0.5,0.5,0.5,0.5", 3, "sum to");
  expect_refused("0,-0.5,1,0.5", 3, "'-0.5' is not a share");
  expect_refused("0,0.5x,0.5,0", 3, "'0.5x'");
  expect_refused("0,,0.5,0.5", 3, "''");
  expect_refused("flat", 2, "'flat'");
  // The model refuses it on a plain model, and a weight that is not positive.
  const auto g = adgnn::testing::six_nodes();
  auto c = config("plain", 2, g);
  c.depth_target = "uniform";
  EXPECT_THROW(adgnn::Model{c}, adgnn::InputError);
  c = config("ad_fast", 2, g);
  c.depth_target = "uniform";
  c.depth_target_weight = 0;
  EXPECT_THROW(adgnn::Model{c}, adgnn::InputError);
}

// weight * sum_t (mean_v sigmoid((eps_v - tau(t)) / kappa) - Q_t)^2, from the pass's own eps and
// theta, computed here in scalars; only training passes carry it.
TEST(DepthTarget, PenaltyByHand) {
  const auto g = csbm(120, 2);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const at::Tensor x = t.x.to(torch::kFloat64);
  for (const char* norm : {"log", "rank"}) {
    SCOPED_TRACE(norm);
    auto cfg = config("ad_fast", 3, g);
    cfg.float64 = true;
    cfg.normalisation = norm;
    cfg.lambda = 0.1;
    cfg.kappa = 0.1;
    cfg.depth_target = "0.1,0.2,0.3,0.4";
    cfg.depth_target_weight = 3;
    adgnn::Model model(cfg);
    const adgnn::ForwardOutput out = model.forward(mg, x, true, 1);
    ASSERT_TRUE(out.depth_loss.defined());
    EXPECT_FALSE(model.forward(mg, x, false, 1).depth_loss.defined());
    at::Tensor a;
    for (auto& [name, p] : model.named_parameters())
      if (name == "theta.a") a = p.detach();
    const double Q[3] = {0.9, 0.7, 0.4};
    double want = 0, c = 0;
    for (int l = 1; l <= 3; ++l) {
      if (l >= 2) c += std::log1p(std::exp(a[l - 2].item<double>()));
      const double tau = 1 - (1 - cfg.lambda) * std::exp(-c);
      // theta starts at the target's thresholds: tau(t) = 1 - Q_t (t >= 2; tau(1) = lambda).
      if (l >= 2) EXPECT_NEAR(tau, 1 - Q[l - 1], 1e-12) << l;
      double s = 0;
      for (int64_t v = 0; v < g.num_nodes; ++v)
        s += 1 / (1 + std::exp(-(out.eps[v].item<double>() - tau) / cfg.kappa));
      want += (s / double(g.num_nodes) - Q[l - 1]) * (s / double(g.num_nodes) - Q[l - 1]);
    }
    EXPECT_NEAR(out.depth_loss.item<double>(), 3 * want, 1e-12);
  }
}

// Before any training, under the rank normalisation (eps spread evenly over [0, 1]), the depths
// are the target's: theta starts at its thresholds.
TEST(DepthTarget, ThetaStartsAtTheTargetsThresholds) {
  const auto g = csbm(1000, 3);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  for (const char* spec : {"0,0.1,0.2,0.7", "0,0.6,0.3,0.1", "0.2,0.2,0.2,0.4"}) {
    SCOPED_TRACE(spec);
    auto cfg = config("ad_fast", 3, g);
    cfg.float64 = true;
    cfg.normalisation = "rank";
    cfg.depth_target = spec;
    cfg.lambda = std::string(spec).rfind("0.2", 0) == 0 ? 0.2 : 0.0;  // depth 0's share is lambda's
    adgnn::Model model(cfg);
    const at::Tensor depth = model.forward(mg, t.x.to(torch::kFloat64), false, 0).depth;
    const at::Tensor share = torch::bincount(depth, {}, 4).to(torch::kFloat64) / double(g.num_nodes);
    std::vector<double> want;
    std::stringstream in(spec);
    for (std::string item; std::getline(in, item, ',');) want.push_back(std::stod(item));
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(share[k].item<double>(), want[size_t(k)], 0.02) << "depth " << k;
  }
}

// The penalty's gradient in theta (both variants) and in f_delta (the learned variant, whose eps
// is differentiable under the log normalisation), by central differences.
TEST(DepthTarget, GradientMatchesFiniteDifferences) {
  const auto g = csbm(80, 5);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const at::Tensor x = t.x.to(torch::kFloat64);
  for (const char* variant : {"ad_fast", "ad"}) {
    SCOPED_TRACE(variant);
    auto cfg = config(variant, 3, g);
    cfg.float64 = true;
    cfg.normalisation = "log";
    cfg.kappa = 0.2;
    cfg.depth_target = "0,0.2,0.3,0.5";
    cfg.benefit_range = std::make_pair(-30.0, 12.0);  // the min-max constants held fixed
    adgnn::Model model(cfg);
    auto loss = [&] { return model.forward(mg, x, true, 1).depth_loss; };
    int checked = 0;
    for (auto& [name, p] : model.named_parameters()) {
      if (name != "theta.a" && name.rfind("f_delta.", 0) != 0) continue;
      expect_fd(loss, p, 1e-7);
      EXPECT_GT(p.grad().abs().max().item<double>(), 1e-8) << name;
      ++checked;
    }
    EXPECT_EQ(checked, std::string(variant) == "ad" ? 5 : 1);
  }
}

// Trained with the task, the thresholds settle where the target puts them: under the rank
// normalisation the depths then follow the target within a few percent, where without it they
// are far from it.
TEST(DepthTarget, TrainingReachesTheTargetDepths) {
  const auto g = csbm(600, 7);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat32);
  const at::Tensor x = t.x;
  const at::Tensor train = torch::arange(g.num_nodes) % 2 == 0;
  const at::Tensor rows = train.nonzero().squeeze(1);
  const at::Tensor y = t.y.index_select(0, rows);
  const std::vector<double> target{0, 0.2, 0.3, 0.5};
  auto shares = [&](const std::string& spec) {
    auto cfg = config("ad_fast", 3, g);
    cfg.normalisation = "rank";
    cfg.depth_target = spec;
    cfg.depth_target_weight = 5;
    adgnn::Model model(cfg);
    std::vector<at::Tensor> params;
    for (auto& [name, p] : model.named_parameters()) params.push_back(p);
    torch::optim::Adam opt(params, torch::optim::AdamOptions(0.05));
    for (int s = 1; s <= 150; ++s) {
      const adgnn::ForwardOutput out = model.forward(mg, x, true, s, t.y, train);
      const at::Tensor loss = adgnn::training_loss(out, rows, y, 1.0 / double(rows.numel()));
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    const at::Tensor depth = model.forward(mg, x, false, 0).depth;
    const at::Tensor hist = torch::bincount(depth, {}, 4).to(torch::kFloat64) / double(g.num_nodes);
    return std::vector<double>(hist.data_ptr<double>(), hist.data_ptr<double>() + 4);
  };
  const std::vector<double> with = shares("0,0.2,0.3,0.5"), without = shares("");
  double off_with = 0, off_without = 0;
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(with[k], target[k], 0.05) << "depth " << k;
    off_with = std::max(off_with, std::abs(with[k] - target[k]));
    off_without = std::max(off_without, std::abs(without[k] - target[k]));
  }
  EXPECT_GT(off_without, 0.15) << "the target is where the depths go anyway: the test shows nothing";
}
