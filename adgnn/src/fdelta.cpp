// f_delta, the learned variant's same-label probability (method.md): a logit per CSR entry from
// MLP([z_u * z_v, |z_u - z_v|]). Its input is symmetric in u and v (the products and absolute
// differences are the same bits either way round), so an edge stored in both directions is
// evaluated once, on its entry with row <= column, and the other entry reads that logit. The MLP
// is one autograd function so that its matrix products can run in TF32 (forward and backward)
// while the rest of the model stays in float32.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "csr_cache.h"
#include "kernels.h"
#include "layers.h"

namespace adgnn {

namespace kernels {

at::Tensor pair_features_cpu(const at::Tensor& row, const at::Tensor& col, const at::Tensor& z_in) {
  const at::Tensor z = z_in.contiguous();
  const int64_t P = row.numel(), F = z.size(1);
  at::Tensor out = at::empty({P, 2 * F}, z.options());
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "pair_features_cpu", [&] {
    const int32_t* r = row.data_ptr<int32_t>();
    const int32_t* c = col.data_ptr<int32_t>();
    const scalar_t* zp = z.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, P, 2048, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const scalar_t* a = zp + int64_t(r[p]) * F;
        const scalar_t* b = zp + int64_t(c[p]) * F;
        scalar_t* prod = o + p * 2 * F;
        scalar_t* diff = prod + F;
        for (int64_t k = 0; k < F; ++k) {
          prod[k] = a[k] * b[k];
          diff[k] = std::abs(a[k] - b[k]);
        }
      }
    });
  });
  return out;
}

std::pair<at::Tensor, at::Tensor> pair_features_backward_cpu(const at::Tensor& row, const at::Tensor& col,
                                                             const at::Tensor& z_in, const at::Tensor& grad_in) {
  const at::Tensor z = z_in.contiguous(), grad = grad_in.contiguous();
  const int64_t P = row.numel(), F = z.size(1);
  at::Tensor grad_row = at::empty({P, F}, z.options()), grad_col = at::empty({P, F}, z.options());
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "pair_features_backward_cpu", [&] {
    const int32_t* r = row.data_ptr<int32_t>();
    const int32_t* c = col.data_ptr<int32_t>();
    const scalar_t* zp = z.data_ptr<scalar_t>();
    const scalar_t* gp = grad.data_ptr<scalar_t>();
    scalar_t* gr = grad_row.data_ptr<scalar_t>();
    scalar_t* gc = grad_col.data_ptr<scalar_t>();
    at::parallel_for(0, P, 2048, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const scalar_t* a = zp + int64_t(r[p]) * F;
        const scalar_t* b = zp + int64_t(c[p]) * F;
        const scalar_t* gm = gp + p * 2 * F;
        const scalar_t* gd = gm + F;
        for (int64_t k = 0; k < F; ++k) {
          const scalar_t d = a[k] - b[k];
          const scalar_t s = scalar_t((d > 0) - (d < 0));
          gr[p * F + k] = gm[k] * b[k] + gd[k] * s;
          gc[p * F + k] = gm[k] * a[k] - gd[k] * s;
        }
      }
    });
  });
  return {grad_row, grad_col};
}

FDeltaHiddenGrad fdelta_hidden_grad_cpu(const at::Tensor& g_in, const at::Tensor& w2_in, const at::Tensor& hidden_in) {
  const at::Tensor g = g_in.contiguous(), w2 = w2_in.contiguous(), hidden = hidden_in.contiguous();
  const int64_t P = hidden.size(0), H = hidden.size(1);
  at::Tensor out = at::empty_like(hidden);
  AT_DISPATCH_FLOATING_TYPES(hidden.scalar_type(), "fdelta_hidden_grad_cpu", [&] {
    const scalar_t* gp = g.data_ptr<scalar_t>();
    const scalar_t* w = w2.data_ptr<scalar_t>();
    const scalar_t* h = hidden.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, P, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        for (int64_t k = 0; k < H; ++k) o[p * H + k] = h[p * H + k] > 0 ? gp[p] * w[k] : scalar_t(0);
    });
  });
  return {out, out.sum(0), at::mv(hidden.clamp_min(0).t(), g)};
}

}  // namespace kernels

