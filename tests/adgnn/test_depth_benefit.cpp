// The model's tensor depth benefit (adgnn/src/depth_benefit.cpp) against the one scalar statement
// of the formula (loaders/include/adgnn/depth_benefit_formula.h), which the stratified
// partitioner also uses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "adgnn/depth_benefit_formula.h"
#include "depth/depth_benefit.h"

TEST(DepthBenefit, TensorVersionEqualsTheScalarFormula) {
  const int64_t n = 500;
  const at::Tensor d = torch::randint(0, 40, {n}, torch::kInt64).to(torch::kFloat64);
  // d+ across [0, d], with rows where alpha = 0 exactly (d = 1 + 2 d+: the floor of |alpha|).
  at::Tensor d_plus = torch::rand({n}, torch::kFloat64) * d;
  d_plus.index_put_({torch::arange(0, n, 7)}, ((d - 1) / 2).clamp_min(0).index({torch::arange(0, n, 7)}));
  for (const double t_max : {1.0, 4.0}) {
    SCOPED_TRACE(t_max);
    std::vector<double> l(n);
    for (int64_t v = 0; v < n; ++v)
      l[v] = adgnn::log_depth_benefit(d[v].item<double>(), d_plus[v].item<double>(), t_max);
    const double lo = *std::min_element(l.begin(), l.end()), hi = *std::max_element(l.begin(), l.end());
    const at::Tensor range = adgnn::detail::depth_benefit_range(d_plus, d, {}, t_max);
    EXPECT_NEAR(range[0].item<double>(), -lo, 1e-9 * std::abs(lo));
    EXPECT_NEAR(range[1].item<double>(), hi, 1e-9 * std::abs(hi) + 1e-12);
    // The log normalisation is affine in l: (l - lo) / (hi - lo), so each row checks l itself.
    const at::Tensor eps = adgnn::detail::normalised_depth_benefit(d_plus, d, {}, range, t_max, true);
    for (int64_t v = 0; v < n; ++v)
      EXPECT_NEAR(eps[v].item<double>(), (l[v] - lo) / (hi - lo), 1e-9) << "row " << v;
  }
}

// --normalisation rank: the mid-rank of l over (N - 1), so tied rows share one value, the lowest
// l is 0 and the highest 1, and the scale of l does not matter.
TEST(DepthBenefit, RankNormalisationIsTheMidRankQuantile) {
  // Degrees 0..5 with d+ = d: alpha = 1, l = t_max log(d + 1), increasing in d; d = 2 twice.
  const at::Tensor d = torch::tensor({3.0, 0.0, 2.0, 5.0, 2.0, 1.0}, torch::kFloat64);
  for (const double t_max : {1.0, 7.0}) {
    const at::Tensor eps = adgnn::detail::rank_normalised_depth_benefit(d, d, {}, t_max, nullptr);
    // Sorted: 0, 1, 2, 2, 3, 5 -> ranks 0, 1, 2.5 (tied pair), 4, 5 over N - 1 = 5.
    const std::vector<double> want{4 / 5.0, 0.0, 2.5 / 5, 1.0, 2.5 / 5, 1 / 5.0};
    for (int64_t v = 0; v < 6; ++v) EXPECT_DOUBLE_EQ(eps[v].item<double>(), want[size_t(v)]) << "row " << v;
    EXPECT_FALSE(eps.requires_grad());
  }
  const at::Tensor one = torch::tensor({4.0}, torch::kFloat64);
  EXPECT_DOUBLE_EQ(adgnn::detail::rank_normalised_depth_benefit(one, one, {}, 2.0, nullptr)[0].item<double>(), 1.0);
}

TEST(DepthBenefit, FastEstimateIsTheDegreeProductShare) {
  EXPECT_DOUBLE_EQ(adgnn::fast_same_label_estimate(3, 10, 20), 1.5);
  EXPECT_DOUBLE_EQ(adgnn::log_depth_benefit(0, 0), 0.0);  // alpha = 1, log 1 = 0
  EXPECT_DOUBLE_EQ(adgnn::log_depth_benefit(3, 1, 2), 2 * (2 * std::log(0.0 + 1e-12) + std::log(4.0)));
}
