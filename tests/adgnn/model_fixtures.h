// What the model tests share: a small model's configuration, a generated graph with varied
// degrees, and the finite-difference check of a gradient.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "adgnn/loaders.h"
#include "adgnn/model.h"

namespace adgnn::testing {

// hidden 8, no dropout, seed 3, the graph's widths.
inline ModelConfig config(const std::string& variant, int64_t layers, const Graph& g) {
  ModelConfig c;
  c.variant = parse_variant(variant);
  c.layers = layers;
  c.hidden = 8;
  c.in_dim = g.features.cols;
  c.out_dim = g.num_classes;
  c.dropout = 0;
  c.seed = 3;
  return c;
}

// 3 classes, 8 features, power-law degrees (average 6), edge homophily h.
inline Graph csbm(int64_t nodes, double h, uint64_t seed) {
  CsbmParams p;
  p.nodes = nodes;
  p.classes = 3;
  p.avg_degree = 6;
  p.degree_dist = "powerlaw";
  p.homophily = h;
  p.features = 8;
  p.seed = seed;
  return generate_csbm(p);
}

// Central differences of a scalar function of one tensor, against its autograd gradient (which
// param.grad() holds afterwards).
inline void expect_fd(const std::function<at::Tensor()>& loss, at::Tensor param, double tol) {
  param.mutable_grad() = at::Tensor();
  loss().backward();
  const at::Tensor grad = param.grad().clone();
  torch::NoGradGuard guard;
  at::Tensor flat = param.view({-1});
  const double eps = 1e-6;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double v = flat[i].item<double>();
    flat[i] = v + eps;
    const double up = loss().item<double>();
    flat[i] = v - eps;
    const double down = loss().item<double>();
    flat[i] = v;
    EXPECT_NEAR(grad.view({-1})[i].item<double>(), (up - down) / (2 * eps), tol) << "entry " << i;
  }
}

}  // namespace adgnn::testing
