// What the CUDA test files (tests/adgnn/cuda/test_*_cuda.cpp, one binary: cuda_tests) share: the
// GPU check that skips each test on a machine without one, the graphs they run on, a tolerance
// relative to a tensor's scale, and a scoped setting of the regrouping threshold.
#pragma once

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

#include "adgnn/graph.h"
#include "adgnn/ops.h"
#include "ops/kernels.h"

namespace adgnn::cuda_test {

inline bool have_gpu() { return adgnn::cuda_kernels_built() && at::hasCUDA() && torch::cuda::device_count() > 0; }
#define REQUIRE_GPU()                                                                                     \
  if (!::adgnn::cuda_test::have_gpu()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build " \
                                                       "(CPU machine); these tests run on the GPU machine"

// A power-law CSBM graph of `nodes` nodes (4 classes, average degree 8, 16 features).
inline adgnn::Graph graph(int64_t nodes, uint64_t seed) {
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

// A CSR of n rows with hubs (seeded): rows 0, 1 and 2 have `first` entries, the others
// 1 + (r * 7919) % spread, each row's columns distinct and sorted, and column 7 is read by rows
// 3 .. 3 + col7_readers - 1.
struct HubCsr {
  at::Tensor rowptr, col;
};
inline HubCsr hub_csr(int64_t n, std::array<int64_t, 3> first, int64_t spread, int64_t col7_readers,
                      uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<at::Tensor> cols;
  std::vector<int64_t> ptr{0};
  for (int64_t r = 0; r < n; ++r) {
    const int64_t deg = r < 3 ? first[size_t(r)] : 1 + (r * 7919) % spread;
    at::Tensor c = torch::randperm(n, torch::kInt64).slice(0, 0, deg);
    if (r >= 3 && r < 3 + col7_readers) c[0] = 7;
    cols.push_back(std::get<0>(c.sort()));
    ptr.push_back(ptr.back() + deg);
  }
  return {torch::tensor(ptr, torch::kInt64), torch::cat(cols).to(torch::kInt32)};
}

// max |a - b| <= tol * max |b|, with the numbers in the message.
inline ::testing::AssertionResult close_to_scale(const at::Tensor& a, const at::Tensor& b, double tol) {
  const double diff = (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  if (diff <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max difference " << diff << " > " << tol << " x " << scale;
}

// Sets one of the kernels' process-wide test knobs (a function returning an int64_t&) for one
// scope, and puts the previous value back when the scope ends: also when an ASSERT returns early
// or the test throws, so a failing test cannot leave the following ones on another path.
template <int64_t& (*Knob)()>
class ScopedKnob {
 public:
  explicit ScopedKnob(int64_t value) : saved_(Knob()) { Knob() = value; }
  ~ScopedKnob() { Knob() = saved_; }
  ScopedKnob(const ScopedKnob&) = delete;
  ScopedKnob& operator=(const ScopedKnob&) = delete;

 private:
  int64_t saved_;
};
// The graph size from which the GPU backward of a few computed rows regroups their entries.
using ScopedRegroupMinEntries = ScopedKnob<adgnn::kernels::regroup_min_entries>;
#ifdef ADGNN_HAVE_CUDA_KERNELS
// The largest product our small GEMM takes instead of cuBLAS (0: always cuBLAS).
using ScopedSmallLinearMaxMacs = ScopedKnob<adgnn::kernels::small_linear_max_macs>;
#endif

}  // namespace adgnn::cuda_test
