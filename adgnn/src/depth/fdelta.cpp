// f_delta, the learned variant's same-label probability (method.md): a logit per CSR entry from
// MLP([z_u * z_v, |z_u - z_v|]). Its input is symmetric in u and v (the products and absolute
// differences are the same bits either way round), so an edge stored in both directions is
// evaluated once, on its entry with row <= column, and the other entry reads that logit. The
// input and the MLP are one autograd function, so that its per-pair tensors never leave it: on
// the GPU they may be stored in bfloat16 and its matrix products run in TF32 or bfloat16 while
// the rest of the model stays in float32 (--fdelta-precision).
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "graph/csr_cache.h"
#include "ops/kernels.h"
#include "ops/csr.h"
#include "depth/fdelta.h"

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
        if (p + kPrefetch < P) prefetch_row(zp + int64_t(c[p + kPrefetch]) * F, F);  // r[p]: in CSR order
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

at::Tensor pair_grad_sums_cpu(const PairGradIndex& ix, const at::Tensor& z_in, const at::Tensor& gx_in) {
  const at::Tensor z = z_in.contiguous(), gx = gx_in.contiguous().to(z.scalar_type());
  const int64_t num_src = z.size(0), F = z.size(1), rows = ix.rowptr.numel() - 1;
  at::Tensor out = at::empty({num_src, F}, z.options());
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "pair_grad_sums_cpu", [&] {
    const int64_t* prow = ix.rowptr.data_ptr<int64_t>();
    const int32_t* pcol = ix.col.data_ptr<int32_t>();
    const int64_t* trow = ix.t_rowptr.data_ptr<int64_t>();
    const int64_t* tpair = ix.t_pair.data_ptr<int64_t>();
    const int32_t* tother = ix.t_other.data_ptr<int32_t>();
    const scalar_t* zp = z.data_ptr<scalar_t>();
    const scalar_t* gp = gx.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, num_src, 512, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        scalar_t* acc = o + u * F;
        std::fill(acc, acc + F, scalar_t(0));
        const scalar_t* a = zp + u * F;
        auto add = [&](int64_t p, int64_t other) {
          const scalar_t* b = zp + other * F;
          const scalar_t* gm = gp + p * 2 * F;
          const scalar_t* gd = gm + F;
          for (int64_t k = 0; k < F; ++k) {
            const scalar_t d = a[k] - b[k];
            acc[k] += gm[k] * b[k] + gd[k] * scalar_t((d > 0) - (d < 0));
          }
        };
        if (u < rows)
          for (int64_t p = prow[u]; p < prow[u + 1]; ++p) {
            if (p + kPrefetch < prow[rows]) prefetch_row(zp + int64_t(pcol[p + kPrefetch]) * F, F);
            add(p, pcol[p]);
          }
        for (int64_t q = trow[u]; q < trow[u + 1]; ++q) {
          if (q + kPrefetch < trow[num_src]) {
            prefetch_row(zp + int64_t(tother[q + kPrefetch]) * F, F);
            prefetch_row(gp + tpair[q + kPrefetch] * 2 * F, 2 * F);
          }
          add(tpair[q], tother[q]);
        }
      }
    });
  });
  return out;
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
// directed edge, or a rank's halo column, whose row lives on another rank), with the transpose
// for the backward (index). entry_pair maps each of the graph's entries to its pair.
struct PairList {
  at::Tensor row;         // int32 [P]
  at::Tensor entry_pair;  // int64 [E]
  kernels::PairGradIndex index;
};

PairList make_pairs(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src) {
  const int64_t n = rowptr.numel() - 1, E = col.numel();
  const auto opts = rowptr.options();
  PairList p;
  kernels::PairGradIndex& ix = p.index;
  if (E == 0) {
    ix.rowptr = torch::zeros({n + 1}, opts);
    p.row = torch::empty({0}, col.options());
    ix.col = torch::empty({0}, col.options());
    p.entry_pair = torch::empty({0}, opts);
  } else {
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
    ix.col = col.index_select(0, kept);
    const at::Tensor counts = torch::zeros({n}, opts).index_add_(0, kept_rows, torch::ones_like(kept_rows));
    ix.rowptr = torch::cat({torch::zeros({1}, opts), counts.cumsum(0)});
  }
  const kernels::Transposed t = kernels::transpose_entries(ix.rowptr, ix.col, num_src);
  ix.t_rowptr = t.rowptr;
  ix.t_pair = t.entry;
  ix.t_other = t.row;
  if (rowptr.is_cuda()) {
    // Pairs per node, either way: hubs get a block each in the backward (one device wait, once).
    at::Tensor per_node = t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1);
    per_node.narrow(0, 0, n).add_(ix.rowptr.slice(0, 1) - ix.rowptr.slice(0, 0, -1));
    ix.long_nodes = (per_node >= kernels::kPairHubMin).nonzero().squeeze(1);
  }
  return p;
}

PairList cached_pairs(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src) {
  static detail::CsrCache<PairList> cache;
  return cache.get(rowptr, col, num_src, [&] { return make_pairs(rowptr, col, num_src); });
}

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

