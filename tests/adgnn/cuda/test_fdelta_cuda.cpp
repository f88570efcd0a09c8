// f_delta on the GPU (depth/fdelta.cpp, fdelta_cuda.cu) against the CPU: the pair kernels in
// float32 and float64, TF32 and bfloat16 within their tolerances, hub nodes, and the bfloat16
// storage kernels against their definitions. Every test skips without a GPU.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "depth/fdelta.h"
#include "ops/kernels.h"

namespace {

using namespace adgnn::cuda_test;

using adgnn::detail::FDeltaPrecision;

// f_delta's logits at every entry of (rowptr, col) and the gradients of z, w1, b1, w2 and b2 (on
// the host) under a fixed probe, on `dev` in `precision`.
struct FDeltaCase {
  at::Tensor rowptr, col, z, w1, b1, w2, b2, probe;
  at::Tensor run(const c10::Device& dev, FDeltaPrecision precision, std::vector<at::Tensor>& grads) const {
    std::vector<at::Tensor> in;
    for (const at::Tensor* v : {&z, &w1, &b1, &w2, &b2}) in.push_back(v->to(dev).clone().requires_grad_(true));
    const at::Tensor logit = adgnn::detail::fdelta_entry_logits(rowptr.to(dev), col.to(dev), in[0], in[1], in[2],
                                                                in[3], in[4], precision);
    (logit * probe.to(dev)).sum().backward();
    grads.clear();
    for (const at::Tensor& v : in) grads.push_back(v.grad().cpu());
    return logit.cpu();
  }
};
FDeltaCase fdelta_case(const at::Tensor& rowptr, const at::Tensor& col, int64_t nodes, int64_t H, bool dbl) {
  const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
  torch::manual_seed(H);
  FDeltaCase c;
  c.rowptr = rowptr;
  c.col = col;
  c.z = torch::randn({nodes, H}, dtype);
  // The MLP 2H -> H -> 1 as the model's: the hidden-gradient kernel's vectorised paths (one and
  // two vectors per lane at width 128) and its scalar one (width 7).
  c.w1 = torch::randn({2 * H, H}, dtype) / std::sqrt(double(2 * H));
  c.b1 = torch::randn({H}, dtype);
  c.w2 = torch::randn({H, 1}, dtype) / 4;
  c.b2 = torch::randn({1}, dtype);
  c.probe = torch::randn({col.numel()}, dtype);
  return c;
}

// The GPU against the CPU in fp32 / float64 (tolerance tol), deterministic (the same bits
// twice); then, for float32 at width 128, TF32 and bfloat16 within their tolerances of float32
// yet not equal to it (they did run in that precision), the precision setting left as it was.
void expect_fdelta_gpu_equals_cpu(const FDeltaCase& c, bool dbl, bool low_precision) {
  const auto d = c10::Device("cuda");
  std::vector<at::Tensor> g_cpu, g_gpu;
  const at::Tensor cpu = c.run(c10::Device("cpu"), FDeltaPrecision::kFp32, g_cpu);
  const at::Tensor gpu = c.run(d, FDeltaPrecision::kFp32, g_gpu);
  const double tol = dbl ? 1e-10 : 1e-4;
  EXPECT_TRUE(torch::allclose(gpu, cpu, tol, tol));
  for (size_t i = 0; i < g_cpu.size(); ++i) {
    const double scale = std::max(1.0, g_cpu[i].abs().max().item<double>());
    EXPECT_TRUE(torch::allclose(g_gpu[i], g_cpu[i], tol, tol * scale))
        << "gradient " << i << " (z, w1, b1, w2, b2): " << (g_gpu[i] - g_cpu[i]).abs().max();
  }
  std::vector<at::Tensor> g_again;
  EXPECT_TRUE(torch::equal(c.run(d, FDeltaPrecision::kFp32, g_again), gpu));
  for (size_t i = 0; i < g_gpu.size(); ++i) EXPECT_TRUE(torch::equal(g_again[i], g_gpu[i])) << i;
  if (!low_precision) return;
  const auto before = at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL);
  std::vector<at::Tensor> g_tf;
  const at::Tensor tf = c.run(d, FDeltaPrecision::kTf32, g_tf);
  EXPECT_EQ(at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL), before);
  EXPECT_FALSE(torch::equal(tf, gpu));
  EXPECT_TRUE(torch::allclose(tf, gpu, 2e-2, 2e-2)) << (tf - gpu).abs().max();
  EXPECT_TRUE(torch::allclose(g_tf[1], g_gpu[1], 2e-2, 2e-2 * g_gpu[1].abs().max().item<double>()))
      << (g_tf[1] - g_gpu[1]).abs().max();
  // bfloat16 (8 significant bits) per pair: logits within 2% of float32's largest; float32 out;
  // deterministic. The gradients only within 15% of each one's largest entry (measured: 3-4%, on
  // an H200): rounding the hidden layer flips the relu of its entries near zero, and a random
  // probe's gradient sums over thousands of pairs cancel to a fraction of their terms, so those
  // flips weigh more than the rounding. A wrong index or operand misses by ~100%; the kernels'
  // bfloat16 arithmetic is checked exactly by Cuda.FDeltaBf16KernelsEqualTheirDefinitions.
  std::vector<at::Tensor> g_bf, g_bf_again;
  const at::Tensor bf = c.run(d, FDeltaPrecision::kBf16, g_bf);
  EXPECT_EQ(bf.scalar_type(), torch::kFloat32);
  EXPECT_EQ(at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL), before);
  EXPECT_FALSE(torch::equal(bf, gpu));
  EXPECT_TRUE(close_to_scale(bf, gpu, 2e-2));
  for (size_t i = 0; i < g_bf.size(); ++i) {
    EXPECT_EQ(g_bf[i].scalar_type(), torch::kFloat32);
    EXPECT_TRUE(close_to_scale(g_bf[i], g_gpu[i], 0.15)) << "bf16 gradient " << i << " (z, w1, b1, w2, b2)";
  }
  EXPECT_TRUE(torch::equal(c.run(d, FDeltaPrecision::kBf16, g_bf_again), bf));
  for (size_t i = 0; i < g_bf.size(); ++i) EXPECT_TRUE(torch::equal(g_bf_again[i], g_bf[i])) << i;
}

