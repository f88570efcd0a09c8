// Dense layers on the GPU (ops/linear.cpp, dense_cuda.cu, small_gemm_cuda.cu): column sums,
// linear() and linear_relu() against ATen, the small-GEMM kernels against float64 and cuBLAS, and
// the last-block counters their grids leave at zero. Every test skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/kernels.h"
#include "ops/linear.h"

#ifdef ADGNN_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using namespace adgnn::cuda_test;

// Column sums (the bias gradients of linear layers): the row-parallel kernel's vectorised paths
// (one, two and four vectors per lane), its scalar ones (widths 47, 7) and ATen's for wider rows
// equal a float64 sum on the host (bfloat16 rows too: every path sums them in float32), with the
// same bits on a second call, also through a ReLU (masked); up to 8,192 rows the kernel's last
// block finishes the sum (8,000: a full grid of 64 blocks), above it ATen's sum does; linear()'s
// gradients equal addmm's, linear_relu()'s relu(addmm)'s.
TEST(Cuda, ColumnSumsAndLinearEqualATen) {
  REQUIRE_GPU();
  torch::manual_seed(2);
  for (const int64_t C : {int64_t(128), int64_t(256), int64_t(512), int64_t(40), int64_t(47), int64_t(7),
                          int64_t(2000)})
    for (const int64_t rows : {int64_t(0), int64_t(1), int64_t(37), int64_t(8000), int64_t(8193), int64_t(70001)})
      for (const auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16}) {
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(C) + " " + std::string(c10::toString(dtype)));
        const at::Tensor x = torch::randn({rows, C}, torch::dtype(dtype));
        const at::Tensor ref = x.to(torch::kFloat64).sum(0);
        const at::Tensor got = adgnn::detail::column_sums(x.cuda());
        ASSERT_EQ(got.sizes(), ref.sizes());
        const double tol = dtype == torch::kFloat64 ? 1e-10 : 2e-3;
        EXPECT_TRUE(torch::allclose(got.cpu().to(torch::kFloat64), ref, tol, tol)) << (got.cpu() - ref).abs().max();
        EXPECT_TRUE(torch::equal(adgnn::detail::column_sums(x.cuda()), got));
        // Through a ReLU: the masked gradient and its column sums in one pass.
        const at::Tensor out = torch::relu(torch::randn({rows, C}, torch::dtype(dtype)));
        const at::Tensor masked_ref = at::threshold_backward(x, out, 0);
        const auto [masked, msums] = adgnn::detail::relu_grad_column_sums(x.cuda(), out.cuda());
        EXPECT_TRUE(torch::equal(masked.cpu(), masked_ref));
        EXPECT_TRUE(torch::allclose(msums.cpu().to(torch::kFloat64), masked_ref.to(torch::kFloat64).sum(0), tol, tol));
      }
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    const auto o = torch::dtype(dtype).device(torch::kCUDA);
    const at::Tensor x0 = torch::randn({5003, 64}, o), w0 = torch::randn({64, 128}, o), b0 = torch::randn({128}, o);
    const at::Tensor probe = torch::randn({5003, 128}, o);
    std::vector<at::Tensor> grads[2];
    at::Tensor out[2];
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      out[ours] = ours ? adgnn::detail::linear(x, w, b) : torch::addmm(b, x, w);
      (out[ours] * probe).sum().backward();
      grads[ours] = {x.grad(), w.grad(), b.grad()};
    }
    const double tol = dtype == torch::kFloat64 ? 1e-10 : 1e-4;
    EXPECT_TRUE(torch::equal(out[0], out[1]));
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], tol, tol * 100)) << i << (grads[1][i] - grads[0][i]).abs().max();
    // linear_relu (cuBLASLt's ReLU epilogue; the fused masked column sums) against relu(addmm).
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      out[ours] = ours ? adgnn::detail::linear_relu(x, w, b) : torch::relu(torch::addmm(b, x, w));
      (out[ours] * probe).sum().backward();
      grads[ours] = {x.grad(), w.grad(), b.grad()};
    }
    EXPECT_TRUE(torch::allclose(out[1], out[0], tol, tol)) << (out[1] - out[0]).abs().max();
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], tol, tol * 100)) << "relu " << i << (grads[1][i] - grads[0][i]).abs().max();
  }
}

