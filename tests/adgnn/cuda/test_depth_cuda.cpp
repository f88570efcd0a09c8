// The depth machinery on the GPU against the CPU: row masks and their positions, tau's thresholds
// (depth/depth_masks.cpp, depth_masks_cuda.cu), the learned depth benefit (depth/depth_benefit.cpp,
// depth_benefit_cuda.cu), merge_rows and band_diff (ops/merge_rows_cuda.cu) and the gradients of
// the straight-through band term (depth/surrogate.cpp). Every test skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "depth/depth_benefit.h"
#include "depth/fdelta.h"
#include "depth/surrogate.h"

namespace {

using namespace adgnn::cuda_test;

// A pass's row masks on the GPU (one kernel) against their CPU form: depth, every mask row and
// every count equal, for each band mode, with layer 1's band off, from eps and tau (float32 and
// float64; eps values exactly on a threshold and a NaN included) and from a given depth.
TEST(Cuda, DepthMasksEqualTheCpu) {
  REQUIRE_GPU();
  using Band = adgnn::detail::DepthMaskSpec::Band;
  const auto g = graph(3000, 4);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const int64_t n = t.rowptr.numel() - 1;
  torch::manual_seed(9);
  for (const int64_t L : {4, 8}) {
    const at::Tensor tau64 = torch::cat({torch::zeros({1}, torch::kFloat64),
                                         std::get<0>(torch::rand({L - 1}, torch::kFloat64).sort())});
    at::Tensor eps64 = torch::rand({n}, torch::kFloat64);
    eps64.narrow(0, 0, L).copy_(tau64);  // on the thresholds
    eps64[L] = std::nan("");
    const at::Tensor depth_given = torch::randint(0, L + 1, {n}, torch::kInt64);
    for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
      for (const Band band : {Band::None, Band::Width, Band::All}) {
        for (const bool no_band1 : {false, true}) {
          for (const bool given : {false, true}) {
            if (given && band == Band::Width) continue;
            adgnn::detail::DepthMaskSpec spec;
            spec.layers = L;
            spec.band = band;
            spec.band_width = 0.15;
            spec.no_band_at_layer1 = no_band1;
            spec.frozen_layers = L == 4 ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 3, 8};
            SCOPED_TRACE("L " + std::to_string(L) + (dt == torch::kFloat64 ? " double" : " float") + " band " +
                         std::to_string(int(band)) + (no_band1 ? " no band at 1" : "") + (given ? " given depth" : ""));
            adgnn::detail::DepthMasks out[2];
            for (int dev = 0; dev < 2; ++dev) {
              auto on = [&](const at::Tensor& x) { return dev ? x.cuda() : x; };
              out[dev] = given ? adgnn::detail::depth_masks({}, {}, on(depth_given), on(t.rowptr), spec)
                               : adgnn::detail::depth_masks(on(eps64.to(dt)), on(tau64.to(dt)), {}, on(t.rowptr), spec);
            }
            EXPECT_TRUE(torch::equal(out[1].depth.cpu(), out[0].depth));
            EXPECT_TRUE(torch::equal(out[1].stacked.cpu(), out[0].stacked));
            EXPECT_TRUE(torch::equal(out[1].counts.cpu(), out[0].counts)) << out[1].counts.cpu() << out[0].counts;
            EXPECT_TRUE(torch::equal(out[1].comp_pos.cpu(), out[0].comp_pos));
            const int64_t listed = out[0].counts.narrow(0, 0, out[0].stacked.size(0)).sum().item<int64_t>();
            EXPECT_TRUE(torch::equal(adgnn::detail::mask_rows(out[1], listed).cpu(),
                                     adgnn::detail::mask_rows(out[0], listed)));
            ASSERT_EQ(out[0].stacked.size(0), 3 * L + int64_t(spec.frozen_layers.size()));
            EXPECT_GT(out[0].counts.narrow(0, 0, L).sum().item<int64_t>(), 0);
          }
        }
      }
    }
  }
}

