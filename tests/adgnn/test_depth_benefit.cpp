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

TEST(DepthBenefit, FastEstimateIsTheDegreeProductShare) {
  EXPECT_DOUBLE_EQ(adgnn::fast_same_label_estimate(3, 10, 20), 1.5);
  EXPECT_DOUBLE_EQ(adgnn::log_depth_benefit(0, 0), 0.0);  // alpha = 1, log 1 = 0
  EXPECT_DOUBLE_EQ(adgnn::log_depth_benefit(3, 1, 2), 2 * (2 * std::log(0.0 + 1e-12) + std::log(4.0)));
}
