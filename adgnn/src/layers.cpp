// The six backbones, written aggregation-first where the layer is linear in its neighbours, so
// only the chosen rows are aggregated and transformed. Weight layout: W is [in, out], y = x W.
#include "layers.h"

#include "halo.h"
#include "kernels.h"

#include <torch/torch.h>

#include <cmath>
#include <optional>

namespace adgnn::detail {

namespace F = torch::nn::functional;

EdgeList edges_of_rows(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                       int64_t entries) {
  EdgeList e;
  const at::Tensor begin = rowptr.index_select(0, rows);
  const at::Tensor counts = rowptr.index_select(0, rows + 1) - begin;
  e.dst_local = entries >= 0 ? at::repeat_interleave(counts, std::optional<int64_t>(entries))
                             : torch::repeat_interleave(counts);
  const at::Tensor first = (counts.cumsum(0) - counts).index_select(0, e.dst_local);
  e.edge = begin.index_select(0, e.dst_local) +
           (torch::arange(e.dst_local.numel(), rowptr.options()) - first);
  e.src = col.index_select(0, e.edge).to(torch::kInt64);
  return e;
}

at::Tensor column_sums(const at::Tensor& x) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (x.is_cuda() && x.dim() == 2) return kernels::column_sums_cuda(x);
#endif
  return x.sum(0);
}

std::pair<at::Tensor, at::Tensor> relu_grad_column_sums(const at::Tensor& g, const at::Tensor& out, double scale) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (g.is_cuda() && g.dim() == 2) return kernels::relu_grad_column_sums_cuda(g, out, scale);
#endif
  // (g * scale, then masked: the rounding of the separate dropout's backward, then the ReLU's.)
  const at::Tensor masked = at::threshold_backward(scale == 1 ? g : g * scale, out, 0);
  return {masked, masked.sum(0)};
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
                            const at::Tensor& b, bool relu, int64_t rows, int64_t room) {
    const at::Tensor xr = rows == x.size(0) ? x : x.narrow(0, 0, rows);
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
                                                const at::Tensor& w, const at::Tensor& b, int64_t rows,
                                                const at::Tensor& gid, int64_t key, int64_t threshold,
                                                double scale) {
    const at::Tensor xr = rows == x.size(0) ? x : x.narrow(0, 0, rows);
    const at::Tensor out = addmm_relu(b, xr, w);
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
    return x + b;
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
  return LinearFn::apply(x, w, b, false, leading_rows(x, rows), room);
}

at::Tensor linear_relu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows, int64_t room) {
  return LinearFn::apply(x, w, b, true, leading_rows(x, rows), room);
}

std::pair<at::Tensor, at::Tensor> linear_relu_dropout(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                      int64_t rows, const DropoutMask& mask) {
  const int64_t r = leading_rows(x, rows);
  TORCH_CHECK(mask.gid.numel() == r, "linear_relu_dropout: one global id per output row");
  // The 64-bit key and threshold travel through autograd's int64 slots bit for bit.
  const auto out = LinearReluDropoutFn::apply(x, w, b, r, mask.gid, int64_t(mask.key), int64_t(mask.threshold),
                                              double(mask.scale));
  return {out[0], out[1]};
}

at::Tensor Layer::edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& rows_entries) const {
  if (rows_entries.defined()) return rows_entries;
  if (rows.numel() == 0) return torch::zeros({}, g.rowptr.options());
  if (rows.numel() == g.num_dst) return torch::full({}, g.col.numel(), g.rowptr.options());
  return (g.rowptr.index_select(0, rows + 1) - g.rowptr.index_select(0, rows)).sum();
}

std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> Layer::read_csrs(const MessageGraph& g) const {
  return std::vector<std::pair<at::Tensor, at::Tensor>>{{g.rowptr, g.col}};
}

at::Tensor Layer::rows_read(const MessageGraph& g, const at::Tensor& rows) const {
  const auto csrs = read_csrs(g);
  if (!csrs) return {};
  std::vector<at::Tensor> sources{rows};
  for (const auto& [rowptr, col] : *csrs) sources.push_back(edges_of_rows(rowptr, col, rows).src);
  return std::get<0>(torch::_unique(torch::cat(sources), /*sorted=*/true));
}

