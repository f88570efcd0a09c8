// The dense layers' products with their fused epilogues and backward passes (ops/linear.h).
#include <ATen/OpMathType.h>
#include <torch/torch.h>

#include <utility>

#include "ops/kernels.h"
#include "ops/linear.h"
#include "ops/rows_with_room.h"

namespace adgnn::detail {

at::Tensor column_sums(const at::Tensor& x) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (x.is_cuda() && x.dim() == 2) return kernels::column_sums_cuda(x);
#endif
  return x.sum(0, false, at::toOpMathType(x.scalar_type()));
}

std::pair<at::Tensor, at::Tensor> relu_grad_column_sums(const at::Tensor& g, const at::Tensor& out, double scale) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (g.is_cuda() && g.dim() == 2) return kernels::relu_grad_column_sums_cuda(g, out, scale);
#endif
  // (g * scale, then masked: the rounding of the separate dropout's backward, then the ReLU's.)
  const at::Tensor masked = at::threshold_backward(scale == 1 ? g : g * scale, out, 0);
  return {masked, masked.sum(0, false, at::toOpMathType(masked.scalar_type()))};
}

namespace {

// The products' part of the backward, from the gradient before the ReLU (g) and its column sums
// (gb): x's and w's gradients (x's with x's shape, the product in its leading rows) and b's.
torch::autograd::variable_list linear_backward(torch::autograd::AutogradContext* ctx, const at::Tensor& g,
                                               const at::Tensor& gb) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor &x = saved[0], &w = saved[1];
  at::Tensor gx, gw;
#ifdef ADGNN_HAVE_CUDA_KERNELS
  // A few rows: our kernels, not cuBLAS (its host time per call; kernels.h).
  const bool small = kernels::small_linear_applies(x, w) && g.is_contiguous();
#else
  const bool small = false;
#endif
  if (ctx->needs_input_grad(0)) {
    const int64_t x_rows = ctx->saved_data["x_rows"].toInt(), rows = x.size(0);
    gx = at::empty({x_rows, x.size(1)}, g.options());
    at::Tensor lead = rows == x_rows ? gx : gx.narrow(0, 0, rows);
#ifdef ADGNN_HAVE_CUDA_KERNELS
    if (small) kernels::small_linear_grad_x_cuda(g, w, lead);
#endif
    if (!small) at::mm_out(lead, g, w.t());
    if (rows != x_rows) gx.narrow(0, rows, x_rows - rows).zero_();
  }
  if (ctx->needs_input_grad(1)) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
    if (small) gw = kernels::small_linear_grad_w_cuda(x, g);
#endif
    if (!small) gw = at::mm(x.t(), g);
  }
  return {gx, gw, ctx->needs_input_grad(2) ? gb : at::Tensor()};
}

// relu(addmm(b, x[:rows], w)) as cuBLASLt's bias + ReLU epilogue on the GPU (ATen's elsewhere).
at::Tensor addmm_relu(const at::Tensor& b, const at::Tensor& xr, const at::Tensor& w) {
  return at::_addmm_activation(b, xr, w, 1, 1, /*use_gelu=*/false);
}

// addmm(b, x[:rows], w), with relu: followed by a ReLU (cuBLASLt's bias + ReLU epilogue on the
// GPU). The backward's bias gradient is column_sums (through the ReLU: relu_grad_column_sums, one
// pass); x's gradient has x's shape, the product written into its leading rows.
class LinearFn : public torch::autograd::Function<LinearFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& bias, bool relu, int64_t rows, int64_t room) {
    const at::Tensor xr = rows == x.size(0) ? x : x.narrow(0, 0, rows);
    const at::Tensor b = like(bias, x);
    at::Tensor out;
    if (room >= 0) {  // written into a buffer with room for `room` rows after it (halo.h)
      out = rows_with_room(rows, w.size(1), room, xr.options());
      if (relu) at::_addmm_activation_out(out, b, xr, w, 1, 1, /*use_gelu=*/false);
      else at::addmm_out(out, b, xr, w);
    } else {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      out = kernels::small_linear_applies(xr, w) ? kernels::small_linear_cuda(xr, w, b, relu)
            : relu                               ? addmm_relu(b, xr, w)
                                                 : at::addmm(b, xr, w);
#else
      out = relu ? addmm_relu(b, xr, w) : at::addmm(b, xr, w);
#endif
    }
    ctx->save_for_backward({xr, w, relu ? out : at::Tensor()});
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["x_rows"] = x.size(0);
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // The gradient before the ReLU (if any) and its column sums.
    const auto [g, gb] = ctx->saved_data["relu"].toBool()
                             ? relu_grad_column_sums(grads[0], ctx->get_saved_variables()[2])
                             : std::make_pair(grads[0], column_sums(grads[0]));
    auto out = linear_backward(ctx, g, gb);
    out.resize(6);
    return out;
  }
};

