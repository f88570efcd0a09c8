// CUDA kernels and models against the CPU reference (runs on the GPU machine; skips elsewhere).
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "adgnn/gnn.h"

namespace {

bool have_gpu() { return adgnn::cuda_kernels_built() && at::hasCUDA() && torch::cuda::device_count() > 0; }
#define REQUIRE_GPU()                                                                      \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build (CPU " \
                                   "machine); these tests run on the GPU machine"

adgnn::Graph graph(int64_t nodes, uint64_t seed) {
  adgnn::CsbmParams p;
  p.nodes = nodes;
  p.classes = 4;
  p.avg_degree = 8;
  p.degree_dist = "powerlaw";
  p.homophily = 0.4;
  p.features = 16;
  p.seed = seed;
  return adgnn::generate_csbm(p);
}

TEST(Cuda, AggregateForwardAndBackwardMatchCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 1);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const at::Tensor x = torch::randn({g.num_nodes, 33});
  const at::Tensor w = torch::rand({t.col.numel()});
  const at::Tensor rows = torch::randperm(g.num_nodes, torch::kInt64).slice(0, 0, 700);
  const at::Tensor rows_sorted = std::get<0>(rows.sort());
  const at::Tensor probe = torch::randn({700, 33});
  at::Tensor grads[2][2], outs[2];
  for (int dev = 0; dev < 2; ++dev) {
    const c10::Device d = dev ? c10::Device("cuda") : c10::Device("cpu");
    at::Tensor xx = x.to(d).detach().clone().requires_grad_(true),
               ww = w.to(d).detach().clone().requires_grad_(true);
    outs[dev] = adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), ww, xx, rows_sorted.to(d));
    (outs[dev] * probe.to(d)).sum().backward();
    grads[dev][0] = xx.grad().cpu();
    grads[dev][1] = ww.grad().cpu();
  }
  EXPECT_TRUE(torch::allclose(outs[0], outs[1].cpu(), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(grads[0][0], grads[1][0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(grads[0][1], grads[1][1], 1e-4, 1e-5));
  // Deterministic forward: two calls give identical bits.
  const auto d = c10::Device("cuda");
  EXPECT_TRUE(torch::equal(adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), {}, x.to(d)),
                           adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), {}, x.to(d))));
}

TEST(Cuda, DropoutMasksEqualTheCpuOnes) {
  REQUIRE_GPU();
  const at::Tensor h = torch::ones({1000, 37});
  const at::Tensor ids = torch::arange(5000, 6000, torch::kInt64);
  const at::Tensor cpu = adgnn::dropout_rows(h, ids, 0.3, 11, 7, 2);
  const at::Tensor gpu = adgnn::dropout_rows(h.cuda(), ids.cuda(), 0.3, 11, 7, 2);
  EXPECT_TRUE(torch::equal(cpu, gpu.cpu()));
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
    c.backbone = backbone;
    c.variant = variant;
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
