// The AD mechanism: depth-benefit values by hand on a 6-node graph, nested active sets, skipped
// rows, frozen embeddings, and finite-difference checks of the f_delta and theta (surrogate) paths.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "adgnn/model.h"
#include "adgnn/ops.h"
#include "depth/depth_benefit.h"
#include "depth/surrogate.h"
#include "model_fixtures.h"
#include "six_nodes.h"

namespace {

using adgnn::testing::config;
using adgnn::testing::csbm;
using adgnn::testing::expect_fd;
using adgnn::testing::six_nodes;

// eps_tilde from log eps_hat values, linear min-max as method.md specifies.
std::vector<double> linear_norm(const std::vector<double>& l) {
  const double lo = *std::min_element(l.begin(), l.end()), hi = *std::max_element(l.begin(), l.end());
  std::vector<double> e;
  for (double v : l) e.push_back((std::exp(v - hi) - std::exp(lo - hi)) / (1 - std::exp(lo - hi)));
  return e;
}

TEST(DepthBenefit, FastMetricByHand) {
  const auto g = six_nodes();
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  // max d_u d_v over edges = 3 * 2 = 6. d+_v = d_v * sum_u d_u / 6:
  // node 0: 3 * 6 / 6 = 3 -> alpha = (1 + 3 - 0) / 4 = 1
  // nodes 1, 2: 2 * 5 / 6 = 5/3 -> alpha = (1 + 5/3 - 1/3) / 3 = 7/9
  // node 3: 2 * 4 / 6 = 4/3 -> alpha = (1 + 4/3 - 2/3) / 3 = 5/9
  // node 4: 1 * 2 / 6 = 1/3 -> alpha = (1 + 1/3 - 2/3) / 2 = 1/3
  // node 5: isolated -> alpha = 1, eps_hat = 1.
  const std::vector<double> alpha{1, 7.0 / 9, 7.0 / 9, 5.0 / 9, 1.0 / 3, 1};
  const std::vector<double> deg{3, 2, 2, 2, 1, 0};
  const double t_max = 2;
  std::vector<double> l;
  for (int v = 0; v < 6; ++v) l.push_back(t_max * (2 * std::log(alpha[v]) + std::log(deg[v] + 1)));
  adgnn::Model model(config("ad_fast", 2, g));
  const auto out = model.forward(mg, t.x, false, 0);
  const auto lin = linear_norm(l);
  for (int v = 0; v < 6; ++v) EXPECT_NEAR(out.eps[v].item<double>(), lin[v], 1e-6) << "node " << v;
  EXPECT_EQ(out.eps[0].item<double>(), 1.0);  // the largest eps_hat: node 0, (1 * 4)^2

  auto cfg = config("ad_fast", 2, g);
  cfg.normalisation = "log";
  adgnn::Model log_model(cfg);
  const auto lo = *std::min_element(l.begin(), l.end()), hi = *std::max_element(l.begin(), l.end());
  const auto out_log = log_model.forward(mg, t.x, false, 0);
  for (int v = 0; v < 6; ++v)
    EXPECT_NEAR(out_log.eps[v].item<double>(), (l[v] - lo) / (hi - lo), 1e-6) << "node " << v;
}

TEST(DepthBenefit, LearnedMetricWithAConstantSameLabelProbability) {
  const auto g = six_nodes();
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  adgnn::Model model(config("ad", 2, g));
  const double p = 0.25;
  {
    torch::NoGradGuard guard;
    for (auto& [name, w] : model.named_parameters()) {
      if (name == "f_delta.w2") w.zero_();
      if (name == "f_delta.b2") w.fill_(std::log(p / (1 - p)));
    }
  }
  // d+ = p d, alpha = (1 + 2 p d - d) / (d + 1).
  const std::vector<double> deg{3, 2, 2, 2, 1, 0};
  std::vector<double> l;
  for (double d : deg) l.push_back(2 * (2 * std::log(std::abs((1 + 2 * p * d - d) / (d + 1))) + std::log(d + 1)));
  const auto out = model.forward(mg, t.x, false, 0);
  const auto lin = linear_norm(l);
  for (int v = 0; v < 6; ++v) EXPECT_NEAR(out.eps[v].item<double>(), lin[v], 1e-6) << "node " << v;
}

// Every node with the same depth benefit (a ring: equal degrees; the learned variant with a
// constant f_delta): the min-max normalisation has no spread, so every node gets eps = 1 and the
// full depth, and the gradients stay finite (the normalisation's branch not taken must not turn
// them into NaN).
TEST(DepthBenefit, EqualBenefitsGiveEveryNodeTheFullDepthAndFiniteGradients) {
  adgnn::Graph g;
  g.name = "ring";
  g.num_nodes = 8;
  g.adj.rows = g.adj.cols = 8;
  g.adj.indptr = {0, 2, 3, 4, 5, 6, 7, 8, 8};
  g.adj.indices = {1, 7, 2, 3, 4, 5, 6, 7};
  g.features.rows = 8;
  g.features.cols = 3;
  for (int i = 0; i < 24; ++i) g.features.dense.push_back(float((i * 7) % 5) - 2.0f);
  g.labels = {0, 1, 0, 1, 1, 0, 0, 1};
  g.num_classes = 2;
  g.validate("ring");
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  const at::Tensor train = torch::ones({8}, torch::kBool);
  for (const char* variant : {"ad_fast", "ad"}) {
    for (const char* norm : {"linear", "log"}) {
      SCOPED_TRACE(std::string(variant) + " " + norm);
      auto cfg = config(variant, 3, g);
      cfg.normalisation = norm;
      cfg.band = 0;  // every row in the surrogate's band: eps gets a gradient
      adgnn::Model model(cfg);
      {
        torch::NoGradGuard guard;
        for (auto& [name, w] : model.named_parameters()) {
          if (name == "f_delta.w2") w.zero_();
          if (name == "f_delta.b2") w.fill_(0.3);
        }
      }
      const auto out = model.forward(mg, t.x, true, 0, t.y, train);
      EXPECT_TRUE(torch::equal(out.eps, torch::ones_like(out.eps))) << out.eps;
      EXPECT_TRUE(torch::equal(out.depth, torch::full_like(out.depth, 3))) << out.depth;
      (out.logits.sum() + out.reg_loss).backward();
      for (auto& [name, w] : model.named_parameters()) {
        if (w.grad().defined()) {
          EXPECT_TRUE(torch::isfinite(w.grad()).all().item<bool>()) << name;
        }
      }
    }
  }
}

TEST(ActiveSets, NestedShrinkingAndOnlyActiveRowsAggregated) {
  const auto g = csbm(400, 0.5, 1);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  for (const char* norm : {"linear", "log"}) {
    auto cfg = config("ad_fast", 4, g);
    cfg.normalisation = norm;
    cfg.theta_init = -2;  // small steps: several depths occur under the log normalisation
    adgnn::Model model(cfg);
    const auto out = model.forward(mg, t.x, false, 0);
    const at::Tensor deg = t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1);
    for (int64_t layer = 1; layer <= 4; ++layer) {
      const at::Tensor active = out.depth >= layer;
      EXPECT_EQ(out.stats.active_rows[layer - 1], active.sum().item<int64_t>());
      // Evaluation computes exactly the active rows: edges read = their degrees.
      EXPECT_EQ(out.stats.edges_processed[layer - 1], deg.masked_select(active).sum().item<int64_t>());
      if (layer > 1) {
        EXPECT_LE(out.stats.active_rows[layer - 1], out.stats.active_rows[layer - 2]);
      }
    }
    EXPECT_EQ(out.stats.active_rows[0], 400);  // lambda = 0: every node aggregates once
    EXPECT_LT(out.stats.active_rows[3], 400) << norm;
    // Training adds the surrogate band |eps - tau(t)| < band * kappa from layer 2 on: the rows
    // computed are the active ones and the band's (tau(t) = 1 - exp(-(t - 1) softplus(a)) with
    // lambda = 0 and every a = theta_init).
    const auto tr = model.forward(mg, t.x, true, 0);
    int64_t band_rows = 0;
    const double sp = std::log1p(std::exp(cfg.theta_init));
    for (int64_t layer = 1; layer <= 4; ++layer) {
      const double tau = 1 - std::exp(-double(layer - 1) * sp);
      const at::Tensor active = tr.depth >= layer;
      at::Tensor comp = active;
      if (layer >= 2) comp = active | ((tr.eps - tau).abs() < cfg.band * cfg.kappa);
      EXPECT_EQ(tr.stats.active_rows[layer - 1], active.sum().item<int64_t>()) << norm << " layer " << layer;
      EXPECT_EQ(tr.stats.computed_rows[layer - 1], comp.sum().item<int64_t>()) << norm << " layer " << layer;
      EXPECT_EQ(tr.stats.edges_processed[layer - 1], deg.masked_select(comp).sum().item<int64_t>());
      band_rows += tr.stats.computed_rows[layer - 1] - tr.stats.active_rows[layer - 1];
    }
    EXPECT_GT(band_rows, 0) << norm << ": no band row, the check above tests nothing";
  }
}