// logit[p] = relu(x[p] w1 + b1) w2 + b2 for x[p] = [z_r * z_c, |z_r - z_c|] of pair p = (r, c).
// Keeps x and the hidden layer for the backward (stored in bfloat16 with kBf16): on the GPU before
// the relu (one kernel reads it for the output layer: no relu pass writing it again, no
// matrix-vector products forward and backward), on the CPU after it. The backward sums x's
// gradient into z's rows directly, without a [P, F] gradient per end of every pair.
class FDeltaFn : public torch::autograd::Function<FDeltaFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& z, const at::Tensor& w1,
                            const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2, const PairList& pairs,
                            detail::FDeltaPrecision precision) {
    const bool gpu_float = z.is_cuda() && z.scalar_type() == torch::kFloat32;
    const bool bf16 = gpu_float && precision == detail::FDeltaPrecision::kBf16;
    const bool tf32 = gpu_float && precision == detail::FDeltaPrecision::kTf32;
    const at::ScalarType storage = bf16 ? torch::kBFloat16 : z.scalar_type();
    const kernels::PairGradIndex& ix = pairs.index;
    at::Tensor x;
    if (z.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      x = kernels::pair_features_cuda(pairs.row, ix.col, z, storage);
#else
      TORCH_CHECK(false, "f_delta: this build has no CUDA kernels");
#endif
    } else {
      x = kernels::pair_features_cpu(pairs.row, ix.col, z);
    }
    Tf32Scope scope(tf32);
    const at::Tensor w1s = w1.to(storage);
    at::Tensor hidden = at::addmm(b1.to(storage), x, w1s);
    at::Tensor logit;
    if (hidden.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      logit = kernels::fdelta_relu_dot_cuda(hidden, w2.view({-1}), b2);
#endif
    } else {
      hidden.relu_();
      logit = at::addmm(b2, hidden, w2).squeeze(1);
    }
    ctx->save_for_backward({z, x, w1s, w2, hidden});
    ctx->saved_data["tf32"] = tf32;
    ctx->saved_data["rowptr"] = ix.rowptr;
    ctx->saved_data["col"] = ix.col;
    ctx->saved_data["t_rowptr"] = ix.t_rowptr;
    ctx->saved_data["t_pair"] = ix.t_pair;
    ctx->saved_data["t_other"] = ix.t_other;
    if (ix.long_nodes.defined()) ctx->saved_data["long_nodes"] = ix.long_nodes;
    return logit;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &z = saved[0], &x = saved[1], &w1s = saved[2], &hidden = saved[4];
    const at::Tensor w2 = saved[3].view({-1});
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
    at::Tensor gz, gw1, gb1, gw2, gb2;
    if (ctx->needs_input_grad(3)) gw2 = hg.w2.view({-1, 1});
    if (ctx->needs_input_grad(4)) gb2 = g.sum().view({1});
    if (ctx->needs_input_grad(1))  // bfloat16 products summed into float32 (cuBLAS accumulates in float)
      gw1 = x.scalar_type() == z.scalar_type() ? at::mm(x.t(), hg.out) : at::mm(x.t(), hg.out, z.scalar_type());
    if (ctx->needs_input_grad(2)) gb1 = hg.b1;
    if (ctx->needs_input_grad(0)) {
      const at::Tensor gx = at::mm(hg.out, w1s.t());  // [P, 2F], stored as x
      kernels::PairGradIndex ix;
      ix.rowptr = ctx->saved_data["rowptr"].toTensor();
      ix.col = ctx->saved_data["col"].toTensor();
      ix.t_rowptr = ctx->saved_data["t_rowptr"].toTensor();
      ix.t_pair = ctx->saved_data["t_pair"].toTensor();
      ix.t_other = ctx->saved_data["t_other"].toTensor();
      if (ctx->saved_data.count("long_nodes")) ix.long_nodes = ctx->saved_data["long_nodes"].toTensor();
      if (z.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
        gz = kernels::pair_grad_sums_cuda(ix, z, gx);
#endif
      } else {
        gz = kernels::pair_grad_sums_cpu(ix, z, gx);
      }
    }
    return {gz, gw1, gb1, gw2, gb2, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace detail {

PairLogits fdelta_pair_logits(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& z,
                              const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                              FDeltaPrecision precision) {
  TORCH_CHECK(rowptr.scalar_type() == torch::kInt64 && col.scalar_type() == torch::kInt32,
              "f_delta: rowptr must be int64 and col int32");
  TORCH_CHECK(z.dim() == 2 && z.size(0) >= rowptr.numel() - 1 && w1.size(0) == 2 * z.size(1),
              "f_delta: z must be [source rows, H] and w1 [2H, H']");
  const PairList p = cached_pairs(rowptr.contiguous(), col.contiguous(), z.size(0));
  return {FDeltaFn::apply(z, w1, b1, w2, b2, p, precision), p.entry_pair};
}

at::Tensor fdelta_entry_logits(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& z,
                               const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                               const at::Tensor& b2, FDeltaPrecision precision) {
  const PairLogits p = fdelta_pair_logits(rowptr, col, z, w1, b1, w2, b2, precision);
  return p.logit.index_select(0, p.entry_pair);
}

}  // namespace detail
}  // namespace adgnn