at::Tensor Layer::read_flags(const MessageGraph& g, const at::Tensor& rows) const {
  const auto csrs = read_csrs(g);
  if (!csrs) return {};
  const auto opts = g.rowptr.options().dtype(torch::kUInt8);
#ifdef ADGNN_HAVE_CUDA_KERNELS
  at::Tensor flags = g.rowptr.is_cuda() ? kernels::zeroed_cuda({g.num_src}, opts) : torch::zeros({g.num_src}, opts);
#else
  at::Tensor flags = torch::zeros({g.num_src}, opts);
#endif
  if (csrs->empty()) return flags.index_fill_(0, rows, 1);
  for (const auto& [rowptr, col] : *csrs) kernels::mark_rows_read(rowptr, col, rows, flags);
  return flags;
}

at::Tensor Layer::add(const std::string& name, at::Tensor t) {
  t = t.to(device_, dtype_);  // initialised on the CPU generator, so every device starts identically
  t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}
at::Tensor Layer::glorot(const std::string& name, int64_t fan_in, int64_t fan_out) {
  return glorot_shape(name, {fan_in, fan_out}, fan_in, fan_out);
}
at::Tensor Layer::glorot_shape(const std::string& name, std::vector<int64_t> shape,
                               int64_t fan_in, int64_t fan_out) {
  const double a = std::sqrt(6.0 / double(fan_in + fan_out));
  return add(name, torch::empty(shape).uniform_(-a, a, gen_));
}
at::Tensor Layer::zeros(const std::string& name, int64_t n) {
  return add(name, torch::zeros({n}));
}

at::Tensor attention_aggregate(const at::Tensor& rowptr, const at::Tensor& src, const at::Tensor& dst, bool cache,
                               const at::Tensor& score_edge, const at::Tensor& score_self,
                               const at::Tensor& z, const at::Tensor& z_self) {
  const int64_t heads = score_self.size(1), C = z.size(2);
  at::Tensor m = score_self.detach().clone();  // per-row max, for a stable exp (a max: any order)
  if (dst.numel() > 0)
    m = m.scatter_reduce(0, dst.unsqueeze(1).expand({-1, heads}), score_edge.detach(), "amax",
                         /*include_self=*/true);
  const at::Tensor a_edge = (score_edge - m.index_select(0, dst)).exp();
  const at::Tensor a_self = (score_self - m).exp();
  const at::Tensor ones = torch::ones({z.size(0), 1}, z.options());
  std::optional<TransientCsrScope> transient;
  if (!cache) transient.emplace();
  std::vector<at::Tensor> out;
  for (int64_t h = 0; h < heads; ++h) {
    // One pass per head gives numerator (columns < C) and denominator (column C).
    const at::Tensor zh = torch::cat({z.select(1, h), ones}, 1);
    const at::Tensor wh = a_edge.select(1, h);
    const at::Tensor sums = csr_aggregate(rowptr, src, wh, zh);
    const at::Tensor ah = a_self.select(1, h).unsqueeze(1);
    out.push_back((sums.slice(1, 0, C) + ah * z_self.select(1, h)) / (sums.slice(1, C, C + 1) + ah));
  }
  return torch::stack(out, 1);
}

namespace {

// The source rows of destination rows `rows` (sorted, unique): all of them are the leading
// num_dst rows, a view instead of a copy (and no scatter in the backward).
at::Tensor self_rows(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) {
  return rows.numel() == g.num_dst ? h.slice(0, 0, g.num_dst) : h.index_select(0, rows);
}
// GCN's self-loop weight 1 / (d_v + 1) of each of `rows`, for csr_aggregate over them: the
// graph's, computed once, one per destination row (csr_aggregate reads the listed rows' own: no
// gather, a launch per layer on the host-bound AD steps); a graph built without it, or in another
// precision: computed here for `rows`.
at::Tensor gcn_self_weight(const MessageGraph& g, const at::Tensor& rows, c10::ScalarType dt) {
  const bool all = rows.numel() == g.num_dst;
  if (g.gcn_self_weight.defined() && g.gcn_self_weight.scalar_type() == dt)
    return g.gcn_self_weight.slice(0, 0, g.num_dst);
  const at::Tensor d = all ? g.degree.slice(0, 0, g.num_dst) : g.degree.index_select(0, rows);
  return (d.to(dt) + 1).reciprocal();
}

// csr_aggregate's rows for a layer's `rows` (sorted and distinct): undefined when they are every
// destination row, which are then in order; the kernels read them without the per-row index and
// the long rows' output slots (built per call), and the backward sees the plain every-row case.
at::Tensor csr_rows(const MessageGraph& g, const at::Tensor& rows) {
  return rows.numel() == g.num_dst ? at::Tensor() : rows;
}

}  // namespace