// f_delta per mirrored pair on the GPU: the pair kernels (width 128: vectorised; 7: scalar;
// float32 and float64) equal the CPU's, logits and the gradients of z and the four parameters (the
// fused output layer, hidden-gradient and per-node input-gradient kernels), with the same bits
// twice; TF32 and bfloat16 stay close to float32.
TEST(Cuda, FDeltaEqualsTheCpuAndLowPrecisionStaysClose) {
  REQUIRE_GPU();
  const auto g = graph(3000, 4);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  for (const int64_t H : {int64_t(128), int64_t(7)}) {
    for (const bool dbl : {false, true}) {
      SCOPED_TRACE("width " + std::to_string(H) + (dbl ? " float64" : " float32"));
      expect_fdelta_gpu_equals_cpu(fdelta_case(t.rowptr, t.col, g.num_nodes, H, dbl), dbl, !dbl && H == 128);
    }
  }
}

// The same where nodes have kPairHubMin or more pairs (the input gradient's block-per-node path):
// a directed CSR (most entries their own pair) whose row 0 has 5000 entries, rows 1 and 2 about
// kPairHubMin (around the threshold once their transposed pairs are counted), and whose column 7
// is read by 5000 rows (its pairs through the transpose).
TEST(Cuda, FDeltaHubsEqualTheCpu) {
  REQUIRE_GPU();
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, adgnn::kernels::kPairHubMin, adgnn::kernels::kPairHubMin - 2}, 5, 5000, 4);
  const at::Tensor &rowptr = h.rowptr, &col = h.col;
  for (const int64_t H : {int64_t(128), int64_t(7)}) {
    for (const bool dbl : {false, true}) {
      SCOPED_TRACE("width " + std::to_string(H) + (dbl ? " float64" : " float32"));
      expect_fdelta_gpu_equals_cpu(fdelta_case(rowptr, col, n, H, dbl), dbl, false);
    }
  }
}

