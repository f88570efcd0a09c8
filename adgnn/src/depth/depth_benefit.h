// The learned depth benefit after f_delta (docs/method.md, "depth benefit"): from the pair logits
// to d+, L_reg's sum and the normalised eps_tilde. On the GPU each is one autograd node with one
// kernel each way, where some 65 ATen operations and their backward nodes, each a launch over n or
// E elements, would leave the device waiting for the host; elsewhere those operations (the
// reference the CUDA tests compare with).
#pragma once

#include <ATen/core/Tensor.h>

#include "adgnn/transport.h"

namespace adgnn::detail {

// d+ [rows] = for each row r, the sum over its CSR entries e of sigmoid(pair_logit[entry_pair[e]]).
// rowptr: int64 [rows + 1]; entry_rows: int64 [E], each entry's row (the CPU's index_add);
// entry_pair: int64 [E]; pair_logit [P], differentiable.
at::Tensor sigmoid_row_sums(const at::Tensor& rowptr, const at::Tensor& entry_rows, const at::Tensor& entry_pair,
                            const at::Tensor& pair_logit);

// The sum over i of BCE-with-logits(pair_logit[sel_pair[i]], target[i]) as one element (target:
// pair_logit's type), differentiable in pair_logit. 0 for no i.
at::Tensor pair_bce_sum(const at::Tensor& pair_logit, const at::Tensor& sel_pair, const at::Tensor& target);

// l = t_max (2 log max(|alpha|, 1e-12) + log(d + 1)) + offset with alpha = (1 + 2 d+ - d) / (d + 1),
// in d+'s type (d: the degrees in that type; offset: undefined, or AD#'s per-row term), and its
// extremes as float64 [2] = [-min l, max l] (-inf, -inf without rows), without a gradient.
at::Tensor depth_benefit_range(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                               double t_max);
// eps_tilde from l and range (lo = -range[0], hi = range[1], constants): linear, (exp(l - hi) - b)
// / (1 - b) with b = exp(lo - hi); log, (l - lo) / (hi - lo); clamped to [0, 1], and 1 at every row
// when hi <= lo. Differentiable in d_plus.
at::Tensor normalised_depth_benefit(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                   const at::Tensor& range, double t_max, bool log_normalisation);

// eps_tilde by rank (--normalisation rank): the mid-rank of l among the rows of every rank,
// (#{u : l_u < l_v} + (#{u : l_u == l_v} - 1) / 2) / (N - 1) over the N rows (1 when N = 1): the
// depth benefit's quantile, spread evenly over [0, 1] whatever its scale. Piecewise constant, so
// without a gradient (the learned variant's f_delta then learns from L_reg alone). transport: the
// other ranks (null: this process holds every row); every rank gathers the N values of l.
at::Tensor rank_normalised_depth_benefit(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                         double t_max, RankTransport* transport);

}  // namespace adgnn::detail