// The positions and the masks' row lists over more than 1,024 tiles of 1,024 rows (the
// tile-offset kernel's threads then take several tiles each), a row count not a multiple of the
// tile, masks from every row set to almost none.
TEST(Cuda, DepthMaskPositionsOverManyTilesEqualTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(4);
  const int64_t n = 1024 * 1100 + 77, L = 4;
  const at::Tensor rowptr = torch::zeros({n + 1}, torch::kInt64);
  const at::Tensor tau = torch::tensor(std::vector<float>{0.f, 0.001f, 0.5f, 0.9999f});
  const at::Tensor eps = torch::rand({n});
  adgnn::detail::DepthMaskSpec spec;
  spec.layers = L;
  const auto cpu = adgnn::detail::depth_masks(eps, tau, {}, rowptr, spec);
  const auto gpu = adgnn::detail::depth_masks(eps.cuda(), tau.cuda(), {}, rowptr.cuda(), spec);
  EXPECT_TRUE(torch::equal(gpu.comp_pos.cpu(), cpu.comp_pos));
  EXPECT_EQ(cpu.comp_pos.select(0, 0).max().item<int64_t>(), n - 1);
  const int64_t listed = cpu.counts.narrow(0, 0, cpu.stacked.size(0)).sum().item<int64_t>();
  EXPECT_TRUE(torch::equal(adgnn::detail::mask_rows(gpu, listed).cpu(), adgnn::detail::mask_rows(cpu, listed)));
}

// tau(t) on the GPU (one autograd node, one kernel each way) against the CPU's operations:
// values and a's gradient from some layers' gradients (the others absent), float32 and float64,
// a beyond softplus' threshold, 2 to 8 layers.
TEST(Cuda, TauThresholdsEqualTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(5);
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    for (const int64_t L : {2, 4, 8}) {
      at::Tensor a0 = torch::randn({L - 1}, torch::kFloat64) * 3;
      a0[0] = 23.0;
      const at::Tensor w = torch::randn({L}, torch::kFloat64);
      at::Tensor grad[2], all[2];
      for (int dev = 0; dev < 2; ++dev) {
        const at::Tensor a = (dev ? a0.cuda() : a0).to(dt).clone().requires_grad_(true);  // a leaf per run
        const adgnn::detail::Thresholds th = adgnn::detail::tau_thresholds(a, L, 0.25);
        at::Tensor loss = torch::zeros({}, a.options());
        for (int64_t t = 1; t < L; t += 2) loss = loss + w[t].item<double>() * th.layers[size_t(t)];
        loss.backward();
        grad[dev] = a.grad().cpu().to(torch::kFloat64);
        all[dev] = th.all.cpu().to(torch::kFloat64);
        EXPECT_TRUE(torch::equal(torch::stack(th.layers).detach().cpu(), th.all.cpu()));
      }
      const double tol = dt == torch::kFloat32 ? 1e-6 : 1e-14;
      SCOPED_TRACE("L " + std::to_string(L) + (dt == torch::kFloat32 ? " float" : " double"));
      EXPECT_TRUE(torch::allclose(all[1], all[0], tol, tol)) << all[1] << all[0];
      EXPECT_TRUE(torch::allclose(grad[1], grad[0], tol, tol)) << grad[1] << grad[0];
    }
  }
}