// A linear layer over a few rows runs our kernels instead of cuBLAS. Output and the three
// gradients (x's in the leading rows of a larger input, w's split over row chunks, b's) against
// float64 on the CPU, for widths that are not multiples of the tiles, one row, one chunk and
// many; the same bits on a second run; and cuBLAS's path (the limit at 0) within float32's error.
TEST(Cuda, SmallLinearEqualsTheCpu) {
  REQUIRE_GPU();
#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
  torch::manual_seed(21);
  struct Shape {
    int64_t m, k, n;
  };
  for (const auto dt : {torch::kFloat32, torch::kFloat64})
    for (const Shape sh : {Shape{1, 128, 128}, Shape{33, 128, 40}, Shape{700, 128, 128}, Shape{5000, 128, 128},
                           Shape{257, 7, 5}, Shape{300, 100, 70}, Shape{20000, 64, 64}})
      for (const bool relu : {false, true}) {
        SCOPED_TRACE(std::string(dt == torch::kFloat64 ? "float64" : "float32") + " m " + std::to_string(sh.m) +
                     " k " + std::to_string(sh.k) + " n " + std::to_string(sh.n) + (relu ? " relu" : ""));
        const int64_t extra = sh.m % 2;  // odd m: x has more rows than the product reads
        const at::Tensor x = torch::randn({sh.m + extra, sh.k}, torch::kFloat64);
        const at::Tensor w = torch::randn({sh.k, sh.n}, torch::kFloat64) / std::sqrt(double(sh.k));
        const at::Tensor b = torch::randn({sh.n}, torch::kFloat64);
        const at::Tensor probe = torch::randn({sh.m, sh.n}, torch::kFloat64);
        ASSERT_TRUE(adgnn::kernels::small_linear_applies(x.to(dt).cuda().narrow(0, 0, sh.m), w.to(dt).cuda()));
        auto run = [&](const c10::Device d, c10::ScalarType type) {
          auto leaf = [&](const at::Tensor& t) { return t.to(type).to(d).detach().clone().requires_grad_(true); };
          const at::Tensor xx = leaf(x), ww = leaf(w), bb = leaf(b);
          const at::Tensor out = relu ? adgnn::detail::linear_relu(xx, ww, bb, sh.m)
                                      : adgnn::detail::linear(xx, ww, bb, sh.m);
          (out * probe.to(type).to(d)).sum().backward();
          return std::vector<at::Tensor>{out.detach().cpu().to(torch::kFloat64), xx.grad().cpu().to(torch::kFloat64),
                                         ww.grad().cpu().to(torch::kFloat64), bb.grad().cpu().to(torch::kFloat64)};
        };
        const auto want = run(torch::kCPU, torch::kFloat64);
        const auto got = run(torch::kCUDA, dt), again = run(torch::kCUDA, dt);
        std::vector<at::Tensor> cublas;
        {
          const adgnn::cuda_test::ScopedSmallLinearMaxMacs cublas_only(0);
          cublas = run(torch::kCUDA, dt);
        }
        const char* what[] = {"output", "x's gradient", "w's gradient", "b's gradient"};
        for (size_t i = 0; i < want.size(); ++i) {
          SCOPED_TRACE(what[i]);
          // float32: sums of up to 20,000 terms, judged against the largest entry's scale.
          const double scale = std::max(1.0, want[i].abs().max().item<double>());
          const double tol = (dt == torch::kFloat64 ? 1e-12 : 2e-5) * scale;
          EXPECT_LE((got[i] - want[i]).abs().max().item<double>(), tol);
          EXPECT_LE((cublas[i] - want[i]).abs().max().item<double>(), tol);
          EXPECT_TRUE(torch::equal(got[i], again[i]));
        }
        if (extra) {
          EXPECT_EQ(got[1][sh.m].abs().sum().item<double>(), 0);  // rows the product did not read
        }
        if (relu) {
          EXPECT_GT((want[0] == 0).sum().item<int64_t>(), 0);
        }
      }
  // Beyond the limit: cuBLAS (the kernels' grid holds the rows anyway).
  EXPECT_FALSE(adgnn::kernels::small_linear_applies(torch::empty({169343, 128}).cuda(),
                                                    torch::empty({128, 128}).cuda()));
  // NaN stays NaN through the ReLU.
  const at::Tensor xn = torch::full({3, 4}, std::nan(""), torch::kFloat32).cuda();
  EXPECT_TRUE(adgnn::kernels::small_linear_cuda(xn, torch::ones({4, 2}).cuda(), torch::zeros({2}).cuda(), true)
                  .isnan()
                  .all()
                  .item<bool>());
#endif
}

