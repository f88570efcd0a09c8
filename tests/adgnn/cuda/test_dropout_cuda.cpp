// Row dropout on the GPU (ops/dropout.cpp, dropout_cuda.cu) against the CPU, bit for bit: masks,
// the flat kernel, row flags, the dropout that passes its input on; float, double and bfloat16
// (its products in float32, rounded once on both devices). Every test skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "cuda_test_util.h"

namespace {

using namespace adgnn::cuda_test;

// Widths: 37 (the scalar kernel; a partial second pass of a warp's lanes), 100 and 128 (float4 /
// double2 vectors: products-scale's features, the hidden width), and 128 starting one element
// past an aligned address (the scalar kernel again), on both devices; 1001 rows, and 20011 (more
// rows than one pass of the kernel's grid, at most 8 blocks per SM, covers: groups stride).
struct DropoutInput {
  at::Tensor cpu, gpu;
};
std::vector<DropoutInput> dropout_inputs(torch::ScalarType dtype) {
  std::vector<DropoutInput> in;
  for (int64_t cols : {37, 100, 128}) {
    const at::Tensor x = torch::randn({1001, cols}, torch::dtype(dtype));
    in.push_back({x, x.cuda()});
  }
  const at::Tensor x = torch::randn({1001, 128}, torch::dtype(dtype));
  const auto misaligned = [&](torch::Device d) {
    return torch::empty({x.numel() + 1}, x.options().device(d)).narrow(0, 1, x.numel()).view(x.sizes()).copy_(x);
  };
  in.push_back({misaligned(torch::kCPU), misaligned(torch::kCUDA)});
  const at::Tensor tall = torch::randn({20011, 128}, torch::dtype(dtype));
  in.push_back({tall, tall.cuda()});
  return in;
}

TEST(Cuda, DropoutMasksEqualTheCpuOnes) {
  REQUIRE_GPU();
  const at::Tensor h = torch::ones({1001, 37});
  const at::Tensor ids1001 = torch::arange(5000, 6001, torch::kInt64);
  EXPECT_TRUE(torch::equal(adgnn::dropout_rows(h, ids1001, 0.3, 11, 7, 2),
                           adgnn::dropout_rows(h.cuda(), ids1001.cuda(), 0.3, 11, 7, 2).cpu()));
  // Values and gradients: the same mask applied in backward, float and double, ids on the host.
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16})
    for (const DropoutInput& in : dropout_inputs(dtype)) {
      const at::Tensor& x = in.cpu;
      const at::Tensor ids = torch::arange(5000, 5000 + x.size(0), torch::kInt64);
      const at::Tensor probe = torch::randn(x.sizes(), torch::dtype(dtype));
      at::Tensor xc = in.cpu.detach().requires_grad_(true), xg = in.gpu.detach().requires_grad_(true);
      const at::Tensor oc = adgnn::dropout_rows(xc, ids, 0.3, 11, 7, 2);
      const at::Tensor og = adgnn::dropout_rows(xg, ids, 0.3, 11, 7, 2);
      (oc * probe).sum().backward();
      (og * probe.cuda()).sum().backward();
      EXPECT_TRUE(torch::equal(oc.detach(), og.detach().cpu())) << dtype << " width " << x.size(1);
      EXPECT_TRUE(torch::equal(xc.grad(), xg.grad().cpu())) << dtype << " width " << x.size(1);
      EXPECT_GT((oc == 0).sum().item<int64_t>(), 0);
    }
}

// The flat dropout kernel (unflagged inputs of rows of >= 8 vectors) against the CPU, bit for bit
// (the same masks and scale): plain and accumulating (dropout_rows_and_input's backward without
// flags), float and double, rows of 8 vectors (the most rows a chunk spans), 25 (products-scale's
// 100 features), 32 and 65, with partial chunks at the end.
TEST(Cuda, FlatDropoutEqualsTheCpu) {
  REQUIRE_GPU();
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16})
    for (int64_t cols : {32, 100, 128, 260})
      for (int64_t rows : {int64_t(1), int64_t(37), int64_t(4099)}) {
        SCOPED_TRACE(::testing::Message() << dtype << " " << rows << " x " << cols);
        const at::Tensor x = torch::randn({rows, cols}, torch::dtype(dtype).device(torch::kCUDA));
        const at::Tensor ids = torch::randperm(3 * rows, torch::kInt64).slice(0, 0, rows).cuda();
        const at::Tensor p1 = torch::randn_like(x), p2 = torch::randn_like(x);
        at::Tensor out[2], grad[2];
        for (int dev = 0; dev < 2; ++dev) {
          auto on = [&](const at::Tensor& t) { return dev ? t : t.cpu(); };
          at::Tensor h = on(x).detach().requires_grad_(true);
          auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, on(ids), 0.4, 5, 3, 1);
          ((dropped * on(p1)).sum() + (kept * on(p2)).sum()).backward();
          out[dev] = dropped.detach().cpu();
          grad[dev] = h.grad().cpu();
        }
        EXPECT_TRUE(torch::equal(out[0], out[1]));
        EXPECT_TRUE(torch::equal(grad[0], grad[1]));
        const double kept_share = (out[1] != 0).to(torch::kFloat64).mean().item<double>();
        if (rows * cols > 1000) {
          EXPECT_NEAR(kept_share, 0.6, 0.05);
        }
      }
}