// The learned depth benefit's kernels (depth_benefit.h) against the CPU's operations, float32 and
// float64: d+ from pair logits over a power-law graph's CSR (hub rows of hundreds of entries; a
// pair's two entries in different rows) and L_reg's sum, values and the logits' gradient; then,
// from the same d+, the range and eps_tilde under both normalisations, with and without AD#'s
// offset, with rows at alpha = 0, values and d+'s gradient; the same bits on a second run; every
// row equal; no rows.
TEST(Cuda, DepthBenefitKernelsEqualTheCpu) {
  REQUIRE_GPU();
  namespace d = adgnn::detail;
  const auto g = graph(3000, 9);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  torch::manual_seed(17);
  const int64_t n = g.num_nodes, H = 4;
  const at::Tensor entry_pair =
      d::fdelta_pair_logits(t.rowptr, t.col, torch::randn({n, H}), torch::randn({2 * H, H}), torch::randn({H}),
                            torch::randn({H, 1}), torch::randn({1}), d::FDeltaPrecision::kFp32)
          .entry_pair;
  const int64_t P = entry_pair.max().item<int64_t>() + 1, E = entry_pair.numel();
  ASSERT_LT(P, E);  // pairs shared by two entries
  const at::Tensor rows = torch::repeat_interleave(t.rowptr.diff());
  const at::Tensor degree = t.rowptr.diff().to(torch::kFloat64);
  ASSERT_GT(degree.max().item<double>(), 100);
  const at::Tensor sel_pair = entry_pair.index_select(0, torch::randperm(E).slice(0, 0, E / 3));
  const at::Tensor target0 = (torch::rand({sel_pair.numel()}) < 0.5).to(torch::kFloat64);
  const double t_max = 4;
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    SCOPED_TRACE(dt == torch::kFloat32 ? "float32" : "float64");
    const double tol = dt == torch::kFloat32 ? 1e-5 : 1e-12;
    const at::Tensor logit0 = (torch::randn({P}, torch::kFloat64) * 2).to(dt);
    const at::Tensor probe = torch::randn({n}, torch::kFloat64).to(dt);
    const at::Tensor target = target0.to(dt);
    // d+ and L_reg's sum: the GPU twice, then the CPU.
    at::Tensor dp_out[3], bce_out[3], grad_out[3];
    for (int run = 0; run < 3; ++run) {
      const auto dev = run < 2 ? c10::Device("cuda") : c10::Device("cpu");
      const at::Tensor logit = logit0.to(dev).clone().requires_grad_(true);
      const at::Tensor dp = d::sigmoid_row_sums(t.rowptr.to(dev), rows.to(dev), entry_pair.to(dev), logit);
      const at::Tensor bce = d::pair_bce_sum(logit, sel_pair.to(dev), target.to(dev));
      ((dp * probe.to(dev)).sum() + 0.1 * bce).backward();
      dp_out[run] = dp.detach().cpu();
      bce_out[run] = bce.detach().cpu();
      grad_out[run] = logit.grad().cpu();
    }
    EXPECT_TRUE(torch::equal(dp_out[0], dp_out[1]) && torch::equal(bce_out[0], bce_out[1]) &&
                torch::equal(grad_out[0], grad_out[1]));
    EXPECT_TRUE(torch::allclose(dp_out[0], dp_out[2], tol, tol)) << (dp_out[0] - dp_out[2]).abs().max();
    EXPECT_NEAR(bce_out[0].item<double>(), bce_out[2].item<double>(), tol * std::abs(bce_out[2].item<double>()));
    EXPECT_TRUE(close_to_scale(grad_out[0], grad_out[2], tol));
    // eps_tilde from the CPU's d+ (a tenth of the rows at alpha = 0 exactly: d+ = (d - 1) / 2).
    at::Tensor dp0 = dp_out[2].to(torch::kFloat64);
    const at::Tensor at_zero = torch::rand({n}) < 0.1;
    dp0 = torch::where(at_zero, (degree - 1) / 2, dp0).to(dt);
    const at::Tensor deg = degree.to(dt), offset0 = (torch::randn({n}, torch::kFloat64) * 0.3).to(dt);
    for (const bool with_offset : {false, true}) {
      for (const bool log_norm : {false, true}) {
        SCOPED_TRACE(std::string(with_offset ? "offset, " : "") + (log_norm ? "log" : "linear"));
        at::Tensor range_out[3], eps_out[3], g_out[3];
        for (int run = 0; run < 3; ++run) {
          const auto dev = run < 2 ? c10::Device("cuda") : c10::Device("cpu");
          const at::Tensor dp = dp0.to(dev).clone().requires_grad_(true);
          const at::Tensor offset = with_offset ? offset0.to(dev) : at::Tensor();
          const at::Tensor range = d::depth_benefit_range(dp.detach(), deg.to(dev), offset, t_max);
          const at::Tensor eps = d::normalised_depth_benefit(dp, deg.to(dev), offset, range, t_max, log_norm);
          (eps * probe.to(dev)).sum().backward();
          range_out[run] = range.cpu();
          eps_out[run] = eps.detach().cpu();
          g_out[run] = dp.grad().cpu();
        }
        EXPECT_TRUE(torch::equal(eps_out[0], eps_out[1]) && torch::equal(g_out[0], g_out[1]));
        EXPECT_TRUE(torch::allclose(range_out[0], range_out[2], tol, 0)) << range_out[0] << range_out[2];
        EXPECT_TRUE(torch::allclose(eps_out[0], eps_out[2], tol, tol)) << (eps_out[0] - eps_out[2]).abs().max();
        EXPECT_TRUE(close_to_scale(g_out[0], g_out[2], 10 * tol));
        EXPECT_TRUE(torch::equal(g_out[0].masked_select(at_zero), torch::zeros({at_zero.sum().item<int64_t>()}, dt)));
        EXPECT_GT(eps_out[0].max().item<double>(), 0.99);
      }
    }
    // Every row equal: eps 1 everywhere, no gradient; no rows: [-inf, -inf].
    const at::Tensor same = torch::full({50}, 0.7, torch::TensorOptions(dt).device(torch::kCUDA)).requires_grad_(true);
    const at::Tensor d50 = torch::full({50}, 3.0, same.options().requires_grad(false));
    const at::Tensor eq =
        d::normalised_depth_benefit(same, d50, {}, d::depth_benefit_range(same, d50, {}, t_max), t_max, false);
    EXPECT_TRUE(torch::equal(eq.cpu(), torch::ones({50}, dt)));
    eq.sum().backward();
    EXPECT_TRUE(torch::equal(same.grad().cpu(), torch::zeros({50}, dt)));
    const at::Tensor empty = torch::zeros({0}, d50.options());
    EXPECT_TRUE(torch::equal(d::depth_benefit_range(empty, empty, {}, t_max).cpu(),
                             torch::full({2}, -INFINITY, torch::kFloat64)));
  }
}