// The bfloat16 storage kernels against their definitions, on a CSR with two hubs (row 0's 3000
// entries, column 7 read by 3000 rows; every entry a pair; both per-node gradient paths): the
// input is float32's rounded to bfloat16 (the same bits), the output layer and the hidden
// gradient's sums equal float64's over the stored values (1e-5), the hidden gradient is
// float32's g w2 rounded (the same bits), and z's gradient from a bfloat16 input gradient equals
// the CPU's in float64 over its values.
TEST(Cuda, FDeltaBf16KernelsEqualTheirDefinitions) {
  REQUIRE_GPU();
#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {3000, 5, 4}, 5, 3000, 5);
  const auto d = c10::Device("cuda");
  const at::Tensor &rowptr = h.rowptr, &col = h.col;
  const at::Tensor row = torch::repeat_interleave(rowptr.slice(0, 1) - rowptr.slice(0, 0, -1)).to(torch::kInt32);
  const int64_t P = col.numel();
  adgnn::kernels::PairGradIndex ix;
  ix.rowptr = rowptr;
  ix.col = col;
  const adgnn::kernels::Transposed t = adgnn::kernels::transpose_entries(rowptr, col, n);
  ix.t_rowptr = t.rowptr;
  ix.t_pair = t.entry;
  ix.t_other = t.row;
  adgnn::kernels::PairGradIndex ixd{ix.rowptr.to(d), ix.col.to(d), ix.t_rowptr.to(d), ix.t_pair.to(d), ix.t_other.to(d), {}};
  const at::Tensor per_node = (t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1)) + (rowptr.slice(0, 1) - rowptr.slice(0, 0, -1));
  ixd.long_nodes = (per_node >= adgnn::kernels::kPairHubMin).nonzero().squeeze(1).to(d);
  ASSERT_GE(ixd.long_nodes.numel(), 2);  // rows 0 and 7 (and any other that reaches kPairHubMin)
  for (const int64_t H : {int64_t(128), int64_t(7)}) {
    SCOPED_TRACE("width " + std::to_string(H));
    const at::Tensor z = torch::randn({n, H}).to(d);
    const at::Tensor x = adgnn::kernels::pair_features_cuda(row.to(d), col.to(d), z, torch::kBFloat16);
    ASSERT_EQ(x.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(x, adgnn::kernels::pair_features_cuda(row.to(d), col.to(d), z, torch::kFloat32)
                                    .to(torch::kBFloat16)));
    const at::Tensor hidden = torch::randn({P, H}).to(d).to(torch::kBFloat16);
    const at::Tensor w2 = torch::randn({H}).to(d), b2 = torch::randn({1}).to(d), g = torch::randn({P}).to(d);
    const at::Tensor h64 = hidden.to(torch::kFloat64), relu64 = h64.clamp_min(0);
    const at::Tensor logit = adgnn::kernels::fdelta_relu_dot_cuda(hidden, w2, b2);
    EXPECT_EQ(logit.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::allclose(logit.to(torch::kFloat64), relu64.mv(w2.to(torch::kFloat64)) + b2.to(torch::kFloat64),
                                1e-5, 1e-5));
    // Rows are taken R at a time: a count that is not a multiple, each row's sum unchanged;
    // and more rows than one pass of the grid covers (the loop's later iterations).
    for (const int64_t cut : {1, 2, 3, 5})
      EXPECT_TRUE(torch::equal(adgnn::kernels::fdelta_relu_dot_cuda(hidden.narrow(0, 0, P - cut).contiguous(), w2, b2),
                               logit.narrow(0, 0, P - cut)));
    const at::Tensor many = torch::randn({300001, H}).to(d).to(torch::kBFloat16);
    EXPECT_TRUE(torch::allclose(adgnn::kernels::fdelta_relu_dot_cuda(many, w2, b2).to(torch::kFloat64),
                                many.to(torch::kFloat64).clamp_min(0).mv(w2.to(torch::kFloat64)) + b2.to(torch::kFloat64),
                                1e-5, 1e-5));
    const adgnn::kernels::FDeltaHiddenGrad hg = adgnn::kernels::fdelta_hidden_grad_cuda(g, w2, hidden);
    ASSERT_EQ(hg.out.scalar_type(), torch::kBFloat16);
    const at::Tensor out32 = (g.unsqueeze(1) * w2.unsqueeze(0)) * (hidden.to(torch::kFloat32) > 0);
    EXPECT_TRUE(torch::equal(hg.out, out32.to(torch::kBFloat16)));
    EXPECT_TRUE(torch::allclose(hg.b1.to(torch::kFloat64), out32.to(torch::kFloat64).sum(0), 1e-5, 1e-4));
    EXPECT_TRUE(torch::allclose(hg.w2.to(torch::kFloat64), relu64.t().mv(g.to(torch::kFloat64)), 1e-5, 1e-4));
    const at::Tensor gx = torch::randn({P, 2 * H}).to(d).to(torch::kBFloat16);
    const at::Tensor gz = adgnn::kernels::pair_grad_sums_cuda(ixd, z, gx);
    ASSERT_EQ(gz.scalar_type(), torch::kFloat32);
    const at::Tensor ref = adgnn::kernels::pair_grad_sums_cpu(ix, z.cpu().to(torch::kFloat64), gx.cpu().to(torch::kFloat64));
    EXPECT_TRUE(close_to_scale(gz.cpu(), ref, 1e-5));
  }
#endif
}

}  // namespace
