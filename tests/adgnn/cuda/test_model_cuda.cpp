// Whole models on the GPU against the same models on the CPU (model/model.cpp, forward_pass.cpp):
// logits, L_reg, the depths and every gradient, over the backbones and variants. Every test skips
// without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "adgnn/model.h"
#include "cuda_test_util.h"

namespace {

using namespace adgnn::cuda_test;

// A GCN of depth 4, hidden 64, dropout 0.5 on the GPU (the model tests below, against the CPU).
adgnn::ModelConfig depth4_config(const adgnn::Graph& g, const std::string& variant, uint64_t seed) {
  adgnn::ModelConfig c;
  c.variant = adgnn::parse_variant(variant);
  c.layers = 4;
  c.hidden = 64;
  c.in_dim = g.features.cols;
  c.out_dim = g.num_classes;
  c.dropout = 0.5;
  c.seed = seed;
  c.device = "cuda";
  return c;
}

// One training pass of `c` on `device` (every third node a training node; the loss, plus L_reg
// with with_reg): the logits, L_reg, x's gradient (with x_grad) and every parameter's gradient
// (undefined where it has none), on the host.
struct ModelPass {
  at::Tensor logits, reg, x_grad;
  std::vector<at::Tensor> grads;
  bool first_layer_early = false;
};
ModelPass model_pass(const adgnn::Graph& g, adgnn::ModelConfig c, const std::string& device, int64_t epoch,
                     bool x_grad, bool with_reg) {
  const c10::Device dev(device);
  const auto t = adgnn::to_tensors(g, dev);
  const auto mg = adgnn::message_graph(t);
  const at::Tensor train = (torch::arange(g.num_nodes) % 3 == 0).to(dev);
  c.device = device;
  adgnn::Model m(c);
  const at::Tensor x = x_grad ? t.x.detach().clone().requires_grad_(true) : t.x;
  const auto out = m.forward(mg, x, true, epoch, t.y, train);
  at::Tensor loss = torch::nll_loss(torch::log_softmax(out.logits, 1).index({train}), t.y.index({train}));
  if (with_reg) loss = loss + out.reg_loss;
  loss.backward();
  ModelPass r;
  r.logits = out.logits.detach().cpu();
  r.reg = out.reg_loss.detach().cpu();
  if (x_grad) r.x_grad = x.grad().cpu();
  for (auto& [n, p] : m.named_parameters()) r.grads.push_back(p.grad().defined() ? p.grad().cpu() : at::Tensor());
  r.first_layer_early = out.stats.first_layer_early;
  return r;
}

// A GPU pass against the CPU's (as CudaModel.ForwardAndGradientsMatchCpu): float32 sums in
// another order (atomics in GAT's backward), so the logits and L_reg within 1e-4, each gradient
// within 1e-3 of its own scale.
void expect_pass_matches_cpu(const ModelPass& gpu, const ModelPass& cpu) {
  EXPECT_TRUE(torch::allclose(gpu.logits, cpu.logits, 1e-4, 1e-4)) << (gpu.logits - cpu.logits).abs().max();
  EXPECT_TRUE(torch::allclose(gpu.reg, cpu.reg, 1e-4, 1e-4)) << gpu.reg << " against " << cpu.reg;
  auto within_scale = [](const at::Tensor& a, const at::Tensor& b) {
    const double diff = (a - b).abs().max().item<double>();
    const double scale = std::max(1.0, b.abs().max().item<double>());
    return ::testing::AssertionResult(diff <= 1e-3 * scale) << "max |diff| " << diff << ", max |grad| " << scale;
  };
  ASSERT_EQ(gpu.x_grad.defined(), cpu.x_grad.defined());
  if (cpu.x_grad.defined()) {
    EXPECT_TRUE(within_scale(gpu.x_grad, cpu.x_grad)) << "x's gradient";
  }
  ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
  for (size_t i = 0; i < cpu.grads.size(); ++i) {
    const at::Tensor &a = gpu.grads[i], &b = cpu.grads[i];
    if (a.defined() && b.defined() && b.numel() > 0) {
      EXPECT_TRUE(within_scale(a, b)) << "parameter " << i;
    } else if (a.defined() != b.defined()) {  // no gradient on one device: zero on the other
      EXPECT_EQ((a.defined() ? a : b).abs().sum().item<double>(), 0.0) << "parameter " << i;
    }
  }
}

// GCN's hidden layers run with the next layer's dropout fused (the ReLU gradient kernel scaled,
// no dropout backward): on the GPU, logits, x's and every parameter's gradient against the CPU's
// model (the same dropout masks: a counter-based generator keyed by node id).
TEST(Cuda, FusedOutputDropoutMatchesTheCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 7);
  const auto c = depth4_config(g, "plain", 9);
  expect_pass_matches_cpu(model_pass(g, c, "cuda", 4, true, false), model_pass(g, c, "cpu", 4, true, false));
}