at::Tensor Layer::aggregate_rows(const MessageGraph& g, const at::Tensor& weight, const at::Tensor& h,
                                 const at::Tensor& rows, const at::Tensor& self_weight) const {
  const at::Tensor listed = csr_rows(g, rows);
  const bool pos_applies = listed.defined() && rows_pos_.defined() && rows_pos_.numel() == g.rowptr.numel() - 1;
  return csr_aggregate(g.rowptr, g.col, weight, h, listed, self_weight, rows_entries_,
                       pos_applies ? rows_pos_ : at::Tensor());
}

namespace {

// GCN (Kipf & Welling): symmetric normalisation with self-loops, as PyG's GCNConv.
class GcnLayer : public Layer {
 public:
  GcnLayer(int64_t in, int64_t out, c10::Device d, c10::ScalarType dt, at::Generator gen) : Layer(in, out, d, dt, gen) {
    w_ = glorot("weight", in, out);
    b_ = zeros("bias", out);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const at::Tensor self_w = gcn_self_weight(g, rows, h.scalar_type());
    // Aggregate at the narrower width: transform first where the layer narrows (the classifier),
    // else aggregate first (only the chosen rows are transformed). Not when few rows are computed
    // (AD's deeper layers): transforming every source row (a rank's halo included) and its two
    // backward products would then cost more than aggregating the few rows' entries wider.
    if (out_dim_ < in_dim_ && !computes_few_rows(rows.numel(), g.num_dst)) {
      const at::Tensor out = BiasAddFn::apply(aggregate_rows(g, g.gcn_weight, h.mm(w_), rows, self_w), b_);
      return relu_fused_ ? torch::relu(out) : out;
    }
    return affine(aggregate_rows(g, g.gcn_weight, h, rows, self_w), -1, true);
  }
  at::Tensor self_only(const at::Tensor& h_rows) override { return self_only_leading(h_rows, -1); }
  at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) override { return affine(h, rows); }
  bool fuse_relu() override { return relu_fused_ = true; }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(w_); }
  at::Tensor self_only_bias() const override { return b_; }

 private:
  // output: the forward's (which fuses the next layer's dropout when asked), not self_only's.
  at::Tensor affine(const at::Tensor& h, int64_t rows = -1, bool output = false) {
    if (output && relu_fused_ && out_dropout_) {
      auto [dropped, out] = linear_relu_dropout(h, w_, b_, rows, *out_dropout_);
      undropped_ = out;
      return dropped;
    }
    if (!output || output_room_ < 0) return relu_fused_ ? linear_relu(h, w_, b_, rows) : linear(h, w_, b_, rows);
    with_room_ = relu_fused_ ? linear_relu(h, w_, b_, rows, output_room_) : linear(h, w_, b_, rows, output_room_);
    return with_room_;
  }
  at::Tensor w_, b_;
};

// GraphSAGE with mean aggregation, as PyG's SAGEConv: lin_l(mean of neighbours) + lin_r(x).
class SageLayer : public Layer {
 public:
  SageLayer(int64_t in, int64_t out, c10::Device d, c10::ScalarType dt, at::Generator gen) : Layer(in, out, d, dt, gen) {
    wl_ = glorot("lin_l.weight", in, out);
    bl_ = zeros("lin_l.bias", out);
    wr_ = glorot("lin_r.weight", in, out);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const at::Tensor deg = g.degree.index_select(0, rows).clamp_min(1).unsqueeze(1).to(h.scalar_type());
    const at::Tensor mean = aggregate_rows(g, {}, h, rows, {}) / deg;
    return torch::addmm(bl_, mean, wl_) + self_rows(g, h, rows).mm(wr_);
  }
  at::Tensor self_only(const at::Tensor& h_rows) override { return self_only_leading(h_rows, -1); }
  at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) override { return linear(h, wr_, bl_, rows); }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(wl_); }

 private:
  at::Tensor wl_, bl_, wr_;
};