#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
// The grids that finish their sums in their last block count the blocks in per-stream counters
// that the last block sets back to zero, instead of a memset before each launch: the same calls
// many times in a row, interleaved (column sums, band term, small GEMMs' weight gradients over
// several row chunks, one of them with more tiles than the first counter buffer holds), on the
// default stream and on another, give the same bits every time and leave every counter at zero;
// the first results equal float64.
TEST(Cuda, LastBlockCountersResetThemselves) {
  REQUIRE_GPU();
  torch::manual_seed(5);
  const auto o = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  const at::Tensor x = torch::randn({37, 128}, o);  // few rows: the last block finishes the sum
  const at::Tensor a = torch::randn({3000, 64}, o), g = torch::randn({3000, 128}, o);  // 12 chunks
  const at::Tensor a2 = torch::randn({600, 640}, o), g2 = torch::randn({600, 512}, o);  // 80 tiles
  const at::Tensor eps = torch::randn({500}, o), tau = torch::zeros({}, o);
  const at::Tensor band = torch::arange(0, 500, 3, o.dtype(torch::kInt64)), grad = torch::randn({500, 16}, o);
  const at::Tensor diff = torch::randn({band.numel(), 16}, o);
  auto run = [&] {
    return std::array<at::Tensor, 4>{
        adgnn::kernels::column_sums_cuda(x), adgnn::kernels::small_linear_grad_w_cuda(a, g),
        adgnn::kernels::band_term_grads_cuda(eps, tau, band, grad, diff, 0.5, true, false).tau,
        adgnn::kernels::small_linear_grad_w_cuda(a2, g2)};
  };
  const std::array<at::Tensor, 4> first = run();
  EXPECT_EQ(adgnn::kernels::nonzero_stream_counters(), 0);
  auto f64 = [](const at::Tensor& t) { return t.cpu().to(torch::kFloat64); };
  EXPECT_TRUE(torch::allclose(f64(first[0]), f64(x).sum(0), 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(f64(first[1]), f64(a).t().mm(f64(g)), 1e-3, 1e-3));
  EXPECT_TRUE(torch::allclose(f64(first[3]), f64(a2).t().mm(f64(g2)), 1e-3, 1e-3));
  for (int stream = 0; stream < 3; ++stream) {
    // default, a pool stream, the default again
    const c10::cuda::CUDAStream s =
        stream == 1 ? c10::cuda::getStreamFromPool() : c10::cuda::getDefaultCUDAStream();
    c10::cuda::CUDAStreamGuard guard(s);
    for (int rep = 0; rep < 5; ++rep) {
      const std::array<at::Tensor, 4> again = run();
      for (size_t k = 0; k < again.size(); ++k)
        EXPECT_TRUE(torch::equal(again[k], first[k])) << "stream " << stream << ", call " << rep << ", kernel " << k;
    }
    EXPECT_EQ(adgnn::kernels::nonzero_stream_counters(), 0) << "stream " << stream;
  }
}
#endif

}  // namespace