// merge_rows and band_diff on the GPU (one kernel each way) against their CPU form (a gather and
// index_put): copies, so the same bits (band_diff also with a bias and a ReLU: one addition, then
// one subtraction, either way); values and both gradients, at widths taking the vector
// and the scalar paths, both precisions, a quarter of the rows computed and most of those active.
TEST(Cuda, MergeRowsAndBandDiffEqualTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(3);
  const int64_t n = 5000;
  const at::Tensor comp = torch::rand({n}) < 0.25, active = comp & (torch::rand({n}) < 0.8);
  const at::Tensor pos = (comp.cumsum(0, torch::kInt32) * comp - 1).to(torch::kInt32);
  const int64_t m = comp.sum().item<int64_t>();
  const at::Tensor band = (comp & ~active).nonzero().squeeze(1);
  ASSERT_GT(band.numel(), 100);
  for (const int64_t width : {128, 40, 7}) {
    for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
      SCOPED_TRACE("width " + std::to_string(width) + (dt == torch::kFloat64 ? " double" : " float"));
      const at::Tensor prev0 = torch::randn({n, width}, dt), upd0 = torch::randn({m, width}, dt);
      const at::Tensor probe = torch::randn({n, width}, dt), bias = torch::randn({width}, dt);
      at::Tensor out[2], grad_prev[2], grad_upd[2], diff[2], biased[2], rectified[2];
      for (int dev = 0; dev < 2; ++dev) {
        auto on = [&](const at::Tensor& t) { return dev ? t.cuda() : t; };
        const at::Tensor prev = on(prev0).detach().clone().requires_grad_(true);
        const at::Tensor upd = on(upd0).detach().clone().requires_grad_(true);
        const at::Tensor o = adgnn::detail::merge_rows(prev, upd, on(pos), on(active));
        (o * on(probe)).sum().backward();
        out[dev] = o.detach().cpu();
        grad_prev[dev] = prev.grad().cpu();
        grad_upd[dev] = upd.grad().cpu();
        diff[dev] = adgnn::detail::band_diff(prev, upd, on(pos), on(band)).cpu();
        biased[dev] = adgnn::detail::band_diff(prev, upd, on(pos), on(band), on(bias), false).cpu();
        rectified[dev] = adgnn::detail::band_diff(prev, upd, on(pos), on(band), on(bias), true).cpu();
      }
      EXPECT_TRUE(torch::equal(out[1], out[0]));
      EXPECT_TRUE(torch::equal(grad_prev[1], grad_prev[0]));
      EXPECT_TRUE(torch::equal(grad_upd[1], grad_upd[0]));
      EXPECT_TRUE(torch::equal(diff[1], diff[0]));
      EXPECT_TRUE(torch::equal(biased[1], biased[0]));
      EXPECT_TRUE(torch::equal(rectified[1], rectified[0]));
      EXPECT_FALSE(torch::equal(rectified[0], biased[0]));  // the ReLU changed some entries
      EXPECT_EQ(grad_upd[0].abs().sum(1).gt(0).sum().item<int64_t>(), active.sum().item<int64_t>());
    }
  }
}

