// Per-node depth's internals (docs/method.md, "stopping depths"): a pass's row masks, the
// surrogate band's straight-through term, and the rows of a deeper layer's output.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

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

// tau(t) = lambda + (1 - lambda) theta(t) = 1 - (1 - lambda) exp(-c_t), t = 1..L, with
// c_t = softplus(a_2) + ... + softplus(a_t) (c_1 = 0; docs/method.md), from theta's parameters
// a [L - 1]: `all` [L] without a gradient (the masks' thresholds) and each tau(t) as a one-element
// tensor differentiable in a (the band terms'). On the GPU one autograd node and one kernel each
// way, where softplus, a product, exp, rsub, unbind and their backward nodes take ten launches;
// elsewhere those operations.
struct Thresholds {
  at::Tensor all;
  std::vector<at::Tensor> layers;
};
Thresholds tau_thresholds(const at::Tensor& a, int64_t layers, double lambda);

// Every layer's row masks for one pass, from the depth benefit eps [n] and the thresholds tau [L]
// (T(v) = the count of t with eps_v >= tau(t)), or from a given depth [n] (int64).
struct DepthMaskSpec {
  int64_t layers = 1;
  enum class Band { None, Width, All } band = Band::None;  // the surrogate band's rows per layer
  double band_width = 0;           // Band::Width: |eps - tau(t)| < band_width (in eps's type)
  bool no_band_at_layer1 = false;  // no band at layer 1 (eps without a gradient: none to carry)
  std::vector<int64_t> frozen_layers;  // layers (1-based, increasing) whose frozen rows are listed
};
struct DepthMasks {
  at::Tensor depth;    // int64 [n]
  // bool [3L + F, n]: rows 0..L-1 the computed rows (active or band) of layers 1..L, then the
  // active rows, then the band rows, then the frozen rows (not active, or band) of each of
  // frozen_layers.
  at::Tensor stacked;
  at::Tensor counts;   // int64 [3L + F + L]: each stacked row's count, then each layer's CSR
                       // entries (of rowptr) over its computed rows
  at::Tensor comp_pos;  // int32 [L, n]: each row's position among its layer's computed rows, or -1
  at::Tensor tile_offsets;  // the GPU's: each stacked row's count before each tile of rows (mask_rows)
};
// Every stacked row's set rows, mask by mask, each in row order (int64 [listed], listed the sum of
// the first stacked.size(0) counts, which the caller has copied to the host): nonzero's order.
at::Tensor mask_rows(const DepthMasks& masks, int64_t listed);
// On the GPU one kernel, on the CPU whole-tensor operations (the reference).
DepthMasks depth_masks(const at::Tensor& eps, const at::Tensor& tau, const at::Tensor& depth, const at::Tensor& rowptr,
                       const DepthMaskSpec& spec);

// A layer's output over n rows: upd[pos[r]] where active[r], else prev[r]. pos (int32 [n]): each
// row's position among the computed rows (upd's rows), -1 for the others; active (bool [n]) only
// where pos >= 0. Differentiable in prev and upd (computed rows that are not active get a zero
// gradient). On the GPU one kernel each way.
at::Tensor merge_rows(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos, const at::Tensor& active);
// The band rows' update - previous value, upd[pos[b]] - prev[b] for b in band_rows, without a
// gradient (the straight-through term's diff). With a bias ([width]) and/or relu, the previous
// value is act(prev[b] + bias): a layer's self-only value from its input transform (layer 1 of
// the learned variant reuses f_delta's input).
at::Tensor band_diff(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos, const at::Tensor& band_rows,
                     const at::Tensor& bias = {}, bool relu = false);

}  // namespace adgnn::detail
