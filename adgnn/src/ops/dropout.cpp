// Counter-based dropout (dropout_rows, gnn.h): the mask is a function of (seed, epoch, layer,
// global id, column), computed where it is applied, never stored.
#include <ATen/OpMathType.h>
#include <torch/torch.h>

#include <limits>
#include <utility>

#include "adgnn/ops.h"
#include "ops/grad_in_place.h"
#include "ops/kernels.h"
#include "ops/dropout.h"

namespace adgnn {

namespace {

// h * mask with the mask computed in place (forward and, for the gradient, again in backward):
// storing a [rows, cols] mask cost a write, two reads and its memory at every layer.
// row_flags (uint8 per row, undefined: every row): rows flagged 0 are read by nobody. The forward
// leaves them unset (CUDA: unwritten; CPU: NaN, so that a read shows in the tests), the gradient
// is zero there. accumulate_into (a gradient: contiguous, h's shape): the flagged rows' result is
// added to it in place, the other rows keep their values, and it is returned.
at::Tensor apply_mask(const at::Tensor& h, const at::Tensor& gid, uint64_t key, uint64_t threshold,
                      float keep_scale, const at::Tensor& flags_or_empty, bool gradient,
                      const at::Tensor& accumulate_into = {}) {
  const at::Tensor row_flags = flags_or_empty.numel() > 0 ? flags_or_empty : at::Tensor();
  const bool accumulate = accumulate_into.defined();
  if (h.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
    return kernels::dropout_apply_cuda(h, gid, key, threshold, keep_scale, row_flags, gradient && !accumulate,
                                       accumulate_into);
#else
    TORCH_CHECK(false, "dropout on CUDA needs the CUDA kernels (configure with -DADGNN_CUDA=ON)");
#endif
  }
  using kernels::mix64;
  const at::Tensor x = h.contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  TORCH_CHECK(!accumulate || (accumulate_into.is_contiguous() && accumulate_into.sizes() == x.sizes() &&
                              accumulate_into.scalar_type() == x.scalar_type()),
              "dropout: accumulate into a contiguous tensor of the input's shape and type");
  at::Tensor out = accumulate ? accumulate_into : torch::empty_like(x);
  const int64_t* g = gid.data_ptr<int64_t>();
  const at::Tensor flags_c = row_flags.defined() ? row_flags.contiguous() : at::Tensor();
  const uint8_t* flags = flags_c.defined() ? flags_c.data_ptr<uint8_t>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "dropout_rows", [&] {
    using A = at::opmath_type<scalar_t>;  // bfloat16: the product in float32, rounded once
    const scalar_t* in = x.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const auto scale = static_cast<A>(keep_scale);
    const auto unread = gradient ? scalar_t(0) : std::numeric_limits<scalar_t>::quiet_NaN();
    at::parallel_for(0, rows, 256, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        if (flags != nullptr && flags[r] == 0) {
          if (!accumulate) std::fill(o + r * cols, o + (r + 1) * cols, unread);
          continue;
        }
        const uint64_t row_key = mix64(key ^ uint64_t(g[r]));
        for (int64_t c = 0; c < cols; ++c) {
          const A kept = A(in[r * cols + c]) * (mix64(row_key + uint64_t(c)) >= threshold ? scale : A(0));
          o[r * cols + c] = scalar_t(accumulate ? A(o[r * cols + c]) + kept : kept);
        }
      }
    });
  });
  return out;
}

