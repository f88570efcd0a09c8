// The fused Adam update on the GPU (trainer/src/optimizer.cpp) against the CPU's. Skips without a
// GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <memory>
#include <vector>

#include "adgnn/trainer.h"
#include "cuda_test_util.h"

namespace {

using namespace adgnn::cuda_test;

// The fused CUDA update against the CPU one (torch::optim::Adam's operations, tests/trainer)
// over steps with a changing gradient, two weight-decay groups, a resumed step count, float32
// and float64: the same formula in another order of rounding. Relative 3e-5 in float32: the
// fused kernel takes 1 - beta2 as 1 - float(0.999) = 0.00099998713, 1.3e-5 below the CPU's
// float(0.001), in the second moment's increment (torch.optim.Adam(fused=True) does the same);
// 1e-12 in float64.
TEST(Cuda, FlatAdamEqualsTheCpuUpdate) {
  REQUIRE_GPU();
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    std::array<at::Tensor, 2> a, b;     // [0]: weight decay, [1]: none; per device
    std::array<std::vector<at::Tensor>, 2> params;
    std::array<std::unique_ptr<adgnn::FlatAdam>, 2> opt;
    for (int dev = 0; dev < 2; ++dev) {
      const auto o = torch::TensorOptions().dtype(dt).device(dev ? torch::kCUDA : torch::kCPU);
      a[dev] = torch::linspace(-1, 1, 300, o).view({30, 10}).requires_grad_(true);
      b[dev] = torch::linspace(0.5, 2, 7, o).requires_grad_(true);
      opt[dev] = std::make_unique<adgnn::FlatAdam>(
          std::vector<adgnn::FlatAdam::Group>{{{{"a", a[dev]}}, 5e-4}, {{{"b", b[dev]}}, 0.0}}, 0.01);
    }
    const double rtol = dt == torch::kFloat32 ? 3e-5 : 1e-12, tol = dt == torch::kFloat32 ? 1e-6 : 1e-12;
    for (int step = 1; step <= 8; ++step) {
      if (step == 5)
        for (auto& o : opt) o->set_steps(40);  // a resumed run's bias correction
      for (int dev = 0; dev < 2; ++dev) {
        opt[dev]->zero_grad();
        ((a[dev] * a[dev]).sin().sum() * (1 + 0.3 * step) + (b[dev] * double(step)).cos().sum()).backward();
        opt[dev]->step();
      }
      EXPECT_TRUE(torch::allclose(a[1].detach().cpu(), a[0].detach(), rtol, tol))
          << dt << " step " << step << ": " << (a[1].detach().cpu() - a[0].detach()).abs().max();
      EXPECT_TRUE(torch::allclose(b[1].detach().cpu(), b[0].detach(), rtol, tol)) << dt << " step " << step;
      for (size_t i = 0; i < 4; ++i) {
        const at::Tensor s0 = opt[0]->named_state()[i].second, s1 = opt[1]->named_state()[i].second.cpu();
        EXPECT_TRUE(torch::allclose(s1, s0, rtol, tol))
            << dt << " " << opt[0]->named_state()[i].first << " step " << step << ": " << (s1 - s0).abs().max();
      }
    }
    EXPECT_EQ(opt[1]->steps(), 44);
    // The update moved the parameters (not a test of two unchanged copies).
    EXPECT_GT((a[0].detach() - torch::linspace(-1, 1, 300, a[0].options()).view({30, 10})).abs().max().item<double>(),
              0.01);
  }
}

}  // namespace