// AD's straight-through band term on the GPU (one kernel for its backward) against the CPU's
// ATen formula: the gradients of next, eps and tau, attached to `next` and as a separate term,
// with and without eps's gradient, float32 and float64, widths 128 (the model's) and 7, and band
// rows from a few to 20,000 (layer 1's band holds most nodes).
TEST(Cuda, BandTermGradientsEqualTheCpu) {
  REQUIRE_GPU();
  const auto d = c10::Device("cuda");
  for (const bool dbl : {false, true}) {
    for (const int64_t W : {int64_t(128), int64_t(7)}) {
      // Band rows 6 and 2,000 (a grid of at most 64 blocks whose last block sums tau's gradient;
      // at 2,000 its warps take several rows each) and 20,000 (a warp per row, ATen's sum).
      for (const int64_t n : {int64_t(9), int64_t(3000), int64_t(30000)}) {
        SCOPED_TRACE(std::string(dbl ? "float64" : "float32") + " width " + std::to_string(W) + " rows " +
                     std::to_string(n));
        const auto dt = dbl ? torch::kFloat64 : torch::kFloat32;
        torch::manual_seed(W + n);
        const at::Tensor next0 = torch::randn({n, W}, dt), eps0 = torch::rand({n}, dt), tau0 = torch::rand({}, dt) / 4;
        const at::Tensor band = std::get<0>(torch::randperm(n, torch::kInt64).slice(0, 0, n * 2 / 3).sort());
        const at::Tensor diff = torch::randn({band.numel(), W}, dt), probe = torch::randn({n, W}, dt);
        const double kappa = 0.05;
        for (const bool eps_grad : {true, false}) {
          for (const bool as_term : {false, true}) {
            std::vector<at::Tensor> grads[2];
            for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
              const c10::Device dev = on_gpu ? d : c10::Device("cpu");
              // Fresh leaves (to() of a CPU tensor to the CPU is the tensor itself).
              const at::Tensor next = next0.to(dev).clone().requires_grad_(true);
              const at::Tensor tau = tau0.to(dev).clone().requires_grad_(true);
              const at::Tensor eps = eps0.to(dev).clone().requires_grad_(eps_grad);
              const at::Tensor out =
                  as_term ? next.index_add(0, band.to(dev),
                                           adgnn::detail::band_straight_through_term(eps, tau, band.to(dev), diff.to(dev), kappa))
                          : adgnn::detail::band_straight_through(next, eps, tau, band.to(dev), diff.to(dev), kappa);
              (out * probe.to(dev)).sum().backward();
              grads[on_gpu] = {next.grad().cpu(), tau.grad().cpu(), eps_grad ? eps.grad().cpu() : torch::zeros({1}, dt)};
            }
            const double tol = dbl ? 1e-10 : 1e-4;
            for (size_t i = 0; i < 3; ++i)
              EXPECT_TRUE(close_to_scale(grads[1][i], grads[0][i], tol))
                  << (as_term ? "term " : "attached ") << (eps_grad ? "eps grad, " : "") << "gradient " << i
                  << " (next, tau, eps)";
            EXPECT_GT(grads[1][1].abs().item<double>(), 0.0);
          }
        }
      }
    }
  }
}

}  // namespace