TEST(ActiveSets, InactiveRowsAreFrozenAtWidthKeepingLayers) {
  const auto g = csbm(300, 0.5, 2);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  auto cfg = config("ad_fast", 4, g);
  cfg.normalisation = "log";
  cfg.theta_init = -2;
  adgnn::Model model(cfg);
  const auto out = model.forward(mg, t.x, false, 0);
  ASSERT_EQ(out.layer_outputs.size(), 4u);
  int64_t checked = 0;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    const int64_t T = out.depth[v].item<int64_t>();
    for (int64_t layer = std::max<int64_t>(T + 1, 2); layer <= 3; ++layer) {  // layers 2, 3 keep width
      EXPECT_TRUE(torch::equal(out.layer_outputs[layer - 1][v], out.layer_outputs[layer - 2][v]))
          << "node " << v << " T=" << T << " layer " << layer;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// The classifier (a width-changing last layer): rows that stopped earlier take the layer's
// self term, h W + b; rows still active its full update, sum over the closed neighbourhood of
// 1/sqrt((d_v + 1)(d_u + 1)) h_u W + b. Checked by hand in float64, with most rows stopped (one
// GEMM over every row, the updates put in place) and with most active (the frozen rows
// gathered): the two ways the model builds the output.
TEST(ActiveSets, ClassifierRowsTakeTheirUpdateOrTheSelfTerm) {
  const auto g = csbm(300, 0.5, 2);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const at::Tensor deg = (t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1)).to(torch::kFloat64);
  bool most_stopped = false, most_active = false;
  for (double theta_init : {-2.0, 2.0}) {  // 276 and 15 of 300 rows active at layer 3
    auto cfg = config("ad_fast", 3, g);
    cfg.normalisation = "log";
    cfg.theta_init = theta_init;
    cfg.float64 = true;
    adgnn::Model model(cfg);
    const auto out = model.forward(mg, t.x.to(torch::kFloat64), false, 0);
    at::Tensor w, b;
    for (const auto& [name, p] : model.named_parameters()) {
      if (name == "layers.2.weight") w = p.detach();
      if (name == "layers.2.bias") b = p.detach();
    }
    ASSERT_TRUE(w.defined() && b.defined());
    const at::Tensor hw = out.layer_outputs[1].detach().mm(w);
    const at::Tensor logits = out.logits.detach();
    const int64_t active = (out.depth == 3).sum().item<int64_t>();
    (active * 2 <= 300 ? most_stopped : most_active) = true;
    for (int64_t v = 0; v < 300; ++v) {
      at::Tensor want = hw[v] + b;
      if (out.depth[v].item<int64_t>() == 3) {
        want = hw[v] / (deg[v] + 1) + b;
        for (int64_t k = t.rowptr[v].item<int64_t>(); k < t.rowptr[v + 1].item<int64_t>(); ++k) {
          const int64_t u = t.col[k].item<int64_t>();
          want = want + hw[u] / ((deg[v] + 1) * (deg[u] + 1)).sqrt();
        }
      }
      EXPECT_TRUE(torch::allclose(logits[v], want, 1e-9, 1e-9)) << "theta_init " << theta_init << " node " << v;
    }
  }
  EXPECT_TRUE(most_stopped && most_active) << "theta_init no longer reaches both cases";
}

TEST(AdGradients, FDeltaPathMatchesFiniteDifferences) {
  const auto g = six_nodes();
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const at::Tensor x = t.x.to(torch::kFloat64);
  auto cfg = config("ad", 2, g);
  cfg.float64 = true;
  cfg.hidden = 4;
  // The min-max constants are not differentiated: hold them fixed, as every rank does.
  cfg.benefit_range = std::make_pair(-12.0, 3.0);
  adgnn::Model model(cfg);
  const at::Tensor probe = torch::randn({6}, torch::kFloat64);
  auto loss = [&] {
    return (model.forward(mg, x, false, 0, {}, {}).eps * probe).sum();
  };
  for (auto& [name, p] : model.named_parameters())
    if (name.rfind("f_delta.", 0) == 0 || name == "layers.0.weight") expect_fd(loss, p, 1e-6);
  // L_reg: binary cross-entropy of f_delta on training edges.
  const at::Tensor y = t.y;
  const at::Tensor train = torch::tensor({true, true, true, false, true, false});
  auto reg = [&] { return model.forward(mg, x, true, 0, y, train).reg_loss; };
  EXPECT_GT(reg().item<double>(), 0.0);
  for (auto& [name, p] : model.named_parameters())
    if (name.rfind("f_delta.", 0) == 0) expect_fd(reg, p, 1e-6);
}

TEST(AdGradients, ThetaThroughTheSurrogateMatchesFiniteDifferences) {
  // With soft masks at layers >= 2 and every row in the band, the forward pass is smooth in
  // theta; for a loss linear in the logits its gradient is the straight-through gradient.
  const auto g = csbm(60, 0.5, 4);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const at::Tensor x = t.x.to(torch::kFloat64);
  for (const char* variant : {"ad_fast", "ad"}) {
    auto cfg = config(variant, 3, g);
    cfg.float64 = true;
    cfg.normalisation = "log";
    cfg.band = 0;  // every row
    cfg.kappa = 0.2;
    cfg.soft_masks = true;
    cfg.benefit_range = std::make_pair(-30.0, 12.0);
    adgnn::Model model(cfg);
    const at::Tensor probe = torch::randn({g.num_nodes, g.num_classes}, torch::kFloat64);
    auto loss = [&] {
      return (model.forward(mg, x, true, 0, {}, {}).logits * probe).sum();
    };
    SCOPED_TRACE(variant);
    for (auto& [name, p] : model.named_parameters())
      if (name == "theta.a") expect_fd(loss, p, 1e-6);
  }
  // The hard forward with the straight-through estimator gives the same theta gradient as the
  // soft one when theta enters only the last layer (two layers) and the loss is linear in it.
  auto cfg = config("ad_fast", 2, g);
  cfg.float64 = true;
  cfg.normalisation = "log";
  cfg.band = 0;
  cfg.kappa = 0.2;
  cfg.benefit_range = std::make_pair(-30.0, 12.0);
  const at::Tensor probe = torch::randn({g.num_nodes, g.num_classes}, torch::kFloat64);
  at::Tensor grads[2];
  for (int soft = 0; soft < 2; ++soft) {
    cfg.soft_masks = soft == 1;
    adgnn::Model model(cfg);
    auto out = model.forward(mg, x, true, 0, {}, {});
    (out.logits * probe).sum().backward();
    for (auto& [name, p] : model.named_parameters())
      if (name == "theta.a") grads[soft] = p.grad().clone();
  }
  EXPECT_TRUE(torch::allclose(grads[0], grads[1], 1e-10, 1e-12)) << grads[0] << grads[1];
  EXPECT_GT(grads[0].abs().sum().item<double>(), 0.0);
}

// The hard straight-through term as one autograd node (attached to `next`, or as zeros that
// another operation adds): the value is `next` bit for bit, and the gradients of next, eps and
// tau equal those of its explicit form, next + index_add of (s - s.detach()) * diff at the band
// rows (float64), with and without eps's gradient.
TEST(AdGradients, BandStraightThroughEqualsItsExplicitForm) {
  torch::manual_seed(5);
  const auto f64 = torch::kFloat64;
  const at::Tensor next0 = torch::randn({9, 4}, f64), eps0 = torch::randn({9}, f64), tau0 = torch::randn({}, f64);
  const at::Tensor band = torch::tensor(std::vector<int64_t>{1, 4, 5, 8}, torch::kInt64);
  const at::Tensor diff = torch::randn({4, 4}, f64), probe = torch::randn({9, 4}, f64);
  const double kappa = 0.3;
  for (bool eps_grad : {true, false}) {
    SCOPED_TRACE(eps_grad ? "eps with a gradient" : "eps constant");
    std::vector<at::Tensor> grads[3];
    for (int explicit_form = 0; explicit_form < 3; ++explicit_form) {
      const at::Tensor next = next0.clone().requires_grad_(true), tau = tau0.clone().requires_grad_(true);
      const at::Tensor eps = eps0.clone().requires_grad_(eps_grad);
      at::Tensor out;
      if (explicit_form == 1) {
        const at::Tensor s = torch::sigmoid((eps.index_select(0, band) - tau) / kappa);
        out = next.clone().index_add_(0, band, (s - s.detach()).unsqueeze(1) * diff);
      } else if (explicit_form == 2) {  // the term as zeros, added by another operation
        const at::Tensor term = adgnn::detail::band_straight_through_term(eps, tau, band, diff, kappa);
        EXPECT_EQ(term.abs().sum().item<double>(), 0.0);
        out = next.clone().index_add_(0, band, term);
      } else {
        out = adgnn::detail::band_straight_through(next, eps, tau, band, diff, kappa);
      }
      EXPECT_TRUE(torch::equal(out, next0));
      (out * probe).sum().backward();
      ASSERT_TRUE(next.grad().defined() && tau.grad().defined() && (!eps_grad || eps.grad().defined()))
          << "form " << explicit_form << ": " << next.grad().defined() << tau.grad().defined();
      grads[explicit_form] = {next.grad(), tau.grad(), eps_grad ? eps.grad() : torch::zeros({9}, f64)};
    }
    for (int form : {0, 2})
      for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(torch::allclose(grads[form][i], grads[1][i], 1e-12, 1e-14)) << form << " " << i << grads[form][i] << grads[1][i];
    EXPECT_GT(grads[0][1].abs().item<double>(), 0.0);
  }
}

// A deeper layer's output from its computed rows: rows 1, 3, 4, 6 computed (positions 0..3 of
// upd), 1, 4 and 6 active, 3 in the band only. Values and gradients by hand: an active row takes its
// update and passes its gradient to it, every other row keeps (and passes back to) prev; the band
// row's update gets a zero gradient. band_diff: upd's row minus prev's, without a gradient.
TEST(AdGradients, MergeRowsAndBandDiffByHand) {
  const auto f64 = torch::kFloat64;
  const at::Tensor prev0 = torch::arange(7 * 3, f64).view({7, 3}), upd0 = -torch::arange(1, 4 * 3 + 1, f64).view({4, 3});
  const at::Tensor pos = torch::tensor(std::vector<int32_t>{-1, 0, -1, 1, 2, -1, 3}, torch::kInt32);
  const at::Tensor active = torch::tensor(std::vector<int32_t>{0, 1, 0, 0, 1, 0, 1}).to(torch::kBool);
  const at::Tensor prev = prev0.clone().requires_grad_(true), upd = upd0.clone().requires_grad_(true);
  const at::Tensor out = adgnn::detail::merge_rows(prev, upd, pos, active);
  at::Tensor expected = prev0.clone();
  expected[1] = upd0[0];
  expected[4] = upd0[2];
  expected[6] = upd0[3];
  EXPECT_TRUE(torch::equal(out, expected)) << out;
  const at::Tensor probe = torch::arange(100, 100 + 7 * 3, f64).view({7, 3});
  (out * probe).sum().backward();
  at::Tensor grad_prev = probe.clone(), grad_upd = torch::zeros({4, 3}, f64);
  for (int r : {1, 4, 6}) grad_prev[r] = 0;
  grad_upd[0] = probe[1];
  grad_upd[2] = probe[4];
  grad_upd[3] = probe[6];
  EXPECT_TRUE(torch::equal(prev.grad(), grad_prev)) << prev.grad();
  EXPECT_TRUE(torch::equal(upd.grad(), grad_upd)) << upd.grad();
  const at::Tensor band = torch::tensor(std::vector<int64_t>{3, 6}, torch::kInt64);
  const at::Tensor diff = adgnn::detail::band_diff(prev, upd, pos, band);
  EXPECT_FALSE(diff.requires_grad());
  EXPECT_TRUE(torch::equal(diff, torch::stack({upd0[1] - prev0[3], upd0[3] - prev0[6]}))) << diff;
  // The previous value as act(prev + bias): here the bias makes one of row 3's entries negative.
  const at::Tensor bias = torch::tensor(std::vector<double>{-10.0, -9.5, 0.25}, f64);
  const at::Tensor shifted = adgnn::detail::band_diff(prev, upd, pos, band, bias, false);
  EXPECT_TRUE(torch::equal(shifted, torch::stack({upd0[1] - (prev0[3] + bias), upd0[3] - (prev0[6] + bias)})));
  const at::Tensor rectified = adgnn::detail::band_diff(prev, upd, pos, band, bias, true);
  const at::Tensor row3 = torch::tensor(std::vector<double>{0.0, 0.5, 11.25}, f64);  // relu(9 - 10, 10 - 9.5, 11.25)
  EXPECT_TRUE(torch::equal(rectified, torch::stack({upd0[1] - row3, upd0[3] - (prev0[6] + bias)}))) << rectified;
}

// depth_masks' positions: at each layer, the computed rows (active or band) numbered 0, 1, ... in
// row order, -1 for the others; by hand on five rows and three layers.
TEST(AdGradients, DepthMaskPositionsByHand) {
  const at::Tensor eps = torch::tensor(std::vector<double>{0.9, 0.1, 0.5, 0.55, 0.0}, torch::kFloat64);
  const at::Tensor tau = torch::tensor(std::vector<double>{0.0, 0.4, 0.6}, torch::kFloat64);
  const at::Tensor rowptr = torch::zeros({6}, torch::kInt64);
  adgnn::detail::DepthMaskSpec spec;
  spec.layers = 3;
  spec.band = adgnn::detail::DepthMaskSpec::Band::Width;
  spec.band_width = 0.07;  // layer 3: 0.55 within 0.07 of 0.6, 0.5 not
  const adgnn::detail::DepthMasks m = adgnn::detail::depth_masks(eps, tau, {}, rowptr, spec);
  // depths 3, 1, 2, 2, 1; computed: layer 1 every row, layer 2 rows 0, 2, 3, layer 3 rows 0 and 3 (band)
  const at::Tensor want = torch::tensor(std::vector<int32_t>{0, 1, 2, 3, 4, 0, -1, 1, 2, -1, 0, -1, -1, 1, -1},
                                        torch::kInt32).view({3, 5});
  EXPECT_TRUE(torch::equal(m.comp_pos, want)) << m.comp_pos;
  EXPECT_TRUE(torch::equal(m.depth, torch::tensor(std::vector<int64_t>{3, 1, 2, 2, 1}))) << m.depth;
}

// tau(t) = lambda + (1 - lambda)(1 - exp(-(softplus(a_2) + ... + softplus(a_t)))) (docs/method.md),
// by hand in float64, with a beyond softplus' threshold (20); `all` carries no gradient, each
// layer's value does, and a's gradient is the finite difference of a weighted sum of the layers'.
// The learned depth benefit's pieces (depth_benefit.h) by hand in float64: d+ as each row's sum of
// its entries' pair sigmoids, L_reg's sum, l's range and eps_tilde under both normalisations
// (with AD#'s offset, a row at alpha = 0 and every row equal), and the gradients against the
// formulas' derivatives and finite differences.
TEST(AdGradients, DepthBenefitPiecesByHand) {
  namespace d = adgnn::detail;
  const auto f64 = torch::kFloat64, i64 = torch::kInt64;
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  {  // rows {entries 0, 1}, {2}, {}: entries 0 and 2 share pair 0
    const at::Tensor rowptr = torch::tensor({0, 2, 3, 3}, i64), rows = torch::tensor({0, 0, 1}, i64);
    const at::Tensor entry_pair = torch::tensor({0, 1, 0}, i64);
    const at::Tensor logit = torch::tensor({0.3, -1.2}, f64).requires_grad_(true);
    const at::Tensor dp = d::sigmoid_row_sums(rowptr, rows, entry_pair, logit);
    ASSERT_EQ(dp.numel(), 3);
    EXPECT_NEAR(dp[0].item<double>(), sig(0.3) + sig(-1.2), 1e-15);
    EXPECT_NEAR(dp[1].item<double>(), sig(0.3), 1e-15);
    EXPECT_EQ(dp[2].item<double>(), 0.0);
    const at::Tensor bce = d::pair_bce_sum(logit, torch::tensor({1, 0}, i64), torch::tensor({1.0, 0.0}, f64));
    EXPECT_NEAR(bce.item<double>(), std::log1p(std::exp(1.2)) + std::log1p(std::exp(0.3)), 1e-14);
    (dp * torch::tensor({0.5, -2.0, 7.0}, f64)).sum().add(bce).backward();
    auto dsig = [&](double x) { return sig(x) * (1 - sig(x)); };
    EXPECT_NEAR(logit.grad()[0].item<double>(), (0.5 - 2.0) * dsig(0.3) + sig(0.3), 1e-14);
    EXPECT_NEAR(logit.grad()[1].item<double>(), 0.5 * dsig(-1.2) + sig(-1.2) - 1, 1e-14);
  }
  const double t_max = 3;
  const std::vector<double> dp0{1.7, 0.4, 2.5, 0.5, 0.05}, deg{3, 1, 2, 2, 4}, off{0.1, -0.2, 0, 0.3, 0.2};
  auto l_of = [&](size_t i, bool with_offset) {
    const double alpha = (1 + 2 * dp0[i] - deg[i]) / (deg[i] + 1);
    return t_max * (2 * std::log(std::max(std::abs(alpha), 1e-12)) + std::log(deg[i] + 1)) +
           (with_offset ? off[i] : 0);
  };
  const at::Tensor d_t = torch::tensor(deg, f64), off_t = torch::tensor(off, f64);
  for (const bool with_offset : {false, true}) {
    for (const bool log_norm : {false, true}) {
      SCOPED_TRACE(std::string(with_offset ? "offset, " : "") + (log_norm ? "log" : "linear"));
      const at::Tensor offset = with_offset ? off_t : at::Tensor();
      std::vector<double> l;
      for (size_t i = 0; i < dp0.size(); ++i) l.push_back(l_of(i, with_offset));
      const double lo = *std::min_element(l.begin(), l.end()), hi = *std::max_element(l.begin(), l.end());
      const at::Tensor range = d::depth_benefit_range(torch::tensor(dp0, f64), d_t, offset, t_max);
      EXPECT_NEAR(range[0].item<double>(), -lo, 1e-12);
      EXPECT_NEAR(range[1].item<double>(), hi, 1e-12);
      const at::Tensor dp = torch::tensor(dp0, f64).requires_grad_(true);
      const at::Tensor eps = d::normalised_depth_benefit(dp, d_t, offset, range, t_max, log_norm);
      const std::vector<double> want = log_norm ? std::vector<double>{} : linear_norm(l);
      for (size_t i = 0; i < l.size(); ++i) {
        const double e = log_norm ? (l[i] - lo) / (hi - lo) : want[i];
        EXPECT_NEAR(eps[int64_t(i)].item<double>(), std::clamp(e, 0.0, 1.0), 1e-12) << "row " << i;
      }
      EXPECT_EQ(eps[3].item<double>(), 0.0);  // alpha = 0: the floor, the minimum
      // d+'s gradient against finite differences, the range held (wider than l's, so that no
      // row sits on the clamp). The alpha = 0 row gets none (the floor's; a step of d+ there
      // jumps off it).
      const at::Tensor wide = range.detach() + 0.5;
      const at::Tensor w = torch::tensor({0.3, -1.1, 0.8, 2.0, -0.6}, f64);
      (d::normalised_depth_benefit(dp, d_t, offset, wide, t_max, log_norm) * w).sum().backward();
      for (const int64_t i : {0, 1, 2, 4}) {
        const double h = 1e-6;
        at::Tensor up = dp.detach().clone(), down = dp.detach().clone();
        up[i] += h;
        down[i] -= h;
        auto f = [&](const at::Tensor& x) {
          return (d::normalised_depth_benefit(x, d_t, offset, wide, t_max, log_norm) * w).sum().item<double>();
        };
        EXPECT_NEAR(dp.grad()[i].item<double>(), (f(up) - f(down)) / (2 * h), 1e-6) << "row " << i;
      }
      EXPECT_EQ(dp.grad()[3].item<double>(), 0.0);
    }
  }
  // Every row equal: each is the maximum (eps 1), without a gradient; no rows: an empty range.
  const at::Tensor same = torch::full({3}, 0.9, f64).requires_grad_(true), d3 = torch::full({3}, 2.0, f64);
  const at::Tensor eq = d::normalised_depth_benefit(same, d3, {}, d::depth_benefit_range(same, d3, {}, t_max), t_max,
                                                    false);
  EXPECT_TRUE(torch::equal(eq, torch::ones({3}, f64)));
  eq.sum().backward();
  EXPECT_TRUE(torch::equal(same.grad(), torch::zeros({3}, f64)));
  const at::Tensor none = d::depth_benefit_range(torch::zeros({0}, f64), torch::zeros({0}, f64), {}, t_max);
  EXPECT_TRUE(torch::equal(none, torch::full({2}, -INFINITY, f64)));
}

TEST(AdGradients, TauThresholdsByHand) {
  const auto f64 = torch::kFloat64;
  const std::vector<double> a0{-1.5, 0.3, 25.0};
  const at::Tensor a = torch::tensor(a0, f64).requires_grad_(true);
  const double lambda = 0.2;
  const adgnn::detail::Thresholds th = adgnn::detail::tau_thresholds(a, 4, lambda);
  ASSERT_EQ(th.layers.size(), 4u);
  EXPECT_FALSE(th.all.requires_grad());
  double c = 0;
  for (int t = 0; t < 4; ++t) {
    if (t > 0) c += a0[size_t(t - 1)] > 20 ? a0[size_t(t - 1)] : std::log1p(std::exp(a0[size_t(t - 1)]));
    const double want = lambda + (1 - lambda) * (1 - std::exp(-c));
    EXPECT_NEAR(th.all[t].item<double>(), want, 1e-15) << "t " << t + 1;
    EXPECT_NEAR(th.layers[size_t(t)].item<double>(), want, 1e-15) << "t " << t + 1;
  }
  const std::vector<double> weight{0.7, -1.3, 2.1, 0.4};
  auto weighted = [&](const at::Tensor& at_a) {
    const adgnn::detail::Thresholds v = adgnn::detail::tau_thresholds(at_a, 4, lambda);
    at::Tensor sum = torch::zeros({}, f64);
    for (size_t t = 1; t < 4; ++t) sum = sum + weight[t] * v.layers[t];  // tau(1) unused, as at layer 1
    return sum;
  };
  weighted(a).backward();
  for (int64_t j = 0; j < 3; ++j) {
    const double h = 1e-6;
    at::Tensor up = a.detach().clone(), down = a.detach().clone();
    up[j] += h;
    down[j] -= h;
    const double fd = (weighted(up).item<double>() - weighted(down).item<double>()) / (2 * h);
    EXPECT_NEAR(a.grad()[j].item<double>(), fd, 1e-8) << "a " << j;
  }
  const adgnn::detail::Thresholds one = adgnn::detail::tau_thresholds(torch::zeros({0}, f64), 1, lambda);
  EXPECT_DOUBLE_EQ(one.layers.at(0).item<double>(), lambda);
}

// One process with lambda = 0 issues layer 1's forward before it waits for the layers' row
// counts (every row is computed there); with lambda > 0 (rows may skip layer 1) it does not.
// The results are pinned by the PyG comparisons and the distributed tests (ranks of MixHop take
// the plain order).
TEST(AdGradients, FirstLayerIsIssuedBeforeTheCountsExactlyWhenLambdaIsZero) {
  const auto g = csbm(90, 0.4, 5);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  const at::Tensor train = torch::rand({g.num_nodes}) < 0.5;
  for (const std::string variant : {"ad", "ad_fast", "ad_sharp"})
    for (const double lambda : {0.0, 0.3}) {
      SCOPED_TRACE(variant + " lambda " + std::to_string(lambda));
      auto cfg = config(variant, 3, g);
      cfg.lambda = lambda;
      adgnn::Model model(cfg);
      if (variant == "ad_sharp") (void)model.forward(mg, t.x, true, 1, t.y, train);
      const auto out = model.forward(mg, t.x, true, 2, t.y, train);
      EXPECT_EQ(out.stats.first_layer_early, lambda == 0);
    }
}

TEST(Model, RejectsBadSettings) {
  const auto g = six_nodes();
  auto expect_bad = [&](adgnn::ModelConfig c, const std::string& flag) {
    try {
      adgnn::Model m(c);
      FAIL() << "accepted bad " << flag;
    } catch (const adgnn::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  // Backbones and variants are parsed where they enter (the command line, YAML): a name that is
  // none of them is refused there, naming the flag.
  auto expect_bad_name = [](auto parse, const std::string& name, const std::string& flag) {
    try {
      parse(name);
      FAIL() << "accepted " << name;
    } catch (const adgnn::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(flag + " " + name + ": unknown"), std::string::npos) << e.what();
    }
  };
  expect_bad_name([](const std::string& n) { return adgnn::parse_backbone(n); }, "gin", "--model");
  expect_bad_name([](const std::string& n) { return adgnn::parse_variant(n); }, "adx", "--variant");
  auto c = config("plain", 0, g);
  expect_bad(c, "--layers");
  c = config("plain", 2, g);
  c.dropout = 1.0;
  expect_bad(c, "--dropout");
  c = config("ad", 2, g);
  c.lambda = 1.5;
  expect_bad(c, "--lambda");
  c = config("plain", 2, g);
  c.normalisation = "cubic";
  expect_bad(c, "--normalisation");
  c = config("plain", 2, g);
  c.device = "tpu:7";
  expect_bad(c, "--device");
}

TEST(Dropout, CounterBasedMasksDependOnlyOnTheirKeys) {
  const at::Tensor h = torch::ones({50, 7});
  const at::Tensor ids = torch::arange(100, 150, torch::kInt64);
  const at::Tensor a = adgnn::dropout_rows(h, ids, 0.5, 9, 3, 1);
  // The same global ids in another order (another partition) get the same rows.
  const at::Tensor perm = torch::randperm(50, torch::kInt64);
  const at::Tensor b = adgnn::dropout_rows(h.index_select(0, perm), ids.index_select(0, perm), 0.5, 9, 3, 1);
  EXPECT_TRUE(torch::equal(a.index_select(0, perm), b));
  EXPECT_FALSE(torch::equal(a, adgnn::dropout_rows(h, ids, 0.5, 9, 4, 1)));  // other epoch
  EXPECT_FALSE(torch::equal(a, adgnn::dropout_rows(h, ids, 0.5, 9, 3, 2)));  // other layer
  const double kept = (a > 0).to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(kept, 0.5, 0.08);
  EXPECT_TRUE(torch::allclose(a.masked_select(a > 0), torch::full({1}, 2.0f)));
}

// The mask is computed in place, forward and backward: the output and the gradient must be the
// input and the upstream gradient times the same mask, in float and double.
TEST(Dropout, GradientIsTheMaskAndDoubleUsesTheSameBits) {
  const at::Tensor ids = torch::arange(7, 67, torch::kInt64);
  const at::Tensor mask = adgnn::dropout_rows(torch::ones({60, 9}), ids, 0.3, 5, 2, 3);
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    const at::Tensor h = (torch::rand({60, 9}, torch::dtype(dtype)) + 0.5).requires_grad_(true);
    const at::Tensor probe = torch::randn({60, 9}, torch::dtype(dtype));
    const at::Tensor out = adgnn::dropout_rows(h, ids, 0.3, 5, 2, 3);
    (out * probe).sum().backward();
    const at::Tensor m = mask.to(dtype);
    EXPECT_TRUE(torch::equal(out.detach(), h.detach() * m)) << dtype;
    EXPECT_TRUE(torch::equal(h.grad(), probe * m)) << dtype;
  }
  EXPECT_GT((mask == 0).sum().item<int64_t>(), 0);
}

// Row flags: the flagged rows get the full dropout's values and gradient; the others are NaN
// (read by nobody) with a zero gradient.
TEST(Dropout, RowFlagsComputeOnlyTheFlaggedRows) {
  const at::Tensor ids = torch::arange(3, 43, torch::kInt64);
  const at::Tensor flags = (torch::arange(40) % 3 == 1).to(torch::kUInt8);
  const at::Tensor flagged = flags.to(torch::kBool);
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    const at::Tensor h = (torch::rand({40, 6}, torch::dtype(dtype)) + 0.5).requires_grad_(true);
    const at::Tensor full = adgnn::dropout_rows(h.detach(), ids, 0.4, 8, 1, 2);
    const at::Tensor out = adgnn::dropout_rows(h, ids, 0.4, 8, 1, 2, flags);
    EXPECT_TRUE(torch::equal(out.detach().index({flagged}), full.index({flagged}))) << dtype;
    EXPECT_TRUE(out.detach().index({~flagged}).isnan().all().item<bool>()) << dtype;
    const at::Tensor probe = torch::randn({40, 6}, torch::dtype(dtype));
    const at::Tensor mask = adgnn::dropout_rows(torch::ones({40, 6}, torch::dtype(dtype)), ids, 0.4, 8, 1, 2);
    (out.index({flagged}) * probe.index({flagged})).sum().backward();
    EXPECT_TRUE(torch::equal(h.grad(), probe * mask * flagged.unsqueeze(1).to(dtype))) << dtype;
  }
  EXPECT_THROW(adgnn::dropout_rows(torch::ones({40, 6}), ids, 0.4, 8, 1, 2, flags.slice(0, 0, 39)), c10::Error);
}