// The rows whose transform a set of destination rows needs: the rows themselves and their
// sources. Returns (sorted unique rows, position of each source / row in it).
// Also the CSR of `rows` over those needed rows, for attention_aggregate: the graph's own when
// every row is computed and every source row is needed (its transpose is then cached).
struct Needed {
  at::Tensor rows, src_pos, dst_pos;
  at::Tensor csr_rowptr, csr_src;
  bool graph_csr = false;
};
Needed needed_rows(const MessageGraph& g, const EdgeList& e, const at::Tensor& rows) {
  Needed n;
  n.rows = std::get<0>(torch::_unique(torch::cat({rows, e.src}), /*sorted=*/true));
  n.src_pos = torch::searchsorted(n.rows, e.src);
  n.dst_pos = torch::searchsorted(n.rows, rows);
  // rows is sorted: all num_dst of them is 0..num_dst-1, and num_src needed rows is 0..num_src-1.
  n.graph_csr = rows.numel() == g.num_dst && n.rows.numel() == g.num_src;
  if (n.graph_csr) {
    n.csr_rowptr = g.rowptr;
    n.csr_src = g.col;
  } else {
    const at::Tensor counts = g.rowptr.index_select(0, rows + 1) - g.rowptr.index_select(0, rows);
    n.csr_rowptr = torch::cat({torch::zeros({1}, g.rowptr.options()), counts.cumsum(0)});
    n.csr_src = n.src_pos.to(torch::kInt32);
  }
  return n;
}