// Row flags on the GPU: flagged rows and every gradient equal the CPU's (unflagged rows: the
// forward leaves them unset, the gradient is zero).
TEST(Cuda, DropoutRowFlagsEqualTheCpu) {
  REQUIRE_GPU();
  for (const DropoutInput& in : dropout_inputs(torch::kFloat32)) {
    const at::Tensor& x = in.cpu;
    const at::Tensor ids = torch::arange(100, 100 + x.size(0), torch::kInt64);
    const at::Tensor flags = (torch::arange(x.size(0)) % 7 < 2).to(torch::kUInt8);
    const at::Tensor flagged = flags.to(torch::kBool);
    const at::Tensor probe = torch::randn(x.sizes()) * flagged.unsqueeze(1);
    at::Tensor xc = in.cpu.detach().requires_grad_(true), xg = in.gpu.detach().requires_grad_(true);
    const at::Tensor oc = adgnn::dropout_rows(xc, ids, 0.3, 11, 7, 2, flags);
    const at::Tensor og = adgnn::dropout_rows(xg, ids.cuda(), 0.3, 11, 7, 2, flags.cuda());
    EXPECT_TRUE(torch::equal(oc.detach().index({flagged}), og.detach().cpu().index({flagged}))) << x.size(1);
    (oc.index({flagged}) * probe.index({flagged})).sum().backward();
    (og.index({flagged.cuda()}) * probe.cuda().index({flagged.cuda()})).sum().backward();
    EXPECT_TRUE(torch::equal(xc.grad(), xg.grad().cpu())) << x.size(1);
    EXPECT_EQ(xg.grad().cpu().index({~flagged}).abs().sum().item<float>(), 0.0f) << x.size(1);
  }
}

// The dropout that passes its input on (AD's frozen rows), on the GPU: the gradient, added into
// the input's own in place over the flagged rows, equals the CPU's bit for bit; dense and sparse
// flags (most warps with no flagged row), float and double.
TEST(Cuda, DropoutAndInputEqualsTheCpu) {
  REQUIRE_GPU();
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16})
    for (const DropoutInput& in : dropout_inputs(dtype))
      for (const int64_t every : {int64_t(7), int64_t(97)}) {
        const at::Tensor& x = in.cpu;
        const at::Tensor ids = torch::arange(100, 100 + x.size(0), torch::kInt64);
        const at::Tensor flags = (torch::arange(x.size(0)) % every < 2).to(torch::kUInt8);
        const at::Tensor flagged = flags.to(torch::kBool).unsqueeze(1);
        const at::Tensor p1 = torch::randn(x.sizes(), torch::dtype(dtype)), p2 = torch::randn(x.sizes(), torch::dtype(dtype));
        at::Tensor grad[2];
        for (int dev = 0; dev < 2; ++dev) {
          auto on = [&](const at::Tensor& t) { return dev ? t.cuda() : t; };
          at::Tensor h = (dev ? in.gpu : in.cpu).detach().requires_grad_(true);
          auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, on(ids), 0.3, 11, 7, 2, on(flags));
          (torch::where(on(flagged), dropped * on(p1), 0).sum() + (kept * on(p2)).sum()).backward();
          grad[dev] = h.grad().cpu();
        }
        EXPECT_TRUE(torch::equal(grad[0], grad[1])) << dtype << " width " << x.size(1) << " every " << every;
        EXPECT_TRUE(torch::equal(grad[1].index({~flagged.squeeze(1)}), p2.index({~flagged.squeeze(1)})));
      }
}

// On the GPU too (its own probe of the engine's hand-over: backward runs on a device thread), a
// gradient that AddBackward hands to two inputs is copied, not changed in place.
TEST(Cuda, DropoutAndInputLeavesASharedGradientAlone) {
  REQUIRE_GPU();
  const at::Tensor ids = torch::arange(3, 43, torch::kInt64).cuda();
  const at::Tensor flags = (torch::arange(40) % 3 == 1).to(torch::kUInt8).cuda();
  const at::Tensor flagged = flags.to(torch::kBool).unsqueeze(1);
  const at::Tensor h = torch::rand({40, 8}).cuda().requires_grad_(true);
  const at::Tensor o = torch::zeros({40, 8}).cuda().requires_grad_(true);
  const at::Tensor other = o * 1, probe = torch::randn({40, 8}).cuda();  // (its backward runs last)
  auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, ids, 0.4, 8, 1, 2, flags);
  (torch::where(flagged, dropped, 0).sum() + ((kept + other) * probe).sum()).backward();
  EXPECT_TRUE(torch::equal(o.grad(), probe));
  const at::Tensor mask = adgnn::dropout_rows(torch::ones({40, 8}).cuda(), ids, 0.4, 8, 1, 2);
  EXPECT_TRUE(torch::allclose(h.grad(), probe + torch::where(flagged, mask, 0)));
}

}  // namespace