// linear_relu_dropout: saves the dropped output (not the output) for the backward's mask.
class LinearReluDropoutFn : public torch::autograd::Function<LinearReluDropoutFn> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& w, const at::Tensor& bias, int64_t rows,
                                                const at::Tensor& gid, int64_t key, int64_t threshold,
                                                double scale) {
    const at::Tensor xr = rows == x.size(0) ? x : x.narrow(0, 0, rows);
    const at::Tensor out = addmm_relu(like(bias, x), xr, w);
    const at::Tensor dropped =
        apply_dropout_mask(out, DropoutMask{gid, uint64_t(key), uint64_t(threshold), float(scale)});
    ctx->save_for_backward({xr, w, dropped});
    ctx->set_materialize_grads(false);  // `out` has none: no zero-filled [rows, cols] for it
    ctx->saved_data["x_rows"] = x.size(0);
    ctx->saved_data["scale"] = scale;  // the mask's float factor, as the forward applied it
    ctx->mark_non_differentiable({out});
    return {dropped, out};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (!grads[0].defined()) return torch::autograd::variable_list(8);
    const auto [g, gb] =
        relu_grad_column_sums(grads[0], ctx->get_saved_variables()[2], ctx->saved_data["scale"].toDouble());
    auto out = linear_backward(ctx, g, gb);
    out.resize(8);
    return out;
  }
};

// x + b (b: one value per column) whose backward sums b's gradient with column_sums: ATen's sum
// over the rows is slow even for GCN's narrow classifier gradient ([169k, 40] on arxiv-scale).
class BiasAddFn : public torch::autograd::Function<BiasAddFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x, const at::Tensor& b) {
    return x + like(b, x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], ctx->needs_input_grad(1) ? column_sums(grads[0]) : at::Tensor()};
  }
};

int64_t leading_rows(const at::Tensor& x, int64_t rows) {
  TORCH_CHECK(rows <= x.size(0), "linear: ", rows, " leading rows of a ", x.size(0), "-row input");
  return rows < 0 ? x.size(0) : rows;
}

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows, int64_t room) {
  return LinearFn::apply(x, like(w, x), b, false, leading_rows(x, rows), room);
}

at::Tensor linear_relu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows, int64_t room) {
  return LinearFn::apply(x, like(w, x), b, true, leading_rows(x, rows), room);
}

std::pair<at::Tensor, at::Tensor> linear_relu_dropout(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                      int64_t rows, const DropoutMask& mask) {
  const int64_t r = leading_rows(x, rows);
  TORCH_CHECK(mask.gid.numel() == r, "linear_relu_dropout: one global id per output row");
  // The 64-bit key and threshold travel through autograd's int64 slots bit for bit.
  const auto out = LinearReluDropoutFn::apply(x, like(w, x), b, r, mask.gid, int64_t(mask.key),
                                              int64_t(mask.threshold), double(mask.scale));
  return {out[0], out[1]};
}

at::Tensor like(const at::Tensor& p, const at::Tensor& x) {
  return !p.defined() || p.scalar_type() == x.scalar_type() ? p : p.to(x.scalar_type());
}

at::Tensor bias_add(const at::Tensor& x, const at::Tensor& b) { return BiasAddFn::apply(x, b); }

}  // namespace adgnn::detail