// The dropout that also passes its input on: the same values as dropout_rows, and the same
// gradient bit for bit as dropping out and using the input separately (the backward adds into
// the input's gradient in place), whichever outputs are used.
TEST(Dropout, AndInputGivesTheSeparateGradients) {
  const at::Tensor ids = torch::arange(3, 43, torch::kInt64);
  const at::Tensor flags = (torch::arange(40) % 3 == 1).to(torch::kUInt8);
  const at::Tensor flagged = flags.to(torch::kBool).unsqueeze(1);
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    for (const bool with_flags : {true, false}) {
      const at::Tensor f = with_flags ? flags : at::Tensor();
      const at::Tensor p1 = torch::randn({40, 6}, torch::dtype(dtype)), p2 = torch::randn({40, 6}, torch::dtype(dtype));
      for (int use = 1; use <= 3; ++use) {  // bit 0: the dropped output, bit 1: the input
        const at::Tensor base = torch::rand({40, 6}, torch::dtype(dtype)) + 0.5;
        const at::Tensor h1 = base.clone().requires_grad_(true), h2 = base.clone().requires_grad_(true);
        // Reference: the two uses apart (autograd adds the gradients).
        const at::Tensor d1 = adgnn::dropout_rows(h1 * 1, ids, 0.4, 8, 1, 2, f);
        at::Tensor loss1 = torch::zeros({}, torch::dtype(dtype));
        if (use & 1) loss1 = loss1 + (with_flags ? torch::where(flagged, d1 * p1, 0) : d1 * p1).sum();
        if (use & 2) loss1 = loss1 + ((h1 * 1) * p2).sum();
        loss1.backward();
        auto [d2, kept] = adgnn::dropout_rows_and_input(h2 * 1, ids, 0.4, 8, 1, 2, f);
        EXPECT_TRUE(torch::equal(torch::where(flagged, d2, 0).detach(), torch::where(flagged, d1, 0).detach()));
        EXPECT_TRUE(torch::equal(kept.detach(), base));
        at::Tensor loss2 = torch::zeros({}, torch::dtype(dtype));
        if (use & 1) loss2 = loss2 + (with_flags ? torch::where(flagged, d2 * p1, 0) : d2 * p1).sum();
        if (use & 2) loss2 = loss2 + (kept * p2).sum();
        loss2.backward();
        EXPECT_TRUE(torch::equal(h1.grad(), h2.grad())) << dtype << " flags " << with_flags << " use " << use;
      }
    }
  }
  // A gradient that its producer also hands to another input (AddBackward's) is not changed in
  // place: the other input's gradient stays what it is.
  // (`other` is created first, so its backward runs after the dropout's.)
  const at::Tensor h = torch::rand({40, 6}).requires_grad_(true), o = torch::zeros({40, 6}).requires_grad_(true);
  const at::Tensor other = o * 1, probe = torch::randn({40, 6});
  auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, ids, 0.4, 8, 1, 2, flags);
  (torch::where(flagged, dropped, 0).sum() + ((kept + other) * probe).sum()).backward();
  EXPECT_TRUE(torch::equal(o.grad(), probe));
  const at::Tensor mask = adgnn::dropout_rows(torch::ones({40, 6}), ids, 0.4, 8, 1, 2);
  EXPECT_TRUE(torch::equal(h.grad(), probe + torch::where(flagged, mask, 0)));
}

