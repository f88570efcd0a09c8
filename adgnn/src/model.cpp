// The AD-GNN model (../shared/docs/method.md): depth benefit, stopping depths, message passing
// with per-node depth (frozen rows, self-only updates at width-changing layers) and the
// straight-through surrogate for the hard masks.
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "adgnn/gnn.h"
#include "depth_benefit.h"
#include "kernels.h"
#include "grad_in_place.h"
#include "halo.h"
#include "heuristics.h"
#include "surrogate.h"
#include "layers.h"

namespace adgnn {

using detail::Layer;

// ---- graph tensors -> message graph ---------------------------------------------------------------

namespace {

at::Tensor entry_rows(const at::Tensor& rowptr) {
  return torch::repeat_interleave(rowptr.slice(0, 1) - rowptr.slice(0, 0, -1));
}

// The edge normalisations from the degrees of the source rows, computed in float64 and stored in
// the model's precision.
void fill_weights(MessageGraph& g, c10::ScalarType dtype) {
  const at::Tensor rows = entry_rows(g.rowptr), cols = g.col.to(torch::kInt64);
  const at::Tensor inv_sqrt = (g.degree.to(torch::kFloat64) + 1).rsqrt();
  g.gcn_weight = (inv_sqrt.index_select(0, rows) * inv_sqrt.index_select(0, cols)).to(dtype);
  g.gcn_self_weight = (g.degree.to(dtype) + 1).reciprocal();  // as GcnLayer computed it per layer
  // DirGNN: PyG's gcn_norm without self-loops uses the degree at the message's target for both
  // endpoints: in-degree for incoming messages, out-degree for outgoing ones (0 -> weight 0).
  auto dir_weight = [&](const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& deg) {
    const at::Tensor d = deg.to(torch::kFloat64);
    const at::Tensor inv = torch::where(d > 0, d.rsqrt(), torch::zeros_like(d));
    return (inv.index_select(0, entry_rows(rowptr)) * inv.index_select(0, col.to(torch::kInt64))).to(dtype);
  };
  g.in_weight = dir_weight(g.in_rowptr, g.in_col, g.in_degree);
  g.out_weight = dir_weight(g.out_rowptr, g.out_col, g.out_degree);
}

// The rows `read` as a graph of their own (row i = read[i]) in which `rows` (sorted, among
// `read`) keep their entries, remapped to positions in `read`: a layer computing those few rows
// then reads a compact input of |read| rows instead of every source row. The directed CSRs only
// when `directed` (DirGNN; `read` must then hold both directions' neighbours).
MessageGraph restrict_to(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& read, bool directed) {
  MessageGraph s;
  s.num_dst = s.num_src = read.numel();
  const at::Tensor pos = torch::searchsorted(read, rows);
  auto sub = [&](const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w, at::Tensor& s_rowptr,
                 at::Tensor& s_col, at::Tensor& s_w) {
    const detail::EdgeList e = detail::edges_of_rows(rowptr, col, rows);
    const at::Tensor counts = rowptr.index_select(0, rows + 1) - rowptr.index_select(0, rows);
    s_rowptr = torch::zeros({s.num_dst + 1}, rowptr.options()).index_put_({pos + 1}, counts).cumsum(0);
    s_col = torch::searchsorted(read, e.src).to(torch::kInt32);
    if (w.defined()) s_w = w.index_select(0, e.edge);
  };
  sub(g.rowptr, g.col, g.gcn_weight, s.rowptr, s.col, s.gcn_weight);
  if (directed) {
    sub(g.in_rowptr, g.in_col, g.in_weight, s.in_rowptr, s.in_col, s.in_weight);
    sub(g.out_rowptr, g.out_col, g.out_weight, s.out_rowptr, s.out_col, s.out_weight);
    s.in_degree = g.in_degree.index_select(0, read);
    s.out_degree = g.out_degree.index_select(0, read);
  }
  s.degree = g.degree.index_select(0, read);
  if (g.gcn_self_weight.defined()) s.gcn_self_weight = g.gcn_self_weight.index_select(0, read);
  s.global_id = g.global_id.index_select(0, read);
  s.max_degree_product = g.max_degree_product;
  return s;
}

// A rank's graph for layers >= 2 when those read only `rows` of its halo rows (bool mask,
// `count` of them): the same owned rows and CSR entries, the source rows [owned; those halo rows]
// (docs/distributed.md). Columns of other halo rows, which no computed row reads, point at row 0.
// halo_pos: each halo row's position among the kept ones, -1 for the others. The directed CSRs
// only when `directed` (DirGNN; the others' directed columns, 2 x 31 M entries per rank of
// products-scale, are not remapped and not kept). computed_rows (defined, undirected): the only
// rows those layers compute, with `computed_entries` CSR entries; the columns of the other rows
// point at row 0 too: a gather over the few rows' entries instead of every entry's (31 M per rank
// of products-scale).
MessageGraph compact_halo_graph(const MessageGraph& g, const at::Tensor& rows, int64_t count, bool directed,
                                at::Tensor& halo_pos, const at::Tensor& computed_rows, int64_t computed_entries) {
  const int64_t n = g.num_dst;
  const auto idx = g.rowptr.options();
  const at::Tensor kept = torch::nonzero_static(rows, count).squeeze(1);  // size known: no wait
  halo_pos = torch::full({g.num_halo()}, -1, idx).index_put_({kept}, torch::arange(count, idx));
  const at::Tensor column = torch::cat({torch::arange(n, idx), torch::where(halo_pos >= 0, halo_pos + n, 0)});
  // One gather over every CSR entry in the columns' own type (int32): converting them to int64
  // and back would cost two more passes over them.
  auto remap = [&](const at::Tensor& col) {
    return col.defined() ? column.to(col.scalar_type()).index_select(0, col) : col;
  };
  const at::Tensor source = torch::cat({torch::arange(n, idx), kept + n});
  auto rows_of = [&](const at::Tensor& v) { return v.defined() ? v.index_select(0, source) : v; };
  MessageGraph c = g;
  c.num_src = n + count;
  if (computed_rows.defined() && !directed) {
    const detail::EdgeList e = detail::edges_of_rows(g.rowptr, g.col, computed_rows, computed_entries);
    c.col = torch::zeros_like(g.col).index_put_({e.edge}, column.index_select(0, e.src).to(g.col.scalar_type()));
  } else {
    c.col = remap(g.col);
  }
  if (directed) {
    c.in_col = remap(g.in_col);
    c.out_col = remap(g.out_col);
  } else {
    c.in_rowptr = c.in_col = c.in_weight = c.out_rowptr = c.out_col = c.out_weight = at::Tensor();
  }
  c.degree = rows_of(g.degree);
  c.gcn_self_weight = rows_of(g.gcn_self_weight);
  c.in_degree = rows_of(g.in_degree);
  c.out_degree = rows_of(g.out_degree);
  c.global_id = rows_of(g.global_id);
  // The halo bookkeeping stays the full graph's (HaloPass reads it from g).
  return c;
}

template <typename T>
at::Tensor vec_tensor(const std::vector<T>& v, c10::ScalarType type) {
  return torch::from_blob(const_cast<T*>(v.data()), {int64_t(v.size())}, type).clone();
}

}  // namespace

MessageGraph message_graph(const GraphTensors& t, c10::ScalarType dtype) {
  MessageGraph g;
  g.num_dst = g.num_src = t.num_nodes;
  g.rowptr = t.rowptr;
  g.col = t.col;
  g.out_rowptr = t.out_rowptr;
  g.out_col = t.out_col;
  g.in_rowptr = t.in_rowptr;
  g.in_col = t.in_col;
  g.degree = t.degree;
  g.in_degree = (t.in_rowptr.slice(0, 1) - t.in_rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  g.out_degree = (t.out_rowptr.slice(0, 1) - t.out_rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  g.global_id = torch::arange(t.num_nodes, t.rowptr.options());
  fill_weights(g, dtype);
  const at::Tensor rows = entry_rows(g.rowptr), cols = g.col.to(torch::kInt64);
  g.max_degree_product =
      g.col.numel() ? (g.degree.index_select(0, rows) * g.degree.index_select(0, cols)).max()
                    : torch::ones({}, g.degree.options());
  return g;
}

PartTensors part_tensors(const GraphPart& part, c10::Device device, c10::ScalarType dtype) {
  PartTensors pt;
  MessageGraph& g = pt.graph;
  g.num_dst = part.num_owned;
  g.num_src = int64_t(part.global_id.size());
  auto csr = [&](const Csr& c, at::Tensor& rowptr, at::Tensor& col) {
    rowptr = vec_tensor(c.indptr, torch::kInt64).to(device);
    col = vec_tensor(c.indices, torch::kInt32).to(device);
  };
  csr(part.sym, g.rowptr, g.col);
  csr(part.out, g.out_rowptr, g.out_col);
  csr(part.in, g.in_rowptr, g.in_col);
  g.degree = vec_tensor(part.degree, torch::kInt64).to(device, torch::kFloat32);
  g.in_degree = vec_tensor(part.in_degree, torch::kInt64).to(device, torch::kFloat32);
  g.out_degree = vec_tensor(part.out_degree, torch::kInt64).to(device, torch::kFloat32);
  g.global_id = vec_tensor(part.global_id, torch::kInt64).to(device);
  g.max_degree_product = torch::full({}, part.max_degree_product, torch::dtype(torch::kFloat32).device(device));
  fill_weights(g, dtype);
  for (int32_t p = 0; p < part.parts; ++p)
    g.send_rows.push_back(vec_tensor(part.send[size_t(p)], torch::kInt64).to(device));
  g.recv_offset = part.recv_offset;
  g.halo_owner = vec_tensor(part.halo_owner, torch::kInt32).to(device, torch::kInt64);
  const at::Tensor rows = entry_rows(g.rowptr), cols = g.col.to(torch::kInt64);
  const at::Tensor bnd = (cols >= g.num_dst).nonzero().squeeze(1);
  g.boundary_row = rows.index_select(0, bnd);
  g.boundary_halo = cols.index_select(0, bnd) - g.num_dst;
  // Dense features are copied once, straight from the part (to_dense would copy them twice).
  const std::vector<float> densified = part.features.sparse ? part.features.to_dense() : std::vector<float>();
  const float* dense = part.features.sparse ? densified.data() : part.features.dense.data();
  pt.x = torch::from_blob(const_cast<float*>(dense), {g.num_src, part.features.cols}, torch::kFloat32)
             .clone()
             .to(device);
  pt.y = vec_tensor(part.labels, torch::kInt64).to(device);
  return pt;
}

// ---- counter-based dropout ----------------------------------------------------------------------

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
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dropout_rows", [&] {
    const scalar_t* in = x.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const auto scale = static_cast<scalar_t>(keep_scale);
    const auto unread = gradient ? scalar_t(0) : std::numeric_limits<scalar_t>::quiet_NaN();
    at::parallel_for(0, rows, 256, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        if (flags != nullptr && flags[r] == 0) {
          if (!accumulate) std::fill(o + r * cols, o + (r + 1) * cols, unread);
          continue;
        }
        const uint64_t row_key = mix64(key ^ uint64_t(g[r]));
        for (int64_t c = 0; c < cols; ++c) {
          const scalar_t kept = in[r * cols + c] * (mix64(row_key + uint64_t(c)) >= threshold ? scale : scalar_t(0));
          o[r * cols + c] = accumulate ? o[r * cols + c] + kept : kept;
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
  if (eps.is_cuda() && eps.scalar_type() == grad.scalar_type() && tau_t.scalar_type() == eps.scalar_type()) {
    const kernels::BandTermGrads k = kernels::band_term_grads_cuda(eps, tau_t, band_rows, grad, diff, kappa,
                                                                   of_band_rows, ctx->needs_input_grad(eps_input));
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

namespace {

// The second stream of a rank's halo plan, one per device for the process: the caching
// allocator keeps freed blocks per stream, so a new pool stream each step would leave each of the
// pool's 32 streams a cache of the plan's buffers. High priority: the counts it computes are what
// the host waits for, while layer 1 fills the device.
c10::Stream halo_plan_stream(c10::Device device) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, c10::Stream> streams;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(int(device.type()), int(device.index()));
  auto it = streams.find(key);
  if (it == streams.end())
    it = streams
             .emplace(key, c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device, /*isHighPriority=*/true))
             .first;
  return it->second;
}

}  // namespace

// ---- the model -----------------------------------------------------------------------------------

struct Model::Impl {
  ModelConfig cfg;
  std::vector<std::unique_ptr<Layer>> layers;
  // BatchNorm after hidden layer t (t = 0..L-2): weight, bias; running mean, var.
  std::vector<at::Tensor> bn_weight, bn_bias, bn_mean, bn_var;
  at::Tensor theta_a;  // a_2..a_L
  at::Tensor fd_w1, fd_b1, fd_w2, fd_b2;  // f_delta: 2H -> H -> 1
  // AD#: log beta and log gamma per degree bucket floor(log2(d + 1)), from the previous training
  // forward pass (buffers: checkpointed, so a resumed run continues with the same estimates).
  static constexpr int64_t kBuckets = 32;
  at::Tensor sharp_log_beta, sharp_log_gamma;
  // d+ of a non-degree same-label heuristic: a static function of the graph, computed on the
  // first pass over a graph (keyed by its CSR storage) and reused.
  // The fast variants' d+ depends on the graph only: computed once per graph. The graph is
  // recognised by its CSR, which the cache holds (so its address cannot be reused meanwhile).
  at::Tensor heuristic_d_plus;
  at::Tensor heuristic_rowptr;
  bool cached_for(const MessageGraph& g) const {
    return heuristic_rowptr.defined() && heuristic_rowptr.data_ptr() == g.rowptr.data_ptr() &&
           heuristic_rowptr.numel() == g.rowptr.numel() && heuristic_d_plus.size(0) == g.num_dst;
  }

  // The fast variant's normalised depth benefit: a function of the graph alone (the min-max
  // included), so computed on the first pass over a graph (d+'s key) and reused: no per-step
  // reductions, host reads or (distributed) allreduce.
  at::Tensor fast_eps;

  // The halo rows that the last training pass's layers >= 2 held (a rank; -1: none yet): the
  // room the next pass leaves after layer 1's output, whose size it must pick before its
  // own count reaches the host. Every halo row would cost 0.5 GiB of peak memory a rank at
  // products-scale, for ~15% of them used.
  int64_t halo_rows_held = -1;

  // 0..n-1 on the device (layer 1's rows when it computes every row), kept between passes.
  at::Tensor row_ids_cache;
  const at::Tensor& row_ids(int64_t n, const at::TensorOptions& opts) {
    if (!row_ids_cache.defined() || row_ids_cache.numel() != n || row_ids_cache.device() != opts.device() ||
        row_ids_cache.scalar_type() != opts.dtype().toScalarType())
      row_ids_cache = torch::arange(n, opts);
    return row_ids_cache;
  }

  // The learned variant's per-graph constants: every entry's row (for d+) and L_reg's training
  // edges with their targets. They depend on the graph, the labels and the training mask only,
  // so they are built once (a device wait for the selection's size) instead of every step. Keyed
  // by the tensors' storage and version counters (an in-place change rebuilds them), which the
  // entry holds so that no other tensor can take their addresses meanwhile.
  struct RegEdges {
    at::Tensor rowptr, col, labels, mask;
    int64_t labels_version = -1, mask_version = -1;
    at::Tensor dst, sel, target;  // int64 [E]; int64 [S] entries; bool [S], y_u == y_v
  };
  RegEdges reg_edges;
  // The selection as f_delta's pairs (int64 [S]) and its targets in the logits' type, for the
  // entry_pair they were built from (f_delta's cache keeps it while the CSR lives).
  struct RegPairs {
    at::Tensor entry_pair, sel, sel_pair, target;
  };
  RegPairs reg_pairs_;
  const RegPairs& reg_pairs(const RegEdges& re, const at::Tensor& entry_pair, c10::ScalarType dtype) {
    RegPairs& r = reg_pairs_;
    if (!r.target.defined() || !r.entry_pair.is_same(entry_pair) || !r.sel.is_same(re.sel) ||
        r.target.scalar_type() != dtype) {
      r.entry_pair = entry_pair;
      r.sel = re.sel;
      r.sel_pair = entry_pair.index_select(0, re.sel);
      r.target = re.target.to(dtype);
    }
    return r;
  }
  static bool same_tensor(const at::Tensor& a, const at::Tensor& b, int64_t version) {
    if (a.defined() != b.defined()) return false;
    return !a.defined() || (a.data_ptr() == b.data_ptr() && a.numel() == b.numel() && a._version() == version);
  }
  const RegEdges& reg_edges_for(const MessageGraph& g, const at::Tensor& labels, const at::Tensor& train_mask) {
    RegEdges& r = reg_edges;
    const bool with_reg = labels.defined() && train_mask.defined();
    if (r.dst.defined() && r.rowptr.data_ptr() == g.rowptr.data_ptr() && r.rowptr.numel() == g.rowptr.numel() &&
        r.col.data_ptr() == g.col.data_ptr() && r.col.numel() == g.col.numel() &&
        (!with_reg || (r.sel.defined() && same_tensor(labels, r.labels, r.labels_version) &&
                       same_tensor(train_mask, r.mask, r.mask_version))))
      return r;
    r = RegEdges{};
    r.rowptr = g.rowptr;
    r.col = g.col;
    const detail::EdgeList e = detail::edges_of_rows(g.rowptr, g.col, torch::arange(g.num_dst, g.rowptr.options()),
                                                     g.col.numel());
    r.dst = e.dst_local;
    if (with_reg) {
      r.labels = labels;
      r.mask = train_mask;
      r.labels_version = labels._version();
      r.mask_version = train_mask._version();
      // Both endpoints in the training set; a halo source beyond the mask's rows is not.
      const at::Tensor src_ok = e.src < train_mask.size(0);
      const at::Tensor src_c = torch::where(src_ok, e.src, torch::zeros_like(e.src));
      r.sel = (src_ok & train_mask.index_select(0, src_c) & train_mask.index_select(0, e.dst_local))
                  .nonzero().squeeze(1);
      r.target = labels.index_select(0, src_c.index_select(0, r.sel)) ==
                 labels.index_select(0, e.dst_local.index_select(0, r.sel));
    }
    return r;
  }
  // forward() leaves ForwardStats' device counts for the caller to settle (set_defer_stats).
  bool defer_stats = false;

  bool adaptive() const { return cfg.variant != "plain"; }

  static at::Tensor degree_bucket(const at::Tensor& deg) {
    return (deg.to(torch::kFloat64) + 1).log2().floor().to(torch::kInt64).clamp(0, kBuckets - 1);
  }

  // AD#'s estimators (method.md leaves them open): on the training nodes, per layer t (h^(0) = x
  // up to the last hidden layer), the class separation S_t(v) = ||mu_t[y_v] - mu_t||^2 and the
  // within-class spread W_t(v) = ||h_t(v) - mu_t[y_v]||^2, with class means mu_t[c] and global
  // mean mu_t over the training nodes. Per degree bucket, log beta is the mean over consecutive
  // layers of the change of mean log S (signal calibration), log gamma the same for W (noise
  // evolution). Buckets without training nodes keep beta = gamma = 1.
  void update_sharp(const MessageGraph& g, const at::Tensor& x, const std::vector<at::Tensor>& outs,
                    const at::Tensor& deg, const at::Tensor& labels, const at::Tensor& train_mask) {
    torch::NoGradGuard guard;
    // On a rank, every sum is over all ranks' training nodes, so all ranks get the same estimates.
    auto sum_all = [&](at::Tensor t) {
      t = t.contiguous();
      if (g.distributed()) g.transport->allreduce(t, RankTransport::Op::Sum);
      return t;
    };
    const auto f64 = x.options().dtype(torch::kFloat64);
    const at::Tensor idx = train_mask.nonzero().squeeze(1);
    const double total = sum_all(torch::full({1}, double(idx.numel()), f64)).item<double>();
    if (total < 2) return;
    const at::Tensor y = labels.index_select(0, idx);
    const int64_t C = cfg.out_dim;
    const at::Tensor bucket = degree_bucket(deg.index_select(0, idx));
    const at::Tensor count = sum_all(torch::zeros({kBuckets}, f64).index_add(0, bucket, torch::ones({idx.numel()}, f64)));
    std::vector<at::Tensor> layers{x};
    for (size_t t = 0; t + 1 < outs.size(); ++t) layers.push_back(outs[t]);
    std::vector<at::Tensor> logS, logW;
    for (const auto& h_all : layers) {
      const at::Tensor h = h_all.index_select(0, idx).to(torch::kFloat64);
      const at::Tensor sums = sum_all(torch::zeros({C, h.size(1)}, h.options()).index_add(0, y, h));
      const at::Tensor n_c = sum_all(torch::zeros({C}, h.options()).index_add(0, y, torch::ones({h.size(0)}, h.options())));
      const at::Tensor mu_c = sums / n_c.clamp_min(1).unsqueeze(1);
      const at::Tensor mu = sums.sum(0, true) / total;
      const at::Tensor sep = (mu_c.index_select(0, y) - mu).pow(2).sum(1);
      const at::Tensor spread = (h - mu_c.index_select(0, y)).pow(2).sum(1);
      auto bucket_mean_log = [&](const at::Tensor& v) {
        const at::Tensor sum = sum_all(torch::zeros({kBuckets}, h.options()).index_add(0, bucket, (v + 1e-12).log()));
        return sum / count.clamp_min(1);
      };
      logS.push_back(bucket_mean_log(sep));
      logW.push_back(bucket_mean_log(spread));
    }
    if (layers.size() < 2) return;
    at::Tensor db = torch::zeros({kBuckets}, count.options()), dg = torch::zeros({kBuckets}, count.options());
    for (size_t t = 1; t < layers.size(); ++t) {
      db += logS[t] - logS[t - 1];
      dg += logW[t] - logW[t - 1];
    }
    const at::Tensor has = count > 0;
    const double k = double(layers.size() - 1);
    sharp_log_beta.copy_(torch::where(has, db / k, torch::zeros_like(db)));
    sharp_log_gamma.copy_(torch::where(has, dg / k, torch::zeros_like(dg)));
  }

  detail::Thresholds tau() const { return detail::tau_thresholds(theta_a, cfg.layers, cfg.lambda); }

  // Normalised depth benefit eps_tilde over the destination rows.
  at::Tensor depth_benefit(const MessageGraph& g, const at::Tensor& z_src, bool training,
                           const at::Tensor& labels, const at::Tensor& train_mask,
                           at::Tensor& reg_loss) {
    const bool fixed = cfg.variant == "ad_fast";
    if (fixed && fast_eps.defined() && cached_for(g) && fast_eps.scalar_type() == theta_a.scalar_type())
      return fast_eps;
    at::Tensor eps = compute_depth_benefit(g, z_src, training, labels, train_mask, reg_loss);
    if (fixed) fast_eps = eps.detach();
    return eps;
  }

  at::Tensor compute_depth_benefit(const MessageGraph& g, const at::Tensor& z_src, bool training,
                                   const at::Tensor& labels, const at::Tensor& train_mask,
                                   at::Tensor& reg_loss) {
    const int64_t n = g.num_dst;
    const at::Tensor deg = g.degree.slice(0, 0, n);
    at::Tensor d_plus;
    if ((cfg.variant == "ad_fast" || cfg.variant == "ad_sharp") && cfg.same_label_heuristic != "degree") {
      // The appendix's alternative heuristics: d+_v = sum_u p_uv over the whole graph.
      if (g.distributed())
        throw InputError("--heuristic " + cfg.same_label_heuristic +
                         ": needs the whole graph; distributed runs support only degree");
      if (!cached_for(g)) {
        const at::Tensor p = detail::same_label_probability(cfg.same_label_heuristic, g.rowptr, g.col);
        const at::Tensor rows = torch::repeat_interleave(g.rowptr.to(torch::kCPU).diff());
        heuristic_d_plus = torch::zeros({g.num_src}, torch::kFloat64).index_add(0, rows, p).slice(0, 0, n).to(deg.device());
        heuristic_rowptr = g.rowptr;
      }
      d_plus = heuristic_d_plus.to(theta_a.scalar_type());
    } else if (cfg.variant == "ad_fast" || cfg.variant == "ad_sharp") {
      // p_uv = d_u d_v / max d_i d_j: d+_v = d_v * sum_u d_u / max.
      if (!cached_for(g)) {
        const at::Tensor nb =
            csr_aggregate(g.rowptr, g.col, {}, g.degree.unsqueeze(1), row_ids(n, g.rowptr.options())).squeeze(1);
        heuristic_d_plus = deg.to(torch::kFloat64) * nb / g.max_degree_product;
        heuristic_rowptr = g.rowptr;
      }
      d_plus = heuristic_d_plus.to(theta_a.scalar_type());
    } else {
      const bool with_reg = training && labels.defined() && train_mask.defined();
      const RegEdges& re = reg_edges_for(g, with_reg ? labels : at::Tensor(), with_reg ? train_mask : at::Tensor());
      const detail::PairLogits pl = detail::fdelta_pair_logits(
          g.rowptr, g.col, z_src, fd_w1, fd_b1, fd_w2, fd_b2,
          cfg.fdelta_precision == "tf32"   ? detail::FDeltaPrecision::kTf32
          : cfg.fdelta_precision == "bf16" ? detail::FDeltaPrecision::kBf16
                                           : detail::FDeltaPrecision::kFp32);
      d_plus = detail::sigmoid_row_sums(g.rowptr, re.dst, pl.entry_pair, pl.logit);
      // L_reg: BCE on training edges (both endpoints in the training set), target y_u == y_v.
      // On a rank: this rank's rows' share of the mean over every rank's training edges (the
      // count reduced on the device: no host wait).
      if (with_reg) {
        const RegPairs& rp = reg_pairs(re, pl.entry_pair, pl.logit.scalar_type());
        if (g.distributed()) {
          at::Tensor count = torch::full({1}, double(re.sel.numel()), pl.logit.options().dtype(torch::kFloat64));
          g.transport->allreduce(count, RankTransport::Op::Sum);
          reg_loss = detail::pair_bce_sum(pl.logit, rp.sel_pair, rp.target) /
                     count.clamp_min(1).to(pl.logit.scalar_type()).squeeze(0);
        } else if (re.sel.numel() > 0) {
          reg_loss = detail::pair_bce_sum(pl.logit, rp.sel_pair, rp.target) / double(re.sel.numel());
        }
      }
    }
    const at::Tensor d = deg.to(d_plus.scalar_type());
    // log eps_hat = t_max (2 log|alpha| + log(d + 1)) (depth_benefit.h), normalised by its
    // minimum and maximum over the rows.
    const double t_max = double(cfg.t_max > 0 ? cfg.t_max : cfg.layers);
    at::Tensor offset;
    if (cfg.variant == "ad_sharp") {  // eps = (beta alpha^2 (d + 1) / gamma)^t_max
      const at::Tensor b = degree_bucket(deg);
      offset = t_max * (sharp_log_beta.index_select(0, b) - sharp_log_gamma.index_select(0, b)).to(d.scalar_type());
    }
    // The min and max stay on the device (float64 [-lo, hi]): no host wait per step. Min-max
    // constants are treated as constants (not differentiated), identically on every rank.
    at::Tensor range;
    if (cfg.benefit_range) {
      range = torch::tensor({-cfg.benefit_range->first, cfg.benefit_range->second},
                            d.options().dtype(torch::kFloat64));
    } else {
      range = detail::depth_benefit_range(d_plus.detach(), d, offset, t_max);
      // Global min and max: every rank normalises identically.
      if (g.distributed()) g.transport->allreduce(range, RankTransport::Op::Max);
    }
    return detail::normalised_depth_benefit(d_plus, d, offset, range, t_max, cfg.normalisation == "log");
  }

  // BatchNorm1d over the given rows (training: batch statistics, updating running ones).
  at::Tensor batchnorm(size_t t, const at::Tensor& x, bool training) {
    return torch::batch_norm(x, bn_weight[t], bn_bias[t], bn_mean[t], bn_var[t],
                             training && x.size(0) > 1, 0.1, 1e-5, false);
  }
};

Model::Model(const ModelConfig& cfg) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = cfg;
  if (!detail::known_backbone(cfg.backbone))
    throw InputError("--model " + cfg.backbone + ": unknown backbone (gcn, gat, sage, mixhop, gatv2, dirgnn)");
  if (cfg.variant != "plain" && cfg.variant != "ad" && cfg.variant != "ad_fast" &&
      cfg.variant != "ad_sharp")
    throw InputError("--variant " + cfg.variant + ": unknown (plain, ad, ad_fast, ad_sharp)");
  if (cfg.layers < 1) throw InputError("--layers " + std::to_string(cfg.layers) + ": must be >= 1");
  if (cfg.hidden < 1) throw InputError("--hidden " + std::to_string(cfg.hidden) + ": must be >= 1");
  if (cfg.in_dim < 1 || cfg.out_dim < 1) throw InputError("model: input and output widths must be positive");
  if (cfg.dropout < 0 || cfg.dropout >= 1) throw InputError("--dropout: must be in [0, 1)");
  if (cfg.lambda < 0 || cfg.lambda > 1) throw InputError("--lambda: must be in [0, 1]");
  if (cfg.kappa <= 0) throw InputError("--kappa: must be positive");
  if (cfg.heads < 1) throw InputError("--heads: must be >= 1");
  if (cfg.normalisation != "linear" && cfg.normalisation != "log")
    throw InputError("--normalisation " + cfg.normalisation + ": expected linear or log");
  detail::check_heuristic(cfg.same_label_heuristic);
  if (cfg.compact_deep_layers != "auto" && cfg.compact_deep_layers != "on" && cfg.compact_deep_layers != "off")
    throw InputError("--compact " + cfg.compact_deep_layers + ": expected auto, on or off");
  if (cfg.compact_halo != "auto" && cfg.compact_halo != "on" && cfg.compact_halo != "off")
    throw InputError("--compact-halo " + cfg.compact_halo + ": expected auto, on or off");
  if (cfg.fdelta_precision != "fp32" && cfg.fdelta_precision != "tf32" && cfg.fdelta_precision != "bf16")
    throw InputError("--fdelta-precision " + cfg.fdelta_precision + ": expected fp32, tf32 or bf16");
  if (cfg.degree_threshold < 0) throw InputError("--degree-threshold: must be >= 0");
  if (cfg.degree_threshold > 0 && cfg.variant != "plain")
    throw InputError("--degree-threshold: only with --variant plain (Exp-2's case study)");
  c10::Device device("cpu");
  try {
    device = c10::Device(cfg.device);
  } catch (const std::exception&) {
    throw InputError("--device " + cfg.device + ": not a device (cpu, cuda, cuda:N)");
  }
  // A generator of the model's own: models built concurrently (sweep workers) or after other
  // draws initialise identically for the same seed.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed);
  const c10::ScalarType dtype = cfg.float64 ? torch::kFloat64 : torch::kFloat32;
  const auto on = [&](at::Tensor t) { return t.to(device, dtype).requires_grad_(true); };
  int64_t width = cfg.in_dim;
  for (int64_t t = 0; t < cfg.layers; ++t) {
    const bool last = t == cfg.layers - 1;
    detail::LayerOptions opt;
    opt.heads = last ? 1 : cfg.heads;
    opt.concat_heads = !last;
    opt.classifier = last;
    opt.dirgnn_alpha = cfg.dirgnn_alpha;
    opt.device = device;
    opt.dtype = dtype;
    opt.gen = gen;
    m.layers.push_back(detail::make_layer(cfg.backbone, width, last ? cfg.out_dim : cfg.hidden, opt));
    if (!last && !cfg.batchnorm) m.layers.back()->fuse_relu();  // the hidden layers' ReLU, where the layer can
    width = m.layers.back()->out_dim();
    if (!last && cfg.batchnorm) {
      m.bn_weight.push_back(on(torch::ones({width})));
      m.bn_bias.push_back(on(torch::zeros({width})));
      m.bn_mean.push_back(torch::zeros({width}, torch::dtype(dtype).device(device)));
      m.bn_var.push_back(torch::ones({width}, torch::dtype(dtype).device(device)));
    }
  }
  m.theta_a = on(torch::full({std::max<int64_t>(cfg.layers - 1, 0)}, cfg.theta_init));
  m.sharp_log_beta = torch::zeros({Impl::kBuckets}, torch::dtype(torch::kFloat64).device(device));
  m.sharp_log_gamma = torch::zeros({Impl::kBuckets}, torch::dtype(torch::kFloat64).device(device));
  if (cfg.variant == "ad") {
    // f_delta reads the first layer's transform of the input (width of one layer-1 channel set).
    const int64_t h = m.layers.front()->input_transform(torch::zeros({1, cfg.in_dim}, torch::dtype(dtype).device(device))).size(1);
    const double a1 = std::sqrt(6.0 / double(3 * h)), a2 = std::sqrt(6.0 / double(h + 1));
    m.fd_w1 = on(torch::empty({2 * h, h}).uniform_(-a1, a1, gen));
    m.fd_b1 = on(torch::zeros({h}));
    m.fd_w2 = on(torch::empty({h, 1}).uniform_(-a2, a2, gen));
    m.fd_b2 = on(torch::zeros({1}));
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

const ModelConfig& Model::config() const { return impl_->cfg; }
void Model::set_defer_stats(bool on) { impl_->defer_stats = on; }

void ForwardStats::settle() {
  if (!pending_edges.defined()) return;
  const at::Tensor counts = pending_edges.to(torch::kCPU).contiguous();
  edges_processed.assign(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  pending_edges = at::Tensor();
}

std::vector<std::pair<std::string, at::Tensor>> Model::named_parameters() const {
  const Impl& m = *impl_;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t t = 0; t < m.layers.size(); ++t)
    for (auto& [name, p] : m.layers[t]->params())
      out.emplace_back("layers." + std::to_string(t) + "." + name, p);
  for (size_t t = 0; t < m.bn_weight.size(); ++t) {
    out.emplace_back("bn." + std::to_string(t) + ".weight", m.bn_weight[t]);
    out.emplace_back("bn." + std::to_string(t) + ".bias", m.bn_bias[t]);
  }
  if (m.cfg.variant == "ad") {
    out.emplace_back("f_delta.w1", m.fd_w1);
    out.emplace_back("f_delta.b1", m.fd_b1);
    out.emplace_back("f_delta.w2", m.fd_w2);
    out.emplace_back("f_delta.b2", m.fd_b2);
  }
  if (m.adaptive() && m.theta_a.numel() > 0) out.emplace_back("theta.a", m.theta_a);
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> Model::named_buffers() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  if (impl_->cfg.variant == "ad_sharp") {
    out.emplace_back("sharp.log_beta", impl_->sharp_log_beta);
    out.emplace_back("sharp.log_gamma", impl_->sharp_log_gamma);
  }
  for (size_t t = 0; t < impl_->bn_mean.size(); ++t) {
    out.emplace_back("bn." + std::to_string(t) + ".running_mean", impl_->bn_mean[t]);
    out.emplace_back("bn." + std::to_string(t) + ".running_var", impl_->bn_var[t]);
  }
  return out;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

namespace {
// layer.forward over the listed rows, with what the layer may know of them (their CSR entries and
// each row's position among them) for this call only, also when it throws.
at::Tensor forward_rows(Layer& layer, const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows,
                        int64_t entries, at::Tensor pos) {
  struct Reset {
    Layer& layer;
    ~Reset() {
      layer.set_rows_entries(-1);
      layer.set_rows_pos({});
    }
  } reset{layer};
  layer.set_rows_entries(entries);
  layer.set_rows_pos(std::move(pos));
  return layer.forward(g, h, rows);
}
}  // namespace

ForwardOutput Model::forward(const MessageGraph& g, const at::Tensor& x, bool training,
                             int64_t epoch, const at::Tensor& labels, const at::Tensor& train_mask) {
  Impl& m = *impl_;
  const ModelConfig& c = m.cfg;
  const int64_t L = c.layers, n = g.num_dst;
  TORCH_CHECK(g.num_src == n || g.distributed(),
              "Model::forward: halo rows need a transport (the distributed trainer sets it)");
  TORCH_CHECK(x.size(0) == g.num_src, "Model::forward: x must have one row per source row");
  ForwardOutput out;
  out.reg_loss = torch::zeros({}, x.options().device(torch::kCPU));  // no launch (training_loss)
  // A plain model's layers compute every row (an AD model's never ask for this list).
  const at::Tensor all_rows =
      !m.adaptive() && c.degree_threshold <= 0 ? torch::arange(n, g.rowptr.options()) : at::Tensor();
  std::unique_ptr<detail::HaloPass> pass;
  // A rank's training pass updates each exchanged input in place (HaloPass::set_in_place): no
  // one reads the earlier layers' outputs then, except AD#'s calibration.
  const bool exchange_in_place = g.distributed() && training && c.variant != "ad_sharp";
  if (g.distributed()) {
    pass = std::make_unique<detail::HaloPass>(g, L);
    pass->set_in_place(exchange_in_place);
    // Only MixHop's layer 1 exchanges (its second hop): the others' read bits start at layer 2.
    pass->set_first_read_layer(c.backbone == "mixhop" ? 1 : 2);
  }

  // A rank's training pass builds layer 1's output (over every row) with room for the halo rows
  // after it, where the layer can, and layer 2's exchange grows it into [owned; halo] instead of
  // copying every owned row (HaloPass::extend's grow). The room: as many rows as the last
  // training pass held, and an eighth more (the depths move little between steps); the first
  // pass, or one that needs more, copies. grown_from: that output.
  const int64_t first_room =
      exchange_in_place && L >= 2 && m.halo_rows_held >= 0
          ? std::min(g.num_halo(), m.halo_rows_held + m.halo_rows_held / 8)
          : -1;
  at::Tensor grown_from;
  auto first_forward = [&](Layer& layer, auto&& forward) {
    struct Reset {
      Layer& layer;
      ~Reset() { layer.set_output_room(-1); }
    } reset{layer};
    layer.set_output_room(first_room);
    at::Tensor r = forward();
    grown_from = layer.take_output_with_room();
    return r;
  };

  at::Tensor h_src = x;  // the current layer's input, over the source rows
  at::Tensor h_dst;      // the previous layer's output, over the destination rows
  at::Tensor hin = training ? dropout_rows(h_src, g.global_id, c.dropout, c.seed, epoch, 1) : h_src;

  at::Tensor eps, tau, depth;
  std::vector<at::Tensor> tau_layers;  // tau(t) of each layer, differentiable in theta
  // Per layer t (row t - 1): the rows computed, those fully updated (active) and those computed
  // for the surrogate (band), and the frozen rows of the width-changing layers, as the rows of
  // one bool tensor with their counts (detail::depth_masks; one kernel on the GPU, where whole-
  // tensor operations cost the host about 25 launches and layer-by-layer ones a dozen a layer).
  auto width_changes = [&](int64_t t) {
    const Layer& l = *m.layers[size_t(t - 1)];
    return t == 1 || t == L || l.in_dim() != l.out_dim();
  };
  detail::DepthMaskSpec spec;
  spec.layers = L;
  for (int64_t t = 1; t <= L; ++t)
    if (width_changes(t)) spec.frozen_layers.push_back(t);
  std::optional<detail::DepthMasks> masks;
  at::Tensor active_all, band_all, comp_all;  // [L, n] views of the masks; comp_all: active or band
  at::Tensor comp_pos_all;  // int32 [L, n]
  at::Tensor z;  // the learned variant's f_delta input: layer 1's input transform of hin
  if (m.adaptive()) {
    RECORD_USER_SCOPE("depth benefit");
    if (c.variant == "ad") z = m.layers.front()->input_transform(hin);
    eps = m.depth_benefit(g, z, training, labels, train_mask, out.reg_loss);
    detail::Thresholds th = m.tau();
    tau = th.all;
    tau_layers = std::move(th.layers);
    // T(v) = max{t : eps_v >= tau(t)}; tau increases, so it is the count of satisfied t.
    // The surrogate only matters where it carries a gradient: through tau(t) (theta enters from
    // t = 2 on) or through eps (the learned variant). Elsewhere the band would cost a self-only
    // update of nearly every row for a zero gradient.
    using Band = detail::DepthMaskSpec::Band;
    spec.band = !training ? Band::None : c.band > 0 ? Band::Width : Band::All;
    spec.band_width = c.band * c.kappa;
    spec.no_band_at_layer1 = training && !eps.requires_grad();
    masks = detail::depth_masks(eps, tau, {}, g.rowptr, spec);
  } else if (c.degree_threshold > 0) {
    // Exp-2: low-degree nodes never aggregate; the others use every layer.
    tau = torch::zeros({L}, x.options());
    tau_layers = tau.unbind(0);
    masks = detail::depth_masks(
        {}, {}, torch::where(g.degree.slice(0, 0, n) > double(c.degree_threshold), L, 0).to(torch::kInt64), g.rowptr,
        spec);
  } else {
    depth = torch::full({n}, L, torch::dtype(torch::kInt64).device(x.device()));
    if (pass) pass->set_computed({}, true);
  }
  // Layer 1 computes every row when lambda = 0 (tau(1) = 0 <= every eps; docs/method.md): its
  // forward is issued before the wait for the counts, so that the device runs layer 1 (the
  // graph's SpMM and product) while the host reads the counts and builds the row lists,
  // instead of idling until the host has issued it. Kept only if the counts confirm
  // that every row is computed; the loop's call would be the same, with rows 0..n-1 listed.
  // A rank too: its layer 1 reads the input features it holds, no exchange, except
  // MixHop's, whose second hop exchanges (HaloPass::inner_fill) in the loop's order.
  at::Tensor first_upd;  // layer 1's forward, issued before the wait for the counts (below)
  const bool first_layer_early = masks.has_value() && (!pass || c.backbone != "mixhop") && m.adaptive() &&
                                 c.lambda == 0;
  auto first_layer = [&] {
    RECORD_USER_SCOPE("layer 1");
    {
      RECORD_USER_SCOPE("aggregate");
      first_upd = first_forward(*m.layers.front(), [&] {
        return forward_rows(*m.layers.front(), g, hin, m.row_ids(n, g.rowptr.options()), g.col.numel(),
                            comp_pos_all.select(0, 0));
      });
    }
  };
  // A rank on a GPU issues it before its halo plan, too, and runs the plan (the exchange of the
  // computed-row bits, the read bits and keep masks, the counts) on a second stream beside it
  // (the plan is ~40 small operations whose issue the device would otherwise wait for before
  // layer 1 could start). The default stream waits for the plan's stream once the counts' copy,
  // the row lists and the deeper layers' compact graph are queued there; the plan's stream first
  // waits for the masks. (The plan's tensors stay alive until the default stream has used them, or
  // a later plan's stream, which first waits for the default one, reuses their memory.)
  const bool plan_beside_layer1 = first_layer_early && pass && x.is_cuda();
  std::optional<c10::StreamGuard> plan_stream;
  if (masks) {
    depth = masks->depth;
    comp_all = masks->stacked.narrow(0, 0, L);
    active_all = masks->stacked.narrow(0, L, L);
    band_all = masks->stacked.narrow(0, 2 * L, L);
    // Each row's position among its layer's computed rows, -1 where not computed: the
    // aggregation's row map and merge_rows'.
    comp_pos_all = masks->comp_pos;
    if (plan_beside_layer1) {
      // The plan's stream waits for the masks, not for layer 1: the event goes before it.
      const c10::impl::VirtualGuardImpl cuda(x.device().type());
      const c10::Stream side = halo_plan_stream(x.device());
      c10::Event masked(x.device().type());
      masked.record(cuda.getStream(x.device()));
      first_layer();
      masked.block(side);
      plan_stream.emplace(side);
    }
    if (pass) {  // bit t - 1: computed at layer t
      const at::Tensor layer_no = torch::arange(1, L + 1, depth.options()).unsqueeze(1);  // [L, 1]
      pass->set_computed(comp_all.to(torch::kInt64).bitwise_left_shift(layer_no - 1).sum(0), false);
    }
  }
  if (pass) {  // every exchange's rows, decided now: their sizes come back with the row lists
    std::vector<bool> input_changed(size_t(L + 1), false);
    for (int64_t t = 2; t <= L; ++t) {
      const Layer& prev = *m.layers[size_t(t - 2)];
      input_changed[size_t(t)] = t - 1 == 1 || prev.in_dim() != prev.out_dim();
    }
    pass->plan(input_changed, c.backbone == "mixhop");
  }

  // Every layer's row lists (computed, active, surrogate band; frozen at width-changing layers)
  // from one pass over the stacked masks (detail::mask_rows) and one host copy of their sizes: on
  // a GPU each nonzero waited for the device, three or four per layer left it idle between layers.
  std::vector<at::Tensor> comp_list(size_t(L + 1)), act_list(size_t(L + 1)), band_list(size_t(L + 1)),
      frozen_list(size_t(L + 1));
  std::vector<int64_t> comp_entries(size_t(L + 1), -1);  // per layer: CSR entries of comp_list
  at::Tensor comp_entries_dev;  // the same, [L] on the device (the per-layer edge counts)
  std::optional<MessageGraph> deep_graph;  // a rank's graph for layers >= 2 (compact halo rows)
  // Built when layer 2 needs it, not right after the host copy below: the device, which that copy
  // left idle, then gets layer 1's kernels first and runs them while the host builds it. (A rank
  // whose layer 1 was issued before its plan builds it on the plan's stream instead.)
  std::function<void()> make_deep_graph;
  if (masks) {
    // Rows of `stacked`: every layer's computed, then active, then band rows, then the frozen
    // rows of the width-changing layers (spec.frozen_layers); `lists` in the same order.
    std::vector<at::Tensor*> lists;
    for (auto* v : {&comp_list, &act_list, &band_list})
      for (int64_t t = 1; t <= L; ++t) lists.push_back(&(*v)[size_t(t)]);
    for (int64_t t : spec.frozen_layers) lists.push_back(&frozen_list[size_t(t)]);
    // One host copy: the lists' sizes, each layer's CSR entries of its computed rows (the
    // aggregation's backward sizes its buffers with them instead of waiting for the device) and
    // the halo exchanges' sizes (a rank of a distributed run).
    comp_entries_dev = masks->counts.narrow(0, int64_t(lists.size()), L);
    at::Tensor sizes = masks->counts;
    // Compact halo inputs for layers >= 2 (docs/distributed.md): the count of halo rows they
    // read. "auto" only where the backward of few rows regroups their entries (the CPU; on a GPU
    // from kRegroupMinEntries), so that the per-pass graph needs no transpose.
    const bool try_compact_halo =
        pass && L >= 2 && g.num_halo() > 0 && c.backbone != "mixhop" &&
        (c.compact_halo == "on" ||
         (c.compact_halo == "auto" && (x.is_cpu() || g.col.numel() >= kernels::regroup_min_entries())));
    const at::Tensor halo_read = try_compact_halo ? pass->halo_read_after_first_layer(L) : at::Tensor();
    // ... and the rows that layers >= 2 compute (and their CSR entries): the only ones whose
    // columns the compact graph needs remapped.
    const at::Tensor deep_rows_mask = try_compact_halo ? comp_all.slice(0, 1).any(0) : at::Tensor();
    if (try_compact_halo)
      sizes = torch::cat({sizes, halo_read.sum().to(torch::kInt64).view({1}), deep_rows_mask.sum().view({1}),
                          (deep_rows_mask.to(torch::kInt64) * (g.rowptr.slice(0, 1, n + 1) - g.rowptr.slice(0, 0, n)))
                              .sum()
                              .view({1})});
    const int64_t counts_at = int64_t(lists.size()) + L + (try_compact_halo ? 3 : 0);
    const at::Tensor halo_counts = pass ? pass->plan_counts() : at::Tensor();
    if (halo_counts.defined()) sizes = torch::cat({sizes, halo_counts});
    if (first_layer_early) {
      if (x.is_cuda()) {
        const at::Tensor host = at::empty(sizes.sizes(), sizes.options().device(torch::kCPU).pinned_memory(true));
        host.copy_(sizes, /*non_blocking=*/true);
        const c10::impl::VirtualGuardImpl cuda(x.device().type());
        c10::Event counted(x.device().type());
        counted.record(cuda.getStream(x.device()));
        if (!plan_stream) first_layer();
        counted.synchronize();
        sizes = host;
      } else {
        first_layer();
        sizes = sizes.to(torch::kCPU).contiguous();
      }
    } else {
      sizes = sizes.to(torch::kCPU).contiguous();
    }
    if (halo_counts.defined()) pass->set_plan_counts(sizes.slice(0, counts_at));
    const int64_t* size = sizes.data_ptr<int64_t>();
    int64_t listed = 0;  // the lists' total: their buffer sized without a second device wait
    for (size_t k = 0; k < lists.size(); ++k) listed += size[k];
    const at::Tensor rows = detail::mask_rows(*masks, listed);  // by mask, then row
    for (int64_t t = 1; t <= L; ++t) comp_entries[size_t(t)] = size[int64_t(lists.size()) + t - 1];
    if (first_upd.defined() && (size[0] != n || comp_entries[1] != g.col.numel())) first_upd = at::Tensor();
    if (try_compact_halo) {
      const int64_t held = size[int64_t(lists.size()) + L];
      bool few_deep = true;  // every layer >= 2 computes few rows (the backward's regrouping)
      for (int64_t t = 2; t <= L; ++t) few_deep = few_deep && size[t - 1] * 8 < n;
      if (c.compact_halo == "on" || (held * 4 < g.num_halo() && few_deep)) {
        // Few rows computed: only their entries remapped (a layer computing many would build a
        // transpose of every entry).
        const int64_t deep_count = few_deep ? size[int64_t(lists.size()) + L + 1] : -1;
        const int64_t deep_entries = size[int64_t(lists.size()) + L + 2];
        make_deep_graph = [&, halo_read, deep_rows_mask, held, deep_count, deep_entries] {
          at::Tensor halo_pos;
          const at::Tensor deep_rows =
              deep_count >= 0 ? torch::nonzero_static(deep_rows_mask, deep_count).squeeze(1) : at::Tensor();
          deep_graph.emplace(
              compact_halo_graph(g, halo_read, held, c.backbone == "dirgnn", halo_pos, deep_rows, deep_entries));
          pass->set_compact_halo(halo_pos, held);
          out.stats.deep_halo_rows = held;
        };
      }
    }
    int64_t offset = 0;
    for (size_t k = 0; k < lists.size(); ++k) {
      const int64_t count = size[k];
      *lists[k] = rows.narrow(0, offset, count);
      offset += count;
    }
    if (plan_stream) {
      // Still on the plan's stream: the row lists above and the deeper layers' compact graph,
      // none of which reads layer 1's output, run there beside layer 1 too; on the default stream
      // they would be small kernels between layer 1 and layer 2's exchange. Then the default
      // stream waits for the plan's.
      if (make_deep_graph) {
        make_deep_graph();
        make_deep_graph = nullptr;
      }
      const c10::impl::VirtualGuardImpl cuda(x.device().type());
      c10::Event planned(x.device().type());
      planned.record(cuda.getStream(x.device()));
      plan_stream.reset();
      planned.block(cuda.getStream(x.device()));
    }
  }

  std::vector<at::Tensor> edges;  // per layer, on the device until the end of the pass
  bool edges_are_entries = masks.has_value();  // every layer's count is its computed rows' entries
  // A rank's deeper layer hands its update of the frozen rows to the next layer's halo exchange
  // (HaloPass::extend_update), which builds the next input from it: no separate output tensor.
  std::optional<detail::RowUpdate> pending;
  at::Tensor next_input;  // a plain model's next layer input, dropped out by this layer
  for (int64_t t = 1; t <= L; ++t) {
    // Profiler scopes (adgnn train --profile): per layer, and its parts.
    RECORD_USER_SCOPE(t == 1 ? "layer 1" : t == 2 ? "layer 2" : t == 3 ? "layer 3" : "layer 4+");
    Layer& layer = *m.layers[t - 1];
    if (t == 2 && make_deep_graph) make_deep_graph();
    const MessageGraph& gl = t >= 2 && deep_graph ? *deep_graph : g;  // this layer's source rows
    const bool last = t == L;
    const bool width_change = width_changes(t);
    if (t > 1) {
      if (pass) {
        RECORD_USER_SCOPE("halo exchange");
        const Layer& prev = *m.layers[t - 2];
        const bool prev_width_change = t - 1 == 1 || prev.in_dim() != prev.out_dim();
        if (pending) {
          h_src = pass->extend_update(*pending, t, c.backbone == "mixhop", out.stats);
          pending.reset();
          h_dst = h_src.slice(0, 0, n);  // layer t-1's output
          out.layer_outputs.push_back(h_dst);
        } else {
          const bool grow = t == 2 && grown_from.defined() && h_dst.is_same(grown_from);
          h_src = pass->extend(h_dst, t, prev_width_change, c.backbone == "mixhop", out.stats, grow);
        }
        grown_from = at::Tensor();
      } else {
        h_src = h_dst;
      }
      hin = h_src;  // dropped out below, once the rows this layer reads are known
    }
    // Dropout of this layer's input. The mask is a function of (global id, column), so dropping
    // out only the rows that are read gives them the values of the full-tensor dropout. At AD's
    // deeper layers (training), whose few computed rows read few rows, those rows become a
    // compact input with a graph of their own (restrict_to): no pass over every source row.
    // Width-changing layers also read their frozen rows (frozen_rows; undefined: every row, as
    // plain layers); MixHop's two hops read every row.
    std::optional<MessageGraph> compact;
    at::Tensor compact_rows;
    auto drop_input = [&](const at::Tensor& comp_rows, bool reads_frozen, const at::Tensor& frozen_rows) {
      if (!training || t == 1) return;
      RECORD_USER_SCOPE("dropout");
      at::Tensor read;
      const bool few = comp_rows.defined() && comp_rows.numel() > 0 && detail::computes_few_rows(comp_rows.numel(), n);
      const bool compact_ok = c.compact_deep_layers == "on" || (c.compact_deep_layers == "auto" && h_src.is_cpu());
      if (few && !reads_frozen && compact_ok) read = layer.rows_read(gl, comp_rows);
      if (!read.defined()) {
        // The same rows as flags, plus any frozen rows: a full-size input whose unread rows
        // stay unset (no pass over them; a rank holds ~4x its own rows on products-scale, and
        // frozen rows are owned ones, docs/decisions/dropout-rows-read.md).
        at::Tensor flags;
        if (few && c.dropout_rows_read && (!reads_frozen || frozen_rows.defined())) {
          flags = layer.read_flags(gl, comp_rows);
          if (flags.defined() && reads_frozen) flags.index_fill_(0, frozen_rows, 1);
        }
        if (flags.defined() && !reads_frozen) {
          // The frozen rows keep h_src as it is (h_dst.index_put below, or the next exchange's
          // update): one node passes it on and adds the dropped rows' gradient into its own.
          auto [dropped, kept] = dropout_rows_and_input(h_src, gl.global_id, c.dropout, c.seed, epoch, t, flags);
          hin = dropped;
          h_src = kept;
          if (pass) pass->replace_last(kept);
          else h_dst = kept;
          return;
        }
        hin = dropout_rows(h_src, gl.global_id, c.dropout, c.seed, epoch, t, flags);
        return;
      }
      hin = dropout_rows(h_src.index_select(0, read), gl.global_id.index_select(0, read), c.dropout, c.seed, epoch, t);
      compact = restrict_to(gl, comp_rows, read, c.backbone == "dirgnn");
      compact_rows = torch::searchsorted(read, comp_rows);
    };
    layer.set_halo(pass.get(), t, &out.stats);
    auto post = [&](at::Tensor v) {  // BatchNorm + ReLU of a hidden layer's fresh outputs
      if (last) return v;
      if (c.batchnorm) {
        const size_t k = size_t(t - 1);
        v = pass ? pass->batch_norm(v, m.bn_weight[k], m.bn_bias[k], m.bn_mean[k], m.bn_var[k],
                                    training, 0.1, 1e-5)
                 : m.batchnorm(k, v, training);
      }
      return layer.relu_fused() ? v : torch::relu(v);  // (without BatchNorm the layer may end with it)
    };

    if (!m.adaptive() && c.degree_threshold <= 0) {
      if (next_input.defined()) hin = std::exchange(next_input, at::Tensor());
      else drop_input({}, true, {});
      // A hidden layer ending with its fused ReLU also drops out the next layer's input (one
      // process: the next layer reads these rows only): the dropout's backward, a pass over
      // every row, becomes a factor in the ReLU's (detail::linear_relu_dropout).
      const bool fuse = training && !last && c.dropout > 0 && !pass && !c.batchnorm && layer.relu_fused();
      at::Tensor upd, undropped;
      {
        // The request holds for this one call, also when it throws (a later evaluation pass
        // must not get dropped outputs).
        struct Reset {
          Layer& layer;
          ~Reset() {
            layer.set_output_dropout(std::nullopt);
            layer.take_output_before_dropout();
          }
        } reset{layer};
        if (fuse)
          layer.set_output_dropout(detail::dropout_mask(gl.global_id, n, x.device(), c.dropout, c.seed, epoch, t + 1));
        upd = t == 1 ? first_forward(layer, [&] { return layer.forward(gl, hin, all_rows); })
                     : layer.forward(gl, hin, all_rows);
        undropped = layer.take_output_before_dropout();
      }
      if (undropped.defined()) {
        next_input = upd;
        upd = undropped;
      }
      upd = post(upd);
      out.stats.active_rows.push_back(n);
      out.stats.computed_rows.push_back(n);
      edges.push_back(layer.edges_read(gl, all_rows, {}));
      layer.set_halo(nullptr, 0, nullptr);
      h_dst = upd;
      out.layer_outputs.push_back(h_dst);
      continue;
    }

    const at::Tensor& tau_t = tau_layers[size_t(t - 1)];
    const at::Tensor &comp_rows = comp_list[size_t(t)], &act_rows = act_list[size_t(t)],
                     &band_rows = band_list[size_t(t)];
    out.stats.active_rows.push_back(act_rows.numel());
    out.stats.computed_rows.push_back(comp_rows.numel());
    {
      const at::Tensor entries_t = comp_entries_dev.select(0, t - 1);
      edges.push_back(layer.edges_read(gl, comp_rows, entries_t));
      edges_are_entries = edges_are_entries && edges.back().is_same(entries_t);
    }

    drop_input(comp_rows, width_change, width_change ? frozen_list[size_t(t)] : at::Tensor());
    at::Tensor upd;
    if (compact) {
      RECORD_USER_SCOPE("aggregate (compact)");
      detail::TransientCsrScope transient;
      upd = layer.forward(*compact, hin, compact_rows);
    } else {
      RECORD_USER_SCOPE("aggregate");
      if (t == 1 && first_upd.defined()) {
        out.stats.first_layer_early = true;
        upd = std::exchange(first_upd, at::Tensor());
      } else {
        auto rows_forward = [&] {
          return forward_rows(layer, gl, hin, comp_rows, comp_entries[size_t(t)], comp_pos_all.select(0, t - 1));
        };
        upd = t == 1 && comp_rows.numel() == n ? first_forward(layer, rows_forward) : rows_forward();
      }
    }
    layer.set_halo(nullptr, 0, nullptr);
    const bool has_band = band_rows.numel() > 0;
    // Position in comp_rows of the active rows (comp_rows = act_rows without a band).
    auto active_part = [&](const at::Tensor& u) {
      return has_band ? u.index_select(0, torch::searchsorted(comp_rows, act_rows)) : u;
    };
    at::Tensor next, frozen_band;  // frozen_band: the band rows' values had they stayed inactive
    at::Tensor diff;  // the band rows' update - frozen value (detached), where a branch built it
    // This layer's row map and active rows, for merge_rows / band_diff: one kernel each on the
    // GPU where a gather, a copy and a scatter (and their backward nodes) built the output.
    const at::Tensor pos_t = comp_pos_all.select(0, t - 1), active_t = active_all.select(0, t - 1);
    // The straight-through term below is (s - base) * (update - frozen). With base = s.detach()
    // (hard masks, or layer 1) its value is 0 and so is its gradient with respect to (update -
    // frozen): only s carries one. The difference is then built from detached rows, which saves
    // two passes over every row of h_dst in the backward (index_select's full-size gradient and
    // its accumulation). With soft masks from layer 2 on, base is the hard mask.
    const bool band_diff_grad = c.soft_masks && t >= 2;
    auto band_input = [&](const at::Tensor& v) { return band_diff_grad ? v : v.detach(); };
    {  // the rows that keep their value (or take the self-only one)
      RECORD_USER_SCOPE("frozen rows");
      // Every row active (layer 1 whenever tau(1) is 0: lambda = 0): the update is the output, in
      // row order; no gather (and no scatter in the backward). Rows of the surrogate band (at
      // layer 1 of the learned variant, the nodes whose eps is near tau(1) = 0) need their frozen
      // values only for the straight-through difference, detached unless band_diff_grad: computed
      // for the band rows alone and without a graph (the self term at a width-changing layer,
      // h_dst's rows otherwise), instead of the self term's cat with the update and a gather of
      // every row. With band rows, not with BatchNorm at a width-changing hidden layer (its
      // statistics span both), nor where a rank's next exchange takes the update (`pending`,
      // below), nor with soft masks (band_diff_grad: the term is then added to `next` in place,
      // which must not be the layer's output that its backward keeps).
      const bool all_active =
          act_rows.numel() == n &&
          (!has_band || (!band_diff_grad && (width_change ? last || !c.batchnorm : !(pass && t < L))));
      if (all_active) {
        upd = post(upd);
        next = upd;
        if (has_band && width_change && band_rows.numel() * 2 >= n) {
          // Most rows in the band (layer 1 of the learned variant: every node whose eps is near
          // tau(1) = 0): their difference in one pass over the rows, without gathering hin's and
          // the update's band rows (no BatchNorm here: all_active excludes it with a band). Its
          // self term (post: a ReLU unless last) from f_delta's
          // input z = input_transform(hin) where the layer's self term is z + bias (GCN), instead
          // of another product over every row.
          at::NoGradGuard no_grad;
          const at::Tensor bias = t == 1 && z.defined() ? layer.self_only_bias() : at::Tensor();
          diff = bias.defined() ? detail::band_diff(z.narrow(0, 0, n), upd, pos_t, band_rows, bias, !last)
                                : detail::band_diff(post(layer.self_only_leading(hin, n)), upd, pos_t, band_rows);
        } else if (has_band && width_change) {
          at::NoGradGuard no_grad;
          frozen_band = post(layer.self_only(hin.index_select(0, band_rows)));
        } else if (has_band) {
          frozen_band = band_input(h_dst).index_select(0, band_rows);
        }
      } else if (width_change && frozen_list[size_t(t)].numel() * 2 >= n && (last || !c.batchnorm)) {
        // Inactive rows at width-changing layers: the layer with the self term only. Most rows
        // inactive (the classifier of a model whose nodes mostly stopped): the self term of
        // every row, then the computed rows' updates merged in. One GEMM over the rows
        // instead of a gather of the frozen rows, a gather of the output, and their two
        // full-size index_add backwards. Needs a row-wise post: no BatchNorm over rows.
        upd = post(upd);
        // (A slice of a rank's owned rows would cost the backward a zero-filled copy of hin.)
        at::Tensor self = post(layer.self_only_leading(hin, n));
        next = detail::merge_rows(self, upd, pos_t, active_t);
        if (has_band && !band_diff_grad) diff = detail::band_diff(self, upd, pos_t, band_rows);
        else if (has_band) frozen_band = band_input(self).index_select(0, band_rows);
      } else if (width_change) {
        // Few rows frozen, or BatchNorm over the rows: the frozen rows' self term alone.
        const at::Tensor& frozen_rows = frozen_list[size_t(t)];
        at::Tensor self = layer.self_only(hin.index_select(0, frozen_rows));
        const at::Tensor both = post(torch::cat({upd, self}, 0));
        upd = both.slice(0, 0, comp_rows.numel());
        const at::Tensor frozen = both.slice(0, comp_rows.numel());
        // Every row is active (its update) or not (its self-only value; an active band row takes
        // the update): one gather of `both` builds the output, instead of zeros and two scatters.
        const auto idx = act_rows.options();
        const at::Tensor where =
            torch::empty({n}, idx)
                .index_put_({frozen_rows}, torch::arange(frozen_rows.numel(), idx) + comp_rows.numel())
                .index_put_({act_rows}, has_band ? torch::searchsorted(comp_rows, act_rows)
                                                 : torch::arange(act_rows.numel(), idx));
        next = both.index_select(0, where);
        if (has_band) frozen_band = band_input(frozen).index_select(0, torch::searchsorted(frozen_rows, band_rows));
      } else {
        // Inactive rows keep the previous layer's value: one copy of h_dst with the active rows
        // replaced (the backward routes their gradient to the update, the rest to h_dst), or on
        // a rank whose next layer exchanges halo rows, that exchange's update (`pending`).
        upd = post(upd);
        if (pass && t < L) pending = detail::RowUpdate{act_rows, active_part(upd), {}, {}};
        else next = detail::merge_rows(h_dst, upd, pos_t, active_t);
        if (has_band && !band_diff_grad) diff = detail::band_diff(h_dst, upd, pos_t, band_rows);
        else if (has_band) frozen_band = band_input(h_dst).index_select(0, band_rows);
      }
    }
    if (has_band) {
      // Straight-through: forward keeps the hard mask, backward sees
      // d/d(eps, tau) of sigmoid((eps - tau) / kappa) * (update - frozen).
      if (!diff.defined())
        diff = band_input(upd).index_select(0, torch::searchsorted(comp_rows, band_rows)) - frozen_band;
      if (!band_diff_grad) {
        // (s - s.detach()) * diff: zero, with a gradient for s only (surrogate.h). A rank's
        // pending update carries the term as zeros into its next exchange, which sends the band
        // rows to their readers: their gradients come back through it.
        if (pending) {
          pending->add_rows = band_rows;
          pending->add_values = detail::band_straight_through_term(eps, tau_t, band_rows, diff, c.kappa);
        } else {
          next = detail::band_straight_through(next, eps, tau_t, band_rows, diff, c.kappa);
        }
      } else {
        // Soft masks: base is the hard mask, and the difference carries its gradient too.
        const at::Tensor s = torch::sigmoid((eps.index_select(0, band_rows) - tau_t) / c.kappa);
        const at::Tensor base = active_all.select(0, t - 1).index_select(0, band_rows).to(s.scalar_type());
        // In place: `next` is a fresh tensor (an index_put or index_select of the rows) that no
        // backward reads, so this saves a copy of every row.
        const at::Tensor st = (s - base).unsqueeze(1) * diff;
        if (pending) {
          pending->add_rows = band_rows;
          pending->add_values = st;
        } else {
          next.index_add_(0, band_rows, st);
        }
      }
    }
    if (t == 1) z = at::Tensor();  // (the learned variant's f_delta input: its last reader was layer 1)
    if (pending) continue;  // h_dst and this layer's output come with the next exchange
    h_dst = next;
    out.layer_outputs.push_back(h_dst);
  }
  if (exchange_in_place) {
    out.layer_outputs.clear();  // the in-place updates overwrote them
    if (L >= 2) m.halo_rows_held = out.stats.deep_halo_rows >= 0 ? out.stats.deep_halo_rows : g.num_halo();
  }
  // (Then they are comp_entries_dev already: no stack of its rows.)
  out.stats.pending_edges = edges_are_entries && int64_t(edges.size()) == L ? comp_entries_dev : torch::stack(edges);
  if (!m.defer_stats) out.stats.settle();
  out.logits = pass ? pass->finish(h_dst) : h_dst;
  out.depth = depth;
  out.eps = eps;
  // AD#: this pass's embeddings calibrate the next pass's depth benefit.
  if (c.variant == "ad_sharp" && training && labels.defined() && train_mask.defined())
    m.update_sharp(g, x.slice(0, 0, n), out.layer_outputs, g.degree.slice(0, 0, n),
                   labels.slice(0, 0, n), train_mask.slice(0, 0, n));
  return out;
}

}  // namespace adgnn
