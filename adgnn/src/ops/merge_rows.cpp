// A deeper layer's output from its computed rows and the previous output (surrogate.h).
#include <torch/torch.h>

#include "ops/kernels.h"
#include "depth/surrogate.h"

namespace adgnn {

#ifdef ADGNN_HAVE_CUDA_KERNELS
namespace {
class MergeRowsFn : public torch::autograd::Function<MergeRowsFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& prev, const at::Tensor& upd,
                            const at::Tensor& pos, const at::Tensor& active) {
    ctx->save_for_backward({pos, active});
    ctx->saved_data["upd_rows"] = upd.size(0);
    return kernels::merge_rows_cuda(prev.contiguous(), upd.contiguous(), pos, active);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [grad_prev, grad_upd] =
        kernels::merge_rows_backward_cuda(grads[0].contiguous(), saved[0], saved[1], ctx->saved_data["upd_rows"].toInt(),
                                          ctx->needs_input_grad(0), ctx->needs_input_grad(1));
    return {grad_prev, grad_upd, at::Tensor(), at::Tensor()};
  }
};
}  // namespace
#endif

at::Tensor detail::merge_rows(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos,
                              const at::Tensor& active) {
  TORCH_CHECK(prev.dim() == 2 && upd.dim() == 2 && pos.numel() == prev.size(0) && active.numel() == prev.size(0) &&
                  pos.scalar_type() == torch::kInt32 && active.scalar_type() == torch::kBool,
              "merge_rows: prev [n, w], upd [m, w], int32 pos and bool active with n entries");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (prev.is_cuda()) return MergeRowsFn::apply(prev, upd, pos.contiguous(), active.contiguous());
#endif
  const at::Tensor rows = active.nonzero().squeeze(1);
  return prev.index_put({rows}, upd.index_select(0, pos.index_select(0, rows).to(torch::kInt64)));
}

at::Tensor detail::band_diff(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos,
                             const at::Tensor& band_rows, const at::Tensor& bias, bool relu) {
  TORCH_CHECK(pos.numel() == prev.size(0) && pos.scalar_type() == torch::kInt32,
              "band_diff: int32 pos with one entry per row of prev");
  TORCH_CHECK(!bias.defined() || bias.numel() == prev.size(1), "band_diff: bias must have one value per column");
  at::NoGradGuard no_grad;
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (prev.is_cuda())
    return kernels::band_diff_cuda(prev.detach().contiguous(), upd.detach().contiguous(), pos.contiguous(),
                                   band_rows.contiguous(),
                                   bias.defined() ? bias.detach().reshape({-1}).contiguous() : at::Tensor(), relu);
#endif
  at::Tensor p = prev.detach().index_select(0, band_rows);
  if (bias.defined()) p = p + bias.detach().reshape({-1});
  if (relu) p = torch::relu(p);
  return upd.detach().index_select(0, pos.index_select(0, band_rows).to(torch::kInt64)) - p;
}

}  // namespace adgnn