// AD's deeper layers drop out only the rows their computed rows read: on a compact graph of them
// (compact on) or flagged in the full-size input (compact off; the classifier, which also reads
// its frozen rows, flags those too). Logits equal those of dropout
// over every source row on the whole graph bit for bit (so no NaN of an unread row was read), and
// every gradient within float rounding (the backward sums in another order), for each way of
// reading (one CSR, attention, DirGNN's two directions, MixHop's two hops), and the restricted
// path ran.
TEST(Dropout, RowsReadOnlyEqualsEveryRow) {
  const auto g = csbm(400, 0.5, 1);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  const at::Tensor train = torch::rand({400}) < 0.5;
  for (const char* backbone : {"gcn", "sage", "gat", "gatv2", "dirgnn", "mixhop"}) {
    auto cfg = config("ad_fast", 4, g);
    cfg.backbone = adgnn::parse_backbone(backbone);
    cfg.dropout = 0.5;
    cfg.theta_init = -2;
    std::vector<at::Tensor> logits, grads;
    int64_t few = 0, few_classifier = 0;
    for (const char* mode : {"every row", "compact", "flags"}) {
      const std::string m = mode;
      cfg.compact_deep_layers = m == "compact" ? "on" : "off";
      cfg.dropout_rows_read = m == "flags";
      adgnn::Model model(cfg);  // same seed: same parameters
      const at::Tensor x = t.x.clone().requires_grad_(true);
      const auto out = model.forward(mg, x, true, 7, t.y, train);
      const at::Tensor loss = torch::nll_loss(torch::log_softmax(out.logits, 1).index({train}), t.y.index({train}));
      loss.backward();
      logits.push_back(out.logits.detach());
      grads.push_back(x.grad());
      for (const auto& p : model.named_parameters())
        if (p.second.grad().defined()) grads.push_back(p.second.grad());
      for (size_t l = 1; l + 1 < out.stats.computed_rows.size(); ++l) few += out.stats.computed_rows[l] * 4 < 400;
      few_classifier += out.stats.computed_rows.back() * 4 < 400;  // flags + its frozen rows
    }
    SCOPED_TRACE(backbone);
    EXPECT_GT(few, 0) << "no layer computed few rows: the restricted paths did not run";
    EXPECT_GT(few_classifier, 0) << "the classifier computed many rows: its flagged path did not run";
    EXPECT_TRUE(torch::equal(logits[0], logits[1]));
    EXPECT_TRUE(torch::equal(logits[0], logits[2]));
    ASSERT_EQ(grads.size() % 3, 0u);
    const size_t third = grads.size() / 3;
    for (size_t i = 0; i < third; ++i) {
      EXPECT_TRUE(torch::allclose(grads[i], grads[third + i], 1e-5, 1e-7)) << "compact, gradient " << i;
      EXPECT_TRUE(torch::allclose(grads[i], grads[2 * third + i], 1e-5, 1e-7)) << "flags, gradient " << i;
    }
  }
}

