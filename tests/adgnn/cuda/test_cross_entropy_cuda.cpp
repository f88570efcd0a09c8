// The training loss's cross-entropy kernels on the GPU (ops/cross_entropy.cpp, dense_cuda.cu)
// against the CPU's ATen formula. Skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "cuda_test_util.h"

namespace {

using namespace adgnn::cuda_test;

// The GPU's cross-entropy kernels against the CPU's ATen formula (loss and gradient), in
// float64 and float32, with a repeated row (its gradient adds up) and wide rows (C > 32), scaled
// (the mean's 1 / count applied per row in the kernels).
TEST(Cuda, CrossEntropySumEqualsTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(11);
  for (const auto dt : {torch::kFloat64, torch::kFloat32}) {
    for (const int64_t C : {int64_t(6), int64_t(40), int64_t(47)}) {
      SCOPED_TRACE(std::string(dt == torch::kFloat64 ? "float64" : "float32") + ", C " + std::to_string(C));
      const at::Tensor z = (torch::randn({500, C}, torch::kFloat64) * 4).to(dt);
      const at::Tensor rows = torch::cat({torch::randperm(500, torch::kInt64).slice(0, 0, 300),
                                          torch::tensor({7, 7}, torch::kInt64)});
      const at::Tensor labels = torch::randint(0, C, {rows.numel()}, torch::kInt64);
      at::Tensor loss[2], grad[2];
      for (int dev = 0; dev < 2; ++dev) {
        auto on = [&](const at::Tensor& t) { return dev ? t.cuda() : t; };
        const at::Tensor zz = on(z).detach().requires_grad_(true);
        const at::Tensor l = adgnn::cross_entropy_sum(zz, on(rows), on(labels), C == 40 ? 1.0 : 1.0 / 302);
        (l * 0.37).backward();
        loss[dev] = l.detach().cpu();
        grad[dev] = zz.grad().cpu();
      }
      const double tol = dt == torch::kFloat64 ? 1e-12 : 2e-5;
      EXPECT_NEAR(loss[1].item<double>(), loss[0].item<double>(), tol * std::abs(loss[0].item<double>()));
      EXPECT_TRUE(torch::allclose(grad[1], grad[0], tol, tol)) << (grad[1] - grad[0]).abs().max();
      EXPECT_GT(grad[0].abs().sum().item<double>(), 0);
    }
  }
  // A label outside [0, C) gives a NaN loss, not a read of another row's value.
  const at::Tensor z = torch::randn({10, 4}).cuda();
  const at::Tensor l = adgnn::cross_entropy_sum(z, torch::tensor({1, 2}, torch::kInt64).cuda(),
                                                torch::tensor({0, 9}, torch::kInt64).cuda());
  EXPECT_TRUE(std::isnan(l.item<double>()));
}

}  // namespace
