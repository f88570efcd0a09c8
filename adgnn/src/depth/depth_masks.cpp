// The thresholds tau(t) and every layer's row masks of one pass (surrogate.h).
#include <torch/torch.h>

#include "ops/kernels.h"
#include "depth/surrogate.h"

namespace adgnn {

#ifdef ADGNN_HAVE_CUDA_KERNELS
namespace {
class TauFn : public torch::autograd::Function<TauFn> {
 public:
  // Outputs: tau [L] (no gradient), then tau(1) .. tau(L).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a,
                                                int64_t layers, double lambda) {
    ctx->set_materialize_grads(false);  // layers without a band term send none: no zero-filled ones
    ctx->save_for_backward({a});
    ctx->saved_data["lambda"] = lambda;
    auto [all, each] = kernels::tau_thresholds_cuda(a, layers, lambda);
    ctx->mark_non_differentiable({all});
    each.insert(each.begin(), all);
    return each;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<at::Tensor> per_layer(grads.begin() + 1, grads.end());
    return {kernels::tau_thresholds_backward_cuda(ctx->get_saved_variables()[0], ctx->saved_data["lambda"].toDouble(),
                                                  per_layer),
            at::Tensor(), at::Tensor()};
  }
};
}  // namespace
#endif

detail::Thresholds detail::tau_thresholds(const at::Tensor& a, int64_t layers, double lambda) {
  TORCH_CHECK(layers >= 1 && a.dim() == 1 && a.numel() == layers - 1, "tau_thresholds: a [layers - 1]");
  Thresholds out;
  if (layers == 1) {
    out.all = torch::full({1}, lambda, a.options().requires_grad(false));
    out.layers = out.all.unbind(0);
    return out;
  }
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (a.is_cuda() && layers <= kernels::kMaxTauLayers) {
    torch::autograd::variable_list v = TauFn::apply(a, layers, lambda);
    out.all = v.front();
    out.layers.assign(v.begin() + 1, v.end());
    return out;
  }
#endif
  // c = C softplus(a), C [L, L-1] the strictly lower-triangular ones: one product, not a cumsum
  // and a cat.
  const at::Tensor neg_cum = -torch::ones({layers, layers - 1}, a.options().requires_grad(false)).tril(-1);
  const at::Tensor tau = torch::rsub(neg_cum.mv(torch::softplus(a)).exp(), 1.0, 1 - lambda);
  out.all = tau.detach();
  out.layers = tau.unbind(0);
  return out;
}

detail::DepthMasks detail::depth_masks(const at::Tensor& eps, const at::Tensor& tau, const at::Tensor& depth_in,
                                       const at::Tensor& rowptr, const DepthMaskSpec& spec) {
  const int64_t L = spec.layers, n = rowptr.numel() - 1;
  TORCH_CHECK(L >= 1 && (depth_in.defined() ? spec.band != DepthMaskSpec::Band::Width
                                            : eps.numel() == n && tau.numel() == L),
              "depth_masks: eps [n] and tau [layers], or a depth without a band width");
  uint64_t frozen_bits = 0;
  int64_t previous = 0;
  for (int64_t t : spec.frozen_layers) {
    TORCH_CHECK(t > previous && t <= L, "depth_masks: frozen layers increasing, in 1..layers");
    if (t <= 64) frozen_bits |= uint64_t(1) << (t - 1);
    previous = t;
  }
  const int band_mode = spec.band == DepthMaskSpec::Band::None ? 0 : spec.band == DepthMaskSpec::Band::Width ? 1 : 2;
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (rowptr.is_cuda() && L <= 64) {
    return kernels::depth_masks_cuda(
        depth_in.defined() ? at::Tensor() : eps.detach().contiguous(),
        depth_in.defined() ? at::Tensor() : tau.detach().contiguous(),
        depth_in.defined() ? depth_in.contiguous() : at::Tensor(), L, band_mode, spec.band_width,
        spec.no_band_at_layer1, rowptr.contiguous(), frozen_bits);
  }
#endif
  at::NoGradGuard no_grad;
  const auto on = rowptr.options();
  at::Tensor depth = depth_in;
  at::Tensor band;
  if (!depth_in.defined()) {
    const at::Tensor eps_d = eps.detach().unsqueeze(0), tau_d = tau.detach().unsqueeze(1);  // [1, n], [L, 1]
    depth = (eps_d >= tau_d).sum(0);
    if (band_mode == 1) band = (eps_d - tau_d).abs() < spec.band_width;
  }
  if (band_mode == 0) band = torch::zeros({L, n}, on.dtype(torch::kBool));
  if (band_mode == 2) band = torch::ones({L, n}, on.dtype(torch::kBool));
  if (spec.no_band_at_layer1) band.select(0, 0).fill_(false);
  const at::Tensor active = depth.unsqueeze(0) >= torch::arange(1, L + 1, on).unsqueeze(1);
  const at::Tensor frozen = ~active | band;
  std::vector<at::Tensor> masks{active | band, active, band};
  for (int64_t t : spec.frozen_layers) masks.push_back(frozen.narrow(0, t - 1, 1));
  const at::Tensor stacked = torch::cat(masks);
  const at::Tensor row_entries = rowptr.slice(0, 1, n + 1) - rowptr.slice(0, 0, n);
  const at::Tensor entries = masks[0].to(torch::kInt64).mul(row_entries.unsqueeze(0)).sum(1);
  // Positions: one scan of the flattened masks, less each layer's start.
  at::Tensor comp_pos;
  if (n == 0) {
    comp_pos = torch::empty({L, 0}, on.dtype(torch::kInt32));
  } else {
    const auto count_type = L * n < std::numeric_limits<int32_t>::max() ? torch::kInt32 : torch::kInt64;
    const at::Tensor flat = masks[0].reshape({-1}).cumsum(0, count_type).view({L, n});
    const at::Tensor before = torch::constant_pad_nd(flat.select(1, n - 1).narrow(0, 0, L - 1), {1, 0});
    comp_pos = flat.sub_(before.unsqueeze(1)).mul_(masks[0]).sub_(1).to(torch::kInt32);
  }
  return {depth, stacked, torch::cat({stacked.sum(1), entries}), comp_pos, {}};
}

at::Tensor detail::mask_rows(const DepthMasks& masks, int64_t listed) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (masks.tile_offsets.defined()) return kernels::mask_rows_cuda(masks.stacked, masks.counts, masks.tile_offsets, listed);
#endif
  return torch::nonzero_static(masks.stacked, listed).select(1, 1).contiguous();
}

}  // namespace adgnn
