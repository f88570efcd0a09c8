// A target depth distribution (--depth-target): a penalty that pulls the share of nodes reaching
// each depth towards a chosen distribution while theta's thresholds (and the learned variant's
// f_delta) train on the task. The share of nodes with T(v) >= t is estimated by the surrogate,
// S_t = mean_v sigmoid((eps_v - tau(t)) / kappa), which is differentiable in tau(t) and eps.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "adgnn/transport.h"

namespace adgnn::detail {

// The shares of nodes that should reach at least depth t, Q_t for t = 1..layers, from the flag's
// value: "uniform" (1 / layers at each depth 1..layers, none at 0) or layers + 1 comma-separated
// shares of the depths 0..layers (non-negative, summing to 1). InputError naming --depth-target
// otherwise. An empty spec gives no shares (off).
std::vector<double> depth_target_at_least(const std::string& spec, int64_t layers);

// The penalty weight * sum_t (S_t - Q_t)^2 over every rank's rows (eps [n] over this rank's
// rows, tau_layers[t - 1] = tau(t) as one-element tensors, at_least [L] the Q_t on eps's device
// and in its type), as a 0-dim tensor. On a rank, S_t's
// sums are reduced over the ranks (transport) and the value returned is this rank's share:
// the ranks' shares add up to the penalty and their gradients to its gradient. Every rank calls
// it (also one with no rows).
at::Tensor depth_target_penalty(const at::Tensor& eps, const std::vector<at::Tensor>& tau_layers,
                                const at::Tensor& at_least, double kappa, double weight,
                                RankTransport* transport);

}  // namespace adgnn::detail