// AD#: the first pass has beta = gamma = 1 (the fast metric); a training pass estimates them per
// degree bucket from its embeddings, and the next pass's log eps_hat moves by
// t_max (log beta - log gamma) of the node's bucket.
TEST(AdSharp, CalibratesTheFastMetricFromThePreviousPass) {
  const auto g = csbm(300, 0.3, 6);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t);
  auto cfg = config("ad_sharp", 3, g);
  cfg.normalisation = "log";
  cfg.benefit_range = std::make_pair(-40.0, 40.0);
  adgnn::Model sharp(cfg);
  cfg.variant = adgnn::Variant::AdFast;
  adgnn::Model fast(cfg);
  const at::Tensor e_fast = fast.forward(mg, t.x, false, 0, {}, {}).eps;
  EXPECT_TRUE(torch::allclose(sharp.forward(mg, t.x, false, 0, {}, {}).eps, e_fast));
  const at::Tensor train = torch::arange(g.num_nodes) % 3 != 0;
  sharp.forward(mg, t.x, true, 1, t.y, train);
  at::Tensor log_beta, log_gamma;
  for (auto& [name, b] : sharp.named_buffers()) {
    if (name == "sharp.log_beta") log_beta = b;
    if (name == "sharp.log_gamma") log_gamma = b;
  }
  ASSERT_TRUE(log_beta.defined() && log_gamma.defined());
  EXPECT_GT((log_beta - log_gamma).abs().sum().item<double>(), 0.0);
  const at::Tensor bucket = (t.degree.to(torch::kFloat64) + 1).log2().floor().to(torch::kInt64);
  const at::Tensor shift = 3.0 * (log_beta - log_gamma).index_select(0, bucket);
  // With the range fixed, log normalisation is affine: eps moves by shift / (hi - lo).
  const at::Tensor e_sharp = sharp.forward(mg, t.x, false, 2, {}, {}).eps;
  EXPECT_TRUE(torch::allclose(e_sharp.to(torch::kFloat64), e_fast.to(torch::kFloat64) + shift / 80.0, 1e-5, 1e-6));
}

