// The surrogate band's straight-through term (surrogate.h).
#include <torch/torch.h>

#include "ops/kernels.h"
#include "depth/surrogate.h"

namespace adgnn {

namespace {

// The gradient of the hard straight-through term (s - s.detach()) * diff with respect to eps and
// tau_t: <grad_term[i], diff[i]> ds_i/d(eps_i - tau_t), grad_term being `grad` or, with
// of_band_rows, its band rows. eps_input: the index of eps among the function's inputs (tau_t
// follows it).
torch::autograd::variable_list band_term_grads(torch::autograd::AutogradContext* ctx, const at::Tensor& grad,
                                               bool of_band_rows, size_t eps_input) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor &eps = saved[0], &tau_t = saved[1], &band_rows = saved[2], &diff = saved[3];
  const double kappa = ctx->saved_data["kappa"].toDouble();
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (eps.is_cuda() && tau_t.scalar_type() == eps.scalar_type() &&
      (grad.scalar_type() == eps.scalar_type() || grad.scalar_type() == torch::kBFloat16)) {
    // bfloat16 rows (ModelConfig::precision): the band rows' gradient and difference in eps's
    // type, a few rows (the band), for the one kernel instead of the formula's ATen operations.
    const bool cast = grad.scalar_type() != eps.scalar_type();
    const at::Tensor g = !cast ? grad : (of_band_rows ? grad.index_select(0, band_rows) : grad).to(eps.scalar_type());
    const kernels::BandTermGrads k = kernels::band_term_grads_cuda(
        eps, tau_t, band_rows, g, cast ? diff.to(eps.scalar_type()) : diff, kappa, of_band_rows && !cast,
        ctx->needs_input_grad(eps_input));
    at::Tensor grad_tau;
    if (ctx->needs_input_grad(eps_input + 1)) grad_tau = tau_t.dim() == 0 ? k.tau : k.tau.view(tau_t.sizes());
    return {k.eps, grad_tau};
  }
#endif
  const at::Tensor s = torch::sigmoid((eps.index_select(0, band_rows) - tau_t) / kappa);
  const at::Tensor grad_term = of_band_rows ? grad.index_select(0, band_rows) : grad;
  const at::Tensor g = (grad_term * diff).sum(1) * (s * (1 - s) / kappa);
  at::Tensor grad_eps, grad_tau;
  if (ctx->needs_input_grad(eps_input)) grad_eps = torch::zeros_like(eps).index_add_(0, band_rows, g);
  if (ctx->needs_input_grad(eps_input + 1)) grad_tau = -g.sum().reshape(tau_t.sizes());
  return {grad_eps, grad_tau};
}

void save_band_term(torch::autograd::AutogradContext* ctx, const at::Tensor& eps, const at::Tensor& tau_t,
                    const at::Tensor& band_rows, const at::Tensor& diff, double kappa) {
  ctx->save_for_backward({eps, tau_t, band_rows, diff});
  ctx->saved_data["kappa"] = kappa;
}

// next, with the term attached: the value is next itself.
class BandStraightThroughFn : public torch::autograd::Function<BandStraightThroughFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& next, const at::Tensor& eps,
                            const at::Tensor& tau_t, const at::Tensor& band_rows, const at::Tensor& diff,
                            double kappa) {
    save_band_term(ctx, eps, tau_t, band_rows, diff, kappa);
    return next;  // autograd makes it a view of `next` with this node's gradient edge
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto g = band_term_grads(ctx, grads[0], /*of_band_rows=*/true, 1);
    return {grads[0], g[0], g[1], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The term itself, zeros [band rows, width], for an update applied elsewhere (a rank's next halo
// exchange, which also sends it to the peers that read those rows).
class BandTermFn : public torch::autograd::Function<BandTermFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& eps, const at::Tensor& tau_t,
                            const at::Tensor& band_rows, const at::Tensor& diff, double kappa) {
    save_band_term(ctx, eps, tau_t, band_rows, diff, kappa);
    return torch::zeros_like(diff);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto g = band_term_grads(ctx, grads[0], /*of_band_rows=*/false, 0);
    return {g[0], g[1], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor detail::band_straight_through(const at::Tensor& next, const at::Tensor& eps, const at::Tensor& tau_t,
                                         const at::Tensor& band_rows, const at::Tensor& diff, double kappa) {
  TORCH_CHECK(!diff.requires_grad(), "band_straight_through: diff carries no gradient");
  return BandStraightThroughFn::apply(next, eps, tau_t, band_rows, diff, kappa);
}

at::Tensor detail::band_straight_through_term(const at::Tensor& eps, const at::Tensor& tau_t,
                                              const at::Tensor& band_rows, const at::Tensor& diff, double kappa) {
  TORCH_CHECK(!diff.requires_grad(), "band_straight_through_term: diff carries no gradient");
  return BandTermFn::apply(eps, tau_t, band_rows, diff, kappa);
}

}  // namespace adgnn