// GAT (Velickovic et al.), as PyG's GATConv: self-loops added, LeakyReLU(0.2) scores.
class GatLayer : public Layer {
 public:
  GatLayer(int64_t in, int64_t channels, int64_t heads, bool concat, c10::Device d, c10::ScalarType dt, at::Generator gen)
      : Layer(in, concat ? heads * channels : channels, d, dt, gen), heads_(heads), c_(channels), concat_(concat) {
    w_ = glorot("lin.weight", in, heads * channels);
    att_src_ = glorot_shape("att_src", {1, heads, channels}, heads, channels);
    att_dst_ = glorot_shape("att_dst", {1, heads, channels}, heads, channels);
    b_ = zeros("bias", out_dim_);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const EdgeList e = edges_of_rows(g.rowptr, g.col, rows, rows_entries_);
    const Needed n = needed_rows(g, e, rows);
    const at::Tensor z = (n.graph_csr ? h : h.index_select(0, n.rows)).mm(w_).view({-1, heads_, c_});
    const at::Tensor a_s = (z * att_src_).sum(-1), a_d = (z * att_dst_).sum(-1);
    const at::Tensor a_d_rows = a_d.index_select(0, n.dst_pos);
    const at::Tensor s_edge = F::leaky_relu(
        a_s.index_select(0, n.src_pos) + a_d_rows.index_select(0, e.dst_local),
        F::LeakyReLUFuncOptions().negative_slope(0.2));
    const at::Tensor s_self = F::leaky_relu(a_s.index_select(0, n.dst_pos) + a_d_rows,
                                            F::LeakyReLUFuncOptions().negative_slope(0.2));
    return finish(attention_aggregate(n.csr_rowptr, n.csr_src, e.dst_local, n.graph_csr, s_edge, s_self, z,
                                      z.index_select(0, n.dst_pos)));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override {
    return finish(h_rows.mm(w_).view({-1, heads_, c_}));  // softmax over the self-loop alone: 1
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(w_); }
  at::Tensor self_only_bias() const override { return concat_ ? b_ : at::Tensor(); }

 private:
  at::Tensor finish(const at::Tensor& out) {
    return (concat_ ? out.reshape({out.size(0), heads_ * c_}) : out.mean(1)) + b_;
  }
  int64_t heads_, c_;
  bool concat_;
  at::Tensor w_, att_src_, att_dst_, b_;
};

// GATv2 (Brody et al.), as PyG's GATv2Conv (share_weights = False).
class Gatv2Layer : public Layer {
 public:
  Gatv2Layer(int64_t in, int64_t channels, int64_t heads, bool concat, c10::Device d, c10::ScalarType dt, at::Generator gen)
      : Layer(in, concat ? heads * channels : channels, d, dt, gen), heads_(heads), c_(channels), concat_(concat) {
    wl_ = glorot("lin_l.weight", in, heads * channels);
    bl_ = zeros("lin_l.bias", heads * channels);
    wr_ = glorot("lin_r.weight", in, heads * channels);
    br_ = zeros("lin_r.bias", heads * channels);
    att_ = glorot_shape("att", {1, heads, channels}, heads, channels);
    b_ = zeros("bias", out_dim_);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const EdgeList e = edges_of_rows(g.rowptr, g.col, rows, rows_entries_);
    const Needed n = needed_rows(g, e, rows);
    const at::Tensor hn = n.graph_csr ? h : h.index_select(0, n.rows);
    const at::Tensor xl = torch::addmm(bl_, hn, wl_).view({-1, heads_, c_});
    const at::Tensor xr_rows = torch::addmm(br_, self_rows(g, h, rows), wr_).view({-1, heads_, c_});
    const at::Tensor xl_src = xl.index_select(0, n.src_pos), xl_self = xl.index_select(0, n.dst_pos);
    const auto slope = F::LeakyReLUFuncOptions().negative_slope(0.2);
    const at::Tensor s_edge =
        (F::leaky_relu(xl_src + xr_rows.index_select(0, e.dst_local), slope) * att_).sum(-1);
    const at::Tensor s_self = (F::leaky_relu(xl_self + xr_rows, slope) * att_).sum(-1);
    // The scores read [E, H, C] per-entry sums (GATv2's attention is a function of both ends'
    // features); the aggregation does not.
    return finish(attention_aggregate(n.csr_rowptr, n.csr_src, e.dst_local, n.graph_csr, s_edge, s_self, xl,
                                      xl_self));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override {
    return finish(torch::addmm(bl_, h_rows, wl_).view({-1, heads_, c_}));
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(wl_); }

 private:
  at::Tensor finish(const at::Tensor& out) {
    return (concat_ ? out.reshape({out.size(0), heads_ * c_}) : out.mean(1)) + b_;
  }
  int64_t heads_, c_;
  bool concat_;
  at::Tensor wl_, bl_, wr_, br_, att_, b_;
};

// MixHop (Abu-El-Haija et al.) with powers 0, 1, 2 over the GCN-normalised adjacency with
// self-loops, as PyG's MixHopConv; the classifier layer projects the three powers to out_dim.
class MixHopLayer : public Layer {
 public:
  MixHopLayer(int64_t in, int64_t channels, bool classifier, c10::Device d, c10::ScalarType dt, at::Generator gen)
      : Layer(in, classifier ? channels : 3 * channels, d, dt, gen), c_(channels), classifier_(classifier) {
    for (int p = 0; p < 3; ++p) w_[p] = glorot("lins." + std::to_string(p) + ".weight", in, channels);
    b_ = zeros("bias", 3 * channels);
    if (classifier_) {
      wc_ = glorot("classifier.weight", 3 * channels, channels);
      bc_ = zeros("classifier.bias", channels);
    }
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    // A h on the rows that the second hop reads, scattered back into source-row positions. On a
    // rank, halo rows of A h come from their owners, which compute them for the rows peers read.
    const at::Tensor needed = first_hop_rows(g, rows);
    const at::Tensor a1_needed = propagate(g, h, needed);
    at::Tensor a1 = torch::zeros({h.size(0), h.size(1)}, h.options()).index_put({needed}, a1_needed);
    if (halo_) a1 = halo_->inner_fill(a1, halo_layer_, *halo_stats_);
    const at::Tensor a1_rows = a1.index_select(0, rows);
    const at::Tensor a2_rows = propagate(g, a1, rows);
    return finish(torch::cat({self_rows(g, h, rows).mm(w_[0]), a1_rows.mm(w_[1]), a2_rows.mm(w_[2])}, 1));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override {
    return finish(torch::cat({h_rows.mm(w_[0]), h_rows.mm(w_[1]), h_rows.mm(w_[2])}, 1));
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(w_[1]); }
  at::Tensor edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& rows_entries) const override {
    if (rows.numel() == 0 && !halo_) return torch::zeros({}, g.rowptr.options());
    return Layer::edges_read(g, rows, rows_entries) + Layer::edges_read(g, first_hop_rows(g, rows), {});
  }
  // Two hops, and on a rank the rows peers read: every row.
  std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> read_csrs(const MessageGraph&) const override {
    return std::nullopt;
  }

