// The training loss over chosen rows (cross_entropy_sum, adgnn/ops.h).
#include <torch/torch.h>

#include "adgnn/ops.h"
#include "ops/kernels.h"

namespace adgnn {

#ifdef ADGNN_HAVE_CUDA_KERNELS
namespace {

// cross_entropy_sum on the GPU: the per-row log-sum-exp kept for the backward.
class CrossEntropyRowsFn : public torch::autograd::Function<CrossEntropyRowsFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& rows,
                            const at::Tensor& labels, double scale) {
    const kernels::CrossEntropyRows ce = kernels::cross_entropy_rows_cuda(logits, rows, labels, scale);
    ctx->save_for_backward({logits, rows, labels, ce.lse});
    ctx->saved_data["scale"] = scale;
    return ce.loss.sum();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    return {kernels::cross_entropy_rows_backward_cuda(s[0], s[1], s[2], s[3], grads[0], scale), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace
#endif

at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& rows, const at::Tensor& labels,
                             double scale) {
  TORCH_CHECK(logits.dim() == 2 && rows.dim() == 1 && labels.sizes() == rows.sizes(),
              "cross_entropy_sum: logits [n, C] and one label per row of `rows`");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (logits.is_cuda()) return CrossEntropyRowsFn::apply(logits, rows, labels, scale);
#endif
  // -log_softmax(z)[y] picked with gather: torch's nll_loss reduction runs its CUDA kernel in a
  // single block (slow for hundreds of thousands of rows); gather and sum do not.
  const at::Tensor lp = torch::log_softmax(logits.index_select(0, rows), 1);
  const at::Tensor sum = -lp.gather(1, labels.unsqueeze(1)).sum();
  return scale == 1.0 ? sum : sum * scale;
}

}  // namespace adgnn