// lambda = 0 makes every node aggregate at least once: eps is never below tau(1) = 0, also for
// the many nodes that share the minimum (found on Planetoid CiteSeer, where float32 rounding put
// 498 of them a hair below 0).
TEST(DepthBenefit, LambdaZeroMeansEveryNodeAggregatesOnce) {
  std::vector<adgnn::Graph> graphs{csbm(500, 0.2, 9)};
  const char* env = std::getenv("ADGNN_DATA");
  const std::string data = env && *env ? env : ADGNN_TEST_DATA;
  if (std::filesystem::is_directory(data)) graphs.push_back(adgnn::load_dataset("citeseer_planetoid", data));
  for (const auto& g : graphs) {
    const auto t = adgnn::to_tensors(g, torch::kCPU);
    const auto mg = adgnn::message_graph(t);
    for (const char* variant : {"ad_fast", "ad"})
      for (const char* norm : {"linear", "log"}) {
        auto cfg = config(variant, 2, g);
        cfg.normalisation = norm;
        adgnn::Model model(cfg);
        const auto out = model.forward(mg, t.x, false, 0);
        EXPECT_GE(out.eps.min().item<double>(), 0.0) << g.name << " " << variant << " " << norm;
        EXPECT_LE(out.eps.max().item<double>(), 1.0) << g.name << " " << variant << " " << norm;
        EXPECT_EQ(out.stats.active_rows[0], g.num_nodes) << g.name << " " << variant << " " << norm;
      }
  }
}

