#include "depth/depth_benefit.h"

#include <torch/torch.h>

#include <cmath>

#include "ops/kernels.h"

namespace adgnn {

namespace {

namespace F = torch::nn::functional;

#ifdef ADGNN_HAVE_CUDA_KERNELS
class SigmoidRowSumsFn : public torch::autograd::Function<SigmoidRowSumsFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rowptr,
                            const at::Tensor& entry_pair, const at::Tensor& pair_logit) {
    ctx->save_for_backward({rowptr, entry_pair, pair_logit});
    return kernels::sigmoid_row_sums_cuda(rowptr, entry_pair, pair_logit);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    return {at::Tensor(), at::Tensor(), kernels::sigmoid_row_sums_backward_cuda(s[0], s[1], s[2], grads[0])};
  }
};

class PairBceSumFn : public torch::autograd::Function<PairBceSumFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& pair_logit,
                            const at::Tensor& sel_pair, const at::Tensor& target) {
    ctx->save_for_backward({pair_logit, sel_pair, target});
    return kernels::pair_bce_sum_cuda(pair_logit, sel_pair, target);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    return {kernels::pair_bce_sum_backward_cuda(s[0], s[1], s[2], grads[0]), at::Tensor(), at::Tensor()};
  }
};

// The constants of eps_tilde (no gradient). A struct, not Function inputs: those must be defined
// tensors, and the offset is mostly absent.
struct BenefitConstants {
  at::Tensor d, offset, range;
  double t_max = 0;
  bool log_normalisation = false;
};

class NormalisedDepthBenefitFn : public torch::autograd::Function<NormalisedDepthBenefitFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& d_plus,
                            const BenefitConstants& c) {
    ctx->save_for_backward({d_plus});
    ctx->saved_data["d"] = c.d;
    ctx->saved_data["range"] = c.range;
    if (c.offset.defined()) ctx->saved_data["offset"] = c.offset;
    ctx->saved_data["t_max"] = c.t_max;
    ctx->saved_data["log"] = c.log_normalisation;
    return kernels::normalised_depth_benefit_cuda(d_plus, c.d, c.offset, c.range, c.t_max, c.log_normalisation);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto& data = ctx->saved_data;
    const at::Tensor offset = data.count("offset") ? data.at("offset").toTensor() : at::Tensor();
    return {kernels::normalised_depth_benefit_backward_cuda(
                ctx->get_saved_variables()[0], data.at("d").toTensor(), offset, data.at("range").toTensor(),
                data.at("t_max").toDouble(), data.at("log").toBool(), grads[0]),
            at::Tensor()};
  }
};
#endif

// l by ATen operations (the CPU's path and the reference of the GPU's): log_depth_benefit
// (adgnn/depth_benefit_formula.h, the formula's one statement) on every row, plus the offset.
at::Tensor log_benefit(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset, double t_max) {
  const at::Tensor alpha = (1 + 2 * d_plus - d) / (d + 1);
  const at::Tensor l = t_max * (2 * alpha.abs().clamp_min(1e-12).log() + (d + 1).log());
  return offset.defined() ? l + offset : l;
}

void check_rows(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset, const char* what) {
  TORCH_CHECK(d_plus.dim() == 1 && d.sizes() == d_plus.sizes() && d.scalar_type() == d_plus.scalar_type() &&
                  (!offset.defined() || (offset.sizes() == d_plus.sizes() && offset.scalar_type() == d_plus.scalar_type())),
              what, ": d_plus, d (and offset) [n] of one type");
}

}  // namespace

at::Tensor detail::sigmoid_row_sums(const at::Tensor& rowptr, const at::Tensor& entry_rows,
                                    const at::Tensor& entry_pair, const at::Tensor& pair_logit) {
  TORCH_CHECK(rowptr.dim() == 1 && rowptr.numel() >= 1 && entry_pair.numel() == entry_rows.numel(),
              "sigmoid_row_sums: rowptr [rows + 1], entry_rows and entry_pair [E]");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (pair_logit.is_cuda()) return SigmoidRowSumsFn::apply(rowptr, entry_pair, pair_logit);
#endif
  return torch::zeros({rowptr.numel() - 1}, pair_logit.options())
      .index_add(0, entry_rows, torch::sigmoid(pair_logit.index_select(0, entry_pair)));
}