// h * mask, and h itself as a second output for an input that is both dropped out and used as
// it is (AD's frozen rows): the backward applies the mask to the dropped rows' gradient and, when
// the second output has one too, adds it into that in place, over the flagged rows only.
// Autograd would otherwise get a full-size gradient from the dropout (zero on the unflagged
// rows) and add the two: two more passes over every row. (dropout_rows uses the first output.)
class DropoutAndInputFn : public torch::autograd::Function<DropoutAndInputFn> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& h,
                                                const at::Tensor& gid, int64_t key, int64_t threshold,
                                                double keep_scale, const at::Tensor& row_flags) {
    detail::probe_gradient_hand_over(h.device());  // for the backward's gradient_is_exclusive
    // An output nobody used gets no gradient (not a zero-filled [rows, cols] one to add in).
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({gid, row_flags});
    ctx->saved_data["key"] = key;
    ctx->saved_data["threshold"] = threshold;
    ctx->saved_data["scale"] = keep_scale;
    return {apply_mask(h, gid, uint64_t(key), uint64_t(threshold), float(keep_scale), row_flags, false), h};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor &g_dropped = grads[0], &g_input = grads[1];
    const auto saved = ctx->get_saved_variables();
    auto mask = [&](const at::Tensor& into) {
      return apply_mask(g_dropped, saved[0], uint64_t(ctx->saved_data["key"].toInt()),
                        uint64_t(ctx->saved_data["threshold"].toInt()), float(ctx->saved_data["scale"].toDouble()),
                        saved[1], true, into);
    };
    at::Tensor g;
    if (!g_dropped.defined()) {
      g = g_input;
    } else if (!g_input.defined()) {
      g = mask({});
    } else {
      // In place when nothing else holds the input's gradient.
      g = mask(detail::gradient_is_exclusive(g_input) ? g_input : g_input.clone(at::MemoryFormat::Contiguous));
    }
    return {g, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout_rows(const at::Tensor& h, const at::Tensor& global_id, double p, uint64_t seed,
                        int64_t epoch, int64_t layer, const at::Tensor& row_flags) {
  return dropout_rows_and_input(h, global_id, p, seed, epoch, layer, row_flags).first;
}

detail::DropoutMask detail::dropout_mask(const at::Tensor& global_id, int64_t rows, c10::Device device, double p,
                                         uint64_t seed, int64_t epoch, int64_t layer) {
  using kernels::mix64;
  TORCH_CHECK(p > 0 && p < 1, "dropout must be in (0, 1)");
  DropoutMask m;
  m.key = mix64(seed ^ mix64(uint64_t(epoch) * 0x100000001b3ULL ^ mix64(uint64_t(layer))));
  m.scale = float(1.0 / (1.0 - p));
  m.threshold = uint64_t(p * 18446744073709551616.0);
  m.gid = global_id.slice(0, 0, rows).to(device).contiguous();
  return m;
}

at::Tensor detail::apply_dropout_mask(const at::Tensor& h, const DropoutMask& mask) {
  return apply_mask(h, mask.gid, mask.key, mask.threshold, mask.scale, at::Tensor(), false);
}

std::pair<at::Tensor, at::Tensor> dropout_rows_and_input(const at::Tensor& h, const at::Tensor& global_id, double p,
                                                         uint64_t seed, int64_t epoch, int64_t layer,
                                                         const at::Tensor& row_flags) {
  if (p <= 0) return {h, h};
  TORCH_CHECK(p < 1, "dropout must be below 1");
  TORCH_CHECK(!row_flags.defined() || (row_flags.scalar_type() == torch::kUInt8 && row_flags.dim() == 1 &&
                                       row_flags.numel() == h.size(0) && row_flags.device() == h.device()),
              "dropout_rows: row_flags must be uint8 with one entry per row, on h's device");
  const detail::DropoutMask m = detail::dropout_mask(global_id, h.size(0), h.device(), p, seed, epoch, layer);
  // The 64-bit key and threshold travel through autograd's int64 slots bit for bit; no flags
  // travel as an empty tensor (autograd's inputs must be defined).
  const at::Tensor flags = row_flags.defined() ? row_flags : torch::empty({0}, h.options().dtype(torch::kUInt8));
  const auto out =
      DropoutAndInputFn::apply(h, m.gid, int64_t(m.key), int64_t(m.threshold), double(m.scale), flags);
  return {out[0], out[1]};
}

}  // namespace adgnn