// Plain GCN, three layers, equals its dense formula Â relu(Â relu(Â X W1 + b1) W2 + b2) W3 + b3
// with Â = D^-1/2 (A + I) D^-1/2 (float64): the hidden layers' ReLU (fused into the layer, or
// applied by the model with BatchNorm off) and every product, in training and evaluation mode
// (dropout 0), also through the transform-first path of a narrowing hidden layer (8 -> 4 wide).
TEST(Model, PlainGcnEqualsItsDenseFormula) {
  const auto g = csbm(70, 0.5, 12);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const int64_t n = g.num_nodes;
  const at::Tensor rows = torch::repeat_interleave(t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, n));
  at::Tensor a = torch::eye(n, torch::kFloat64);
  a.index_put_({rows, t.col.to(torch::kInt64)}, torch::ones({t.col.numel()}, torch::kFloat64), /*accumulate=*/true);
  const at::Tensor inv_sqrt = a.sum(1).rsqrt();
  const at::Tensor a_hat = inv_sqrt.unsqueeze(1) * a * inv_sqrt.unsqueeze(0);
  const at::Tensor x = t.x.to(torch::kFloat64);
  for (const int64_t hidden : {int64_t(16), int64_t(4)}) {
    auto cfg = config("plain", 3, g);
    cfg.float64 = true;
    cfg.hidden = hidden;
    adgnn::Model model(cfg);
    std::map<std::string, at::Tensor> p;
    for (auto& [name, v] : model.named_parameters()) p[name] = v.detach();
    at::Tensor h = x;
    for (int l = 0; l < 3; ++l) {
      const std::string k = "layers." + std::to_string(l);
      h = a_hat.mm(h).mm(p.at(k + ".weight")) + p.at(k + ".bias");
      if (l < 2) h = torch::relu(h);
    }
    for (const bool training : {false, true}) {
      const at::Tensor logits = model.forward(mg, x, training, 0).logits;
      EXPECT_TRUE(torch::allclose(logits, h, 1e-10, 1e-12)) << "hidden " << hidden << ", training " << training
                                                            << ": " << (logits - h).abs().max();
    }
  }
}

