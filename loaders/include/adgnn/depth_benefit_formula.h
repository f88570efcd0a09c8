// The depth benefit of one node (docs/method.md, "depth benefit"), without torch: the one
// statement of the formula. The model computes it on tensors (adgnn/src/depth_benefit.cpp,
// tested against these functions in tests/adgnn/test_depth_benefit.cpp); the stratified
// partitioner ranks nodes by it (partition/src/stratified.cpp).
#pragma once

#include <algorithm>
#include <cmath>

namespace adgnn {

// The fast variants' estimate of a node's same-label neighbours ("degree" heuristic):
// d+ = d * (sum of its neighbours' degrees) / (the largest degree product over the edges).
inline double fast_same_label_estimate(double degree, double neighbour_degree_sum, double max_degree_product) {
  return degree * neighbour_degree_sum / max_degree_product;
}

// l = t_max (2 log max(|alpha|, 1e-12) + log(d + 1)) with alpha = (1 + 2 d+ - d) / (d + 1).
// |alpha| is floored so that l stays finite (such a node's benefit is ~exp(-55 t_max) relative to
// the largest: zero in practice).
inline double log_depth_benefit(double degree, double d_plus, double t_max = 1) {
  const double alpha = (1 + 2 * d_plus - degree) / (degree + 1);
  return t_max * (2 * std::log(std::max(std::abs(alpha), 1e-12)) + std::log(degree + 1));
}

}  // namespace adgnn