namespace {

// The pairs f_delta evaluates, as a CSR over the graph's rows (a subset of its entries, in CSR
// order): every entry with row <= column, and every entry whose mirror is not in the CSR (a
// directed edge, or a rank's halo column, whose row lives on another rank). entry_pair maps
// each of the graph's entries to its pair.
struct PairList {
  at::Tensor rowptr;      // int64 [num_rows + 1]
  at::Tensor row, col;    // int32 [P]
  at::Tensor entry_pair;  // int64 [E]
};

PairList make_pairs(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src) {
  const int64_t n = rowptr.numel() - 1, E = col.numel();
  const auto opts = rowptr.options();
  PairList p;
  if (E == 0) {
    p.rowptr = torch::zeros({n + 1}, opts);
    p.row = torch::empty({0}, col.options());
    p.col = torch::empty({0}, col.options());
    p.entry_pair = torch::empty({0}, opts);
    return p;
  }
  const detail::CsrMirrors m = detail::csr_mirrors(rowptr, col, num_src);
  const at::Tensor& rows = m.row;
  const at::Tensor cols = col.to(torch::kInt64);
  const at::Tensor keep = (m.mirror < 0) | (rows <= cols);
  // An entry not kept has row > column and a mirror (row < column: kept) that it reads.
  const at::Tensor rep = torch::where(keep, torch::arange(E, opts), m.mirror);
  const at::Tensor pair_of = keep.to(torch::kInt64).cumsum(0) - 1;
  p.entry_pair = pair_of.index_select(0, rep);
  const at::Tensor kept = keep.nonzero().squeeze(1);
  const at::Tensor kept_rows = rows.index_select(0, kept);
  p.row = kept_rows.to(torch::kInt32);
  p.col = col.index_select(0, kept);
  const at::Tensor counts = torch::zeros({n}, opts).index_add_(0, kept_rows, torch::ones_like(kept_rows));
  p.rowptr = torch::cat({torch::zeros({1}, opts), counts.cumsum(0)});
  return p;
}

PairList cached_pairs(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src) {
  static detail::CsrCache<PairList> cache;
  return cache.get(rowptr, col, num_src, [&] { return make_pairs(rowptr, col, num_src); });
}

// [z_r * z_c, |z_r - z_c|] per pair. Backward: each pair's two gradient rows, summed per row of
// z over the pairs' rows and (the transpose) columns in a fixed order.
class PairInputFn : public torch::autograd::Function<PairInputFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rowptr,
                            const at::Tensor& row, const at::Tensor& col, const at::Tensor& z) {
    ctx->save_for_backward({rowptr, row, col, z});
    if (z.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      return kernels::pair_features_cuda(row, col, z);
#else
      TORCH_CHECK(false, "f_delta: this build has no CUDA kernels");
#endif
    }
    return kernels::pair_features_cpu(row, col, z);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &rowptr = saved[0], &row = saved[1], &col = saved[2], &z = saved[3];
    std::pair<at::Tensor, at::Tensor> parts;
    if (z.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      parts = kernels::pair_features_backward_cuda(row, col, z, grads[0]);
#endif
    } else {
      parts = kernels::pair_features_backward_cpu(row, col, z, grads[0]);
    }
    const int64_t num_src = z.size(0);
    at::Tensor grad_z = detail::sum_over_entries(rowptr, col, parts.first, num_src, false);
    grad_z.add_(detail::sum_over_entries(rowptr, col, parts.second, num_src, true));
    return {at::Tensor(), at::Tensor(), at::Tensor(), grad_z};
  }
};

// While one lives, cuBLAS may run float32 matrix products in TF32 (when on is true); restores
// the previous setting after.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : on_(on) {
    if (!on_) return;
    at::Context& c = at::globalContext();
    previous_ = c.float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL);
    c.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL, at::Float32Precision::TF32);
  }
  ~Tf32Scope() {
    if (on_) at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL, previous_);
  }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool on_;
  at::Float32Precision previous_ = at::Float32Precision::NONE;
};

// logit = relu(x w1 + b1) w2 + b2, [P]. Keeps x and the hidden layer for the backward: on the
// GPU before the relu (one kernel reads it for the output layer, v48: no relu pass writing it
// again, no matrix-vector products forward and backward), on the CPU after it.
class FDeltaMlpFn : public torch::autograd::Function<FDeltaMlpFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w1,
                            const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2, bool tf32) {
    const bool use_tf32 = tf32 && x.is_cuda() && x.scalar_type() == torch::kFloat32;
    Tf32Scope scope(use_tf32);
    at::Tensor hidden = at::addmm(b1, x, w1);
    at::Tensor logit;
    if (hidden.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      logit = kernels::fdelta_relu_dot_cuda(hidden, w2.view({-1}), b2);
#endif
    } else {
      hidden.relu_();
      logit = at::addmm(b2, hidden, w2).squeeze(1);
    }
    ctx->save_for_backward({x, w1, w2, hidden});
    ctx->saved_data["tf32"] = use_tf32;
    return logit;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w1 = saved[1], &hidden = saved[3];
    const at::Tensor w2 = saved[2].view({-1});
    Tf32Scope scope(ctx->saved_data["tf32"].toBool());
    const at::Tensor g = grads[0].contiguous();  // [P]
    kernels::FDeltaHiddenGrad hg;
    if (hidden.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      hg = kernels::fdelta_hidden_grad_cuda(g, w2, hidden);
#endif
    } else {
      hg = kernels::fdelta_hidden_grad_cpu(g, w2, hidden);
    }
    at::Tensor gx, gw1, gb1, gw2, gb2;
    if (ctx->needs_input_grad(3)) gw2 = hg.w2.view({-1, 1});
    if (ctx->needs_input_grad(4)) gb2 = g.sum().view({1});
    if (ctx->needs_input_grad(1)) gw1 = at::mm(x.t(), hg.out);
    if (ctx->needs_input_grad(2)) gb1 = hg.b1;
    if (ctx->needs_input_grad(0)) gx = at::mm(hg.out, w1.t());
    return {gx, gw1, gb1, gw2, gb2, at::Tensor()};
  }
};

}  // namespace

namespace detail {

at::Tensor fdelta_entry_logits(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& z,
                               const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                               const at::Tensor& b2, bool tf32) {
  TORCH_CHECK(rowptr.scalar_type() == torch::kInt64 && col.scalar_type() == torch::kInt32,
              "f_delta: rowptr must be int64 and col int32");
  TORCH_CHECK(z.dim() == 2 && z.size(0) >= rowptr.numel() - 1 && w1.size(0) == 2 * z.size(1),
              "f_delta: z must be [source rows, H] and w1 [2H, H']");
  const PairList p = cached_pairs(rowptr.contiguous(), col.contiguous(), z.size(0));
  const at::Tensor x = PairInputFn::apply(p.rowptr, p.row, p.col, z);
  return FDeltaMlpFn::apply(x, w1, b1, w2, b2, tf32).index_select(0, p.entry_pair);
}

}  // namespace detail
}  // namespace adgnn