// Whether the autograd graph behind t holds a node whose name contains `name`.
bool autograd_graph_has(const at::Tensor& t, const std::string& name) {
  std::vector<std::shared_ptr<torch::autograd::Node>> todo{t.grad_fn()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    const auto node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    if (node->name().find(name) != std::string::npos) return true;
    for (const auto& e : node->next_edges()) todo.push_back(e.function);
  }
  return false;
}

// A plain model's hidden layer that ends with its fused ReLU also drops out the next layer's
// input (one autograd node, whose backward needs no mask): GCN does, SAGE does not. That it is
// the separate dropout's function is pinned by the distributed tests (a rank drops out
// separately) and the PyG comparisons.
TEST(Model, GcnFusesTheNextLayersDropout) {
  const auto g = csbm(300, 0.5, 4);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const at::Tensor train = torch::rand({g.num_nodes}) < 0.5;
  const auto mg = adgnn::message_graph(t);
  for (const char* backbone : {"gcn", "sage"}) {
    SCOPED_TRACE(backbone);
    auto cfg = config("plain", 4, g);
    cfg.backbone = adgnn::parse_backbone(backbone);
    cfg.hidden = 16;
    cfg.dropout = 0.4;
    adgnn::Model model(cfg);
    const auto out = model.forward(mg, t.x, true, 5, t.y, train);
    EXPECT_EQ(autograd_graph_has(out.logits, "LinearReluDropoutFn"), std::string(backbone) == "gcn");
  }
}

}  // namespace

// Renumbering the nodes (adgnn data reorder) renumbers every output and changes nothing else:
// each backbone, plain and fast AD, evaluation mode (training's dropout masks are keyed by node
// id, so they differ by design). Also a second forward over the same graph (the fast variant's
// cached depth benefit) equals the first.
TEST(Model, RenumberedNodesGiveRenumberedOutputs) {
  adgnn::CsbmParams p;
  p.nodes = 300;
  p.classes = 3;
  p.avg_degree = 6;
  p.degree_dist = "powerlaw";
  p.features = 8;
  p.seed = 2;
  p.threads = 1;
  const adgnn::Graph g = adgnn::generate_csbm(p);
  std::vector<int64_t> order(size_t(g.num_nodes));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::reverse(order.begin(), order.end());
  std::swap(order[3], order[200]);
  const adgnn::Graph h = adgnn::permute_nodes(g, order);
  const auto tg = adgnn::to_tensors(g, torch::kCPU), th = adgnn::to_tensors(h, torch::kCPU);
  const auto mg = adgnn::message_graph(tg, torch::kFloat64), mh = adgnn::message_graph(th, torch::kFloat64);
  const at::Tensor idx = torch::tensor(order, torch::kInt64);
  for (const char* backbone : {"gcn", "gat", "sage", "mixhop", "gatv2", "dirgnn"}) {
    for (const char* variant : {"plain", "ad_fast"}) {
      SCOPED_TRACE(std::string(backbone) + " " + variant);
      auto c = config(variant, 3, g);
      c.backbone = adgnn::parse_backbone(backbone);
      c.float64 = true;
      c.normalisation = "log";  // depth really varies by node
      adgnn::Model a(c), b(c);
      const auto oa = a.forward(mg, tg.x.to(torch::kFloat64), false, 0);
      const auto ob = b.forward(mh, th.x.to(torch::kFloat64), false, 0);
      EXPECT_TRUE(torch::allclose(ob.logits, oa.logits.index_select(0, idx), 1e-10, 1e-10))
          << (ob.logits - oa.logits.index_select(0, idx)).abs().max();
      EXPECT_TRUE(torch::equal(ob.depth, oa.depth.index_select(0, idx)));
      const auto again = a.forward(mg, tg.x.to(torch::kFloat64), false, 0);
      EXPECT_TRUE(torch::equal(again.logits, oa.logits));
    }
  }
}
