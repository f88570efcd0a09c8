// The surrogate band's straight-through term, and the rows of a deeper layer's output (internal;
// docs/method.md, "stopping depths").
#pragma once

#include <ATen/core/Tensor.h>

namespace adgnn::detail {

// With hard masks the band rows' term is (s - s.detach()) * diff, s = sigmoid((eps[band_rows] -
// tau_t) / kappa): zero in value, so this returns `next` unchanged (a view), and its backward
// gives s's gradient only, <grad_next[band_rows[i]], diff[i]> per band row, on to eps (when it
// requires one) and tau_t. One autograd node instead of the dozen operations (index_select,
// sigmoid, the product, index_add_ and their backward nodes) that wrote the zero term out at every
// deeper layer. diff: [band rows, width], no gradient.
at::Tensor band_straight_through(const at::Tensor& next, const at::Tensor& eps, const at::Tensor& tau_t,
                                 const at::Tensor& band_rows, const at::Tensor& diff, double kappa);
// The term itself as zeros [band rows, width] with that backward, for an update that another
// operation applies (a rank's next halo exchange).
at::Tensor band_straight_through_term(const at::Tensor& eps, const at::Tensor& tau_t, const at::Tensor& band_rows,
                                      const at::Tensor& diff, double kappa);

// Whether a layer whose every row is active, some of them in the band, takes the update as its
// output and the band rows' frozen values alone (model.cpp, v47); tests turn it off to compare
// with the general path (a gather of the update and the frozen rows' values).
bool& band_every_row_active_shortcut();

// A layer's output over n rows: upd[pos[r]] where active[r], else prev[r]. pos (int32 [n]): each
// row's position among the computed rows (upd's rows), -1 for the others; active (bool [n]) only
// where pos >= 0. Differentiable in prev and upd (computed rows that are not active get a zero
// gradient). On the GPU one kernel each way (v67).
at::Tensor merge_rows(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos, const at::Tensor& active);
// The band rows' update - previous value, upd[pos[b]] - prev[b] for b in band_rows, without a
// gradient (the straight-through term's diff).
at::Tensor band_diff(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos, const at::Tensor& band_rows);

}  // namespace adgnn::detail