// On the GPU, layer 1 is issued before the wait for the counts (their copy into pinned memory,
// an event): logits, L_reg and gradients against the CPU's model, learned and fast.
TEST(Cuda, FirstLayerBeforeTheCountsMatchesTheCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 8);
  for (const std::string variant : {"ad", "ad_fast"}) {
    SCOPED_TRACE(variant);
    const auto c = depth4_config(g, variant, 4);
    const ModelPass gpu = model_pass(g, c, "cuda", 6, false, true);
    EXPECT_TRUE(gpu.first_layer_early);
    expect_pass_matches_cpu(gpu, model_pass(g, c, "cpu", 6, false, true));
  }
}

// At model level, rows summed in length order (Cuda.LengthOrderedRowsMatchTheCpuReference): GCN,
// GraphSAGE and GAT, plain and AD-GCN_fast, logits and gradients against the CPU's model.
TEST(Cuda, LengthOrderedModelsMatchTheCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 12);
  for (const std::string backbone : {"gcn", "sage", "gat"}) {
    for (const std::string variant : {"plain", "ad_fast"}) {
      SCOPED_TRACE(backbone + " " + variant);
      auto c = depth4_config(g, variant, 6);
      c.backbone = adgnn::parse_backbone(backbone);
      expect_pass_matches_cpu(model_pass(g, c, "cuda", 2, false, false), model_pass(g, c, "cpu", 2, false, false));
    }
  }
}

class CudaModel : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(CudaModel, ForwardAndGradientsMatchCpu) {
  REQUIRE_GPU();
  const auto g = graph(800, 2);
  const auto [backbone, variant] = GetParam();
  at::Tensor logits[2];
  std::vector<at::Tensor> grads[2];
  std::vector<std::string> names;
  at::Tensor depth[2];
  for (int dev = 0; dev < 2; ++dev) {
    const std::string name = dev ? "cuda" : "cpu";
    const auto t = adgnn::to_tensors(g, c10::Device(name));
    const auto mg = adgnn::message_graph(t);
    adgnn::ModelConfig c;
    c.backbone = adgnn::parse_backbone(backbone);
    c.variant = adgnn::parse_variant(variant);
    c.layers = 3;
    c.hidden = 16;
    c.heads = 2;
    c.in_dim = g.features.cols;
    c.out_dim = g.num_classes;
    c.dropout = 0.3;
    c.normalisation = "log";
    c.seed = 5;
    c.device = name;
    adgnn::Model m(c);
    const at::Tensor train = (torch::arange(g.num_nodes) % 2 == 0).to(c10::Device(name));
    auto out = m.forward(mg, t.x, true, 3, t.y, train);
    (out.logits.sum() + out.reg_loss).backward();
    logits[dev] = out.logits.detach().cpu();
    depth[dev] = out.depth.cpu();
    for (auto& [n, p] : m.named_parameters()) {
      grads[dev].push_back(p.grad().defined() ? p.grad().cpu() : torch::zeros({0}));
      if (dev == 0) names.push_back(n);
    }
  }
  EXPECT_TRUE(torch::allclose(logits[0], logits[1], 1e-4, 1e-4)) << (logits[0] - logits[1]).abs().max();
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_TRUE(torch::equal(depth[0], depth[1]));
  for (size_t i = 0; i < grads[0].size(); ++i) {
    if (grads[0][i].numel()) {
      // float32 sums of up to thousands of terms in another order (atomics on the GPU): the
      // difference is judged against the gradient's own scale.
      const double diff = (grads[0][i] - grads[1][i]).abs().max().item<double>();
      const double scale = std::max(1.0, grads[0][i].abs().max().item<double>());
      EXPECT_LE(diff, 1e-3 * scale) << names[i] << ": max |diff| " << diff << ", max |grad| " << scale;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backbones, CudaModel,
    ::testing::Values(std::pair{"gcn", "plain"}, std::pair{"gcn", "ad_fast"}, std::pair{"gcn", "ad"},
                      std::pair{"gat", "ad_fast"}, std::pair{"sage", "ad_fast"},
                      std::pair{"mixhop", "ad_fast"}, std::pair{"gatv2", "ad"},
                      std::pair{"dirgnn", "ad_fast"}),
    [](const auto& info) { return info.param.first + "_" + info.param.second; });

}  // namespace