at::Tensor detail::pair_bce_sum(const at::Tensor& pair_logit, const at::Tensor& sel_pair, const at::Tensor& target) {
  TORCH_CHECK(sel_pair.numel() == target.numel() && target.scalar_type() == pair_logit.scalar_type(),
              "pair_bce_sum: one target (of the logits' type) per selected pair");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (pair_logit.is_cuda()) return PairBceSumFn::apply(pair_logit, sel_pair, target);
#endif
  return F::binary_cross_entropy_with_logits(pair_logit.index_select(0, sel_pair), target,
                                             F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum));
}

at::Tensor detail::depth_benefit_range(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                       double t_max) {
  check_rows(d_plus, d, offset, "depth_benefit_range");
  at::NoGradGuard no_grad;
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (d_plus.is_cuda()) return kernels::depth_benefit_range_cuda(d_plus, d, offset, t_max);
#endif
  const auto f64 = d_plus.options().dtype(torch::kFloat64);
  if (d_plus.numel() == 0) return torch::full({2}, -INFINITY, f64);
  const at::Tensor l = log_benefit(d_plus, d, offset, t_max);
  return torch::stack({-l.min(), l.max()}).to(torch::kFloat64);
}

at::Tensor detail::normalised_depth_benefit(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                            const at::Tensor& range, double t_max, bool log_normalisation) {
  check_rows(d_plus, d, offset, "normalised_depth_benefit");
  TORCH_CHECK(range.numel() == 2 && range.scalar_type() == torch::kFloat64 && range.device() == d_plus.device(),
              "normalised_depth_benefit: range float64 [2] on d_plus's device");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (d_plus.is_cuda())
    return NormalisedDepthBenefitFn::apply(d_plus, BenefitConstants{d, offset, range, t_max, log_normalisation});
#endif
  const at::Tensor l = log_benefit(d_plus, d, offset, t_max);
  const at::Tensor lo = -range[0], hi = range[1];
  // All rows equal (hi <= lo): every one is the maximum. The denominators are made safe there so
  // that the branch not taken has finite values and gradients.
  const at::Tensor spread = hi > lo;
  at::Tensor eps;
  if (log_normalisation) {
    eps = (l - lo) / torch::where(spread, hi - lo, torch::ones_like(hi));
  } else {
    const at::Tensor base = torch::where(spread, (lo - hi).exp(), torch::zeros_like(hi));
    eps = ((l - hi).exp() - base) / (1 - base);
  }
  // Clamped to [0, 1]: l is in the model's precision and lo/hi in double, so the rows at the
  // minimum could otherwise land a rounding error below 0 = tau(1) and never aggregate.
  return torch::where(spread, eps.clamp(0.0, 1.0), torch::ones_like(eps));
}

at::Tensor detail::rank_normalised_depth_benefit(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                                 double t_max, RankTransport* transport) {
  check_rows(d_plus, d, offset, "rank_normalised_depth_benefit");
  at::NoGradGuard no_grad;
  const at::Tensor l = log_benefit(d_plus, d, offset, t_max).to(torch::kFloat64);
  at::Tensor all = l;
  if (transport && transport->size() > 1) {
    // Every rank's l on every rank: each writes its rows at its offset into zeros, the ranks sum
    // (x + 0 == x: exact).
    at::Tensor counts = torch::zeros({transport->size()}, l.options());
    counts[transport->rank()] = double(l.numel());
    transport->allreduce(counts, RankTransport::Op::Sum);
    const at::Tensor host = counts.cpu();
    const std::vector<double> c(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
    int64_t before = 0, total = 0;
    for (int p = 0; p < int(c.size()); ++p) {
      if (p < transport->rank()) before += int64_t(c[size_t(p)]);
      total += int64_t(c[size_t(p)]);
    }
    all = torch::zeros({total}, l.options());
    all.slice(0, before, before + l.numel()).copy_(l);
    transport->allreduce(all, RankTransport::Op::Sum);
  }
  const int64_t N = all.numel();
  if (N <= 1) return torch::ones_like(d_plus);
  const at::Tensor sorted = std::get<0>(all.sort());
  const at::Tensor below = torch::searchsorted(sorted, l, /*out_int32=*/false, /*right=*/false);
  const at::Tensor upto = torch::searchsorted(sorted, l, /*out_int32=*/false, /*right=*/true);
  const at::Tensor mid = below.to(torch::kFloat64) + (upto - below - 1).to(torch::kFloat64) / 2;
  return (mid / double(N - 1)).to(d_plus.scalar_type());
}

}  // namespace adgnn