 private:
  // The destination rows whose A h the second hop reads: `rows`, their neighbours that are
  // destination rows, and on a rank the rows whose A h peers read.
  at::Tensor first_hop_rows(const MessageGraph& g, const at::Tensor& rows) const {
    const EdgeList e = edges_of_rows(g.rowptr, g.col, rows);
    at::Tensor src = e.src;
    if (g.num_src > g.num_dst) src = src.index_select(0, (src < g.num_dst).nonzero().squeeze(1));
    std::vector<at::Tensor> parts{rows, src};
    if (halo_) parts.push_back(halo_->inner_rows(halo_layer_));
    return std::get<0>(torch::_unique(torch::cat(parts), true));
  }
  static at::Tensor propagate(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) {
    return csr_aggregate(g.rowptr, g.col, g.gcn_weight, h, csr_rows(g, rows), gcn_self_weight(g, rows, h.scalar_type()));
  }
  at::Tensor finish(const at::Tensor& cat) {
    const at::Tensor out = cat + b_;
    return classifier_ ? torch::addmm(bc_, out, wc_) : out;
  }
  int64_t c_;
  bool classifier_;
  at::Tensor w_[3], b_, wc_, bc_;

};

// DirGNN (Rossi et al.) around GCN, as PyG's DirGNNConv(GCNConv): alpha * conv over outgoing
// edges + (1 - alpha) * conv over incoming edges + a root linear term.
class DirGnnLayer : public Layer {
 public:
  DirGnnLayer(int64_t in, int64_t out, double alpha, c10::Device d, c10::ScalarType dt, at::Generator gen) : Layer(in, out, d, dt, gen), alpha_(alpha) {
    w_in_ = glorot("conv_in.weight", in, out);
    b_in_ = zeros("conv_in.bias", out);
    w_out_ = glorot("conv_out.weight", in, out);
    b_out_ = zeros("conv_out.bias", out);
    w_root_ = glorot("lin.weight", in, out);
    b_root_ = zeros("lin.bias", out);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const at::Tensor x_in =
        torch::addmm(b_in_, csr_aggregate(g.in_rowptr, g.in_col, g.in_weight, h, csr_rows(g, rows)), w_in_);
    const at::Tensor x_out =
        torch::addmm(b_out_, csr_aggregate(g.out_rowptr, g.out_col, g.out_weight, h, csr_rows(g, rows)), w_out_);
    return alpha_ * x_out + (1 - alpha_) * x_in + torch::addmm(b_root_, self_rows(g, h, rows), w_root_);
  }
  at::Tensor self_only(const at::Tensor& h_rows) override { return self_only_leading(h_rows, -1); }
  at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) override {
    return alpha_ * b_out_ + (1 - alpha_) * b_in_ + linear(h, w_root_, b_root_, rows);
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(w_in_); }
  std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> read_csrs(const MessageGraph& g) const override {
    return std::vector<std::pair<at::Tensor, at::Tensor>>{{g.in_rowptr, g.in_col}, {g.out_rowptr, g.out_col}};
  }
  at::Tensor edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor&) const override {
    if (rows.numel() == 0) return torch::zeros({}, g.rowptr.options());
    return (g.in_rowptr.index_select(0, rows + 1) - g.in_rowptr.index_select(0, rows)).sum() +
           (g.out_rowptr.index_select(0, rows + 1) - g.out_rowptr.index_select(0, rows)).sum();
  }

 private:
  double alpha_;
  at::Tensor w_in_, b_in_, w_out_, b_out_, w_root_, b_root_;
};

}  // namespace

bool known_backbone(const std::string& b) {
  return b == "gcn" || b == "gat" || b == "sage" || b == "mixhop" || b == "gatv2" || b == "dirgnn";
}

std::unique_ptr<Layer> make_layer(const std::string& backbone, int64_t in_dim, int64_t channels,
                                  const LayerOptions& opt) {
  const c10::Device d = opt.device;
  const c10::ScalarType dt = opt.dtype;
  if (backbone == "gcn") return std::make_unique<GcnLayer>(in_dim, channels, d, dt, opt.gen);
  if (backbone == "sage") return std::make_unique<SageLayer>(in_dim, channels, d, dt, opt.gen);
  if (backbone == "gat") return std::make_unique<GatLayer>(in_dim, channels, opt.heads, opt.concat_heads, d, dt, opt.gen);
  if (backbone == "gatv2") return std::make_unique<Gatv2Layer>(in_dim, channels, opt.heads, opt.concat_heads, d, dt, opt.gen);
  if (backbone == "mixhop") return std::make_unique<MixHopLayer>(in_dim, channels, opt.classifier, d, dt, opt.gen);
  if (backbone == "dirgnn") return std::make_unique<DirGnnLayer>(in_dim, channels, opt.dirgnn_alpha, d, dt, opt.gen);
  throw InputError("--model " + backbone + ": unknown backbone (gcn, gat, sage, mixhop, gatv2, dirgnn)");
}

}  // namespace adgnn::detail
