// The halo exchange and synchronised BatchNorm of a distributed forward pass (method.md, message
// passing: after layer 1 a row changes only while its node is computed, so only those rows
// travel, and only to ranks where a computed row reads them).
//
// Ordering: every communicating autograd operation takes and returns a scalar "token", chained
// in forward order and tied to the logits. Backward can only run an operation after the one that
// consumed its token, so every rank runs the backward exchanges in exactly the reverse forward
// order, also an operation whose rows nobody here reads (its gradient is zero, but the peers
// still expect the call).
#include "distributed/halo.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "graph/csr_cache.h"
#include "ops/grad_in_place.h"
#include "ops/kernels.h"

namespace adgnn::detail {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

RankTransport* transport_of(AutogradContext* ctx) {
  return reinterpret_cast<RankTransport*>(ctx->saved_data["transport"].toInt());
}

std::vector<int64_t> to_vec(const c10::IValue& v) { return v.toIntVector(); }

}  // namespace

namespace {

// [owned; halo], built in one allocation (a separate cat would copy every row once more):
// owned = the first num_owned rows of src_in, with rows `rows` replaced by `values` and
// `add_values` added at `add_rows` (a layer's update of the rows it computed; empty: none);
// halo = the previous copies (src_in's rows beyond num_owned when it has them, else prev_halo,
// else zeros) with rows recv_idx replaced by the owners' rows owned[send_idx].
// Taking the previous layer's [owned; halo] with the update, rather than the updated owned rows
// as a tensor of their own, saves a copy of every owned row in the forward and another in the
// backward per layer (docs/decisions/exchange-applies-update.md).
// Backward returns the received rows' gradients to their owners (added to owned's own) and the
// others' to the previous copies: a frozen row read at several later layers accumulates them all
// there.
// build (HaloPass::Build): Copy into a new tensor; InPlace: src_in's rows are changed where they
// change (HaloPass::set_in_place), through a detached alias, which shares src_in's version
// counter: a backward that had saved src_in fails loudly instead of reading new values;
// InPlaceRestoring: the same, and the backward writes the overwritten owned rows back (they are
// layer 1's output, which its backward reads: HaloPass::extend's grow); Grow: src_in, num_owned
// rows, is extended into its buffer's room (grow_into_room), no owned row copied.
class HaloExchangeFn : public torch::autograd::Function<HaloExchangeFn> {
 public:
  using Build = HaloPass::Build;
  static variable_list forward(AutogradContext* ctx, const at::Tensor& src_in, const at::Tensor& prev_halo,
                               const at::Tensor& values, const at::Tensor& add_values, const at::Tensor& token,
                               const at::Tensor& send_idx, const at::Tensor& recv_idx, const at::Tensor& rows,
                               const at::Tensor& add_rows, std::vector<int64_t> send_counts,
                               std::vector<int64_t> recv_counts, int64_t num_owned, int64_t num_halo,
                               int64_t transport, int64_t build_code) {
    auto* tr = reinterpret_cast<RankTransport*>(transport);
    probe_gradient_hand_over(src_in.device());  // for the backward's gradient_is_exclusive
    const auto build = Build(build_code);
    const bool in_place = build == Build::InPlace || build == Build::InPlaceRestoring;
    const int64_t n = num_owned;
    const bool in_halo = src_in.size(0) > n;  // src_in holds the previous copies
    TORCH_CHECK(!in_place || src_in.size(0) == n + num_halo, "HaloExchangeFn: in place needs [owned; halo] rows");
    at::Tensor src = build == Build::Grow ? grow_into_room(src_in, num_halo)
                     : in_place           ? src_in.detach()
                                          : torch::empty({n + num_halo, src_in.size(1)}, src_in.options());
    TORCH_CHECK(src.defined() && (build != Build::Grow || src_in.size(0) == n),
                "HaloExchangeFn: growing needs the owned rows alone, with room for ", num_halo, " rows after them");
    at::Tensor owned = src.slice(0, 0, n);
    if (build == Build::Copy) owned.copy_(src_in.slice(0, 0, n));
    if (build == Build::InPlaceRestoring) {
      // What the update overwrites (both index sets read before either write), and a second
      // alias to write it back through (src itself becomes the output: holding it would be a
      // reference cycle).
      ctx->saved_data["old_rows"] = owned.index_select(0, rows);
      ctx->saved_data["old_add"] = owned.index_select(0, add_rows);
      ctx->saved_data["restore_into"] = src_in.detach();
    }
    if (rows.numel() > 0) owned.index_copy_(0, rows, values);
    if (add_rows.numel() > 0) owned.index_add_(0, add_rows, add_values);
    const at::Tensor recv = tr->exchange(owned.index_select(0, send_idx).contiguous(), send_counts, recv_counts);
    at::Tensor halo = src.slice(0, n);
    // (Every halo row received: the previous copies would all be overwritten.)
    const bool has_prev = recv_idx.numel() < num_halo && (in_halo || prev_halo.numel() > 0);
    if (has_prev && !in_place) halo.copy_(in_halo ? src_in.slice(0, n) : prev_halo);
    else if (!has_prev && recv_idx.numel() < num_halo) halo.zero_();
    halo.index_copy_(0, recv_idx, recv);
    ctx->save_for_backward({send_idx, recv_idx, rows, add_rows});
    ctx->saved_data["send_counts"] = send_counts;
    ctx->saved_data["recv_counts"] = recv_counts;
    ctx->saved_data["num_owned"] = n;
    ctx->saved_data["in_halo"] = in_halo;
    ctx->saved_data["has_prev"] = has_prev;
    ctx->saved_data["transport"] = transport;
    return {src, token.clone()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor send_idx = saved[0], recv_idx = saved[1], rows = saved[2], add_rows = saved[3];
    const int64_t n = ctx->saved_data["num_owned"].toInt();
    const bool in_halo = ctx->saved_data["in_halo"].toBool(), has_prev = ctx->saved_data["has_prev"].toBool();
    const at::Tensor& g = grads[0];
    if (ctx->saved_data.count("restore_into")) {
      // Every later reader of the rows has run its backward (they read this one's output).
      const at::Tensor into = ctx->saved_data["restore_into"].toTensor().slice(0, 0, n);
      into.index_copy_(0, add_rows, ctx->saved_data["old_add"].toTensor());
      into.index_copy_(0, rows, ctx->saved_data["old_rows"].toTensor());
    }
    // src_in's gradient is the output's (src_in of the output's shape) or its owned rows (src_in
    // of those alone: layer 1's output), changed in place when nothing else holds it, which
    // saves a copy of every owned row per exchange (docs/decisions/gradients-in-place.md).
    const bool reuse = gradient_is_exclusive(g);
    const at::Tensor g_owned = g.slice(0, 0, n), g_halo = g.slice(0, n);
    const at::Tensor back = transport_of(ctx)->exchange(
        g_halo.index_select(0, recv_idx).contiguous(), to_vec(ctx->saved_data["recv_counts"]),
        to_vec(ctx->saved_data["send_counts"]));
    // One buffer for src_in's gradient: the owned rows' (their own plus what the peers return),
    // then (src_in holding the previous copies) the halo rows that were not received.
    at::Tensor grad_in = reuse ? (in_halo ? g : g_owned)
                               : torch::empty({in_halo ? g.size(0) : n, g.size(1)}, g.options());
    at::Tensor go = grad_in.slice(0, 0, n);
    if (!reuse) go.copy_(g_owned);
    go.index_add_(0, send_idx, back);
    at::Tensor grad_values, grad_add, grad_prev;
    if (add_rows.numel() > 0) grad_add = go.index_select(0, add_rows);
    if (rows.numel() > 0) {
      grad_values = go.index_select(0, rows);
      go.index_fill_(0, rows, 0);  // replaced: src_in's values there reached nothing
    }
    if (in_halo) {
      at::Tensor gh = grad_in.slice(0, n);
      if (has_prev) {
        if (!reuse) gh.copy_(g_halo);
        gh.index_fill_(0, recv_idx, 0);
      } else {
        gh.zero_();
      }
    } else if (has_prev) {
      grad_prev = g_halo.clone().index_fill_(0, recv_idx, 0);
    }
    return {grad_in, grad_prev, grad_values, grad_add, grads[1], {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  }
};

// BatchNorm1d over the rows of every rank: the statistics (and, backward, the two row sums of the
// input gradient) are summed over the ranks in float64. The parameters' gradients stay local:
// the trainer sums every parameter gradient over the ranks.
class SyncBatchNormFn : public torch::autograd::Function<SyncBatchNormFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, const at::Tensor& token,
                               at::Tensor running_mean, at::Tensor running_var, double momentum,
                               double eps, int64_t transport) {
    auto* tr = reinterpret_cast<RankTransport*>(transport);
    const int64_t C = x.size(1);
    const at::Tensor x64 = x.to(torch::kFloat64);
    at::Tensor stats = torch::cat({x64.sum(0), (x64 * x64).sum(0),
                                   torch::full({1}, double(x.size(0)), x64.options())})
                           .contiguous();
    tr->allreduce(stats, RankTransport::Op::Sum);
    const double n = stats[2 * C].item<double>();
    at::Tensor mean, var;
    if (n > 1) {
      mean = stats.slice(0, 0, C) / n;
      var = (stats.slice(0, C, 2 * C) / n - mean * mean).clamp_min(0);
      running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1 - momentum).add_((var * (n / (n - 1))).to(running_var.scalar_type()), momentum);
    } else {  // one row in the whole batch: PyTorch's choice, the running statistics
      mean = running_mean.to(torch::kFloat64);
      var = running_var.to(torch::kFloat64);
    }
    const at::Tensor invstd = (var + eps).rsqrt();
    const at::Tensor xhat = ((x64 - mean) * invstd).to(x.scalar_type());
    ctx->save_for_backward({xhat, weight, invstd});
    ctx->saved_data["n"] = n;
    ctx->saved_data["transport"] = transport;
    return {(xhat * weight + bias).to(x.scalar_type()), token.clone()};  // (bfloat16 rows stay bfloat16)
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor xhat = saved[0], weight = saved[1], invstd = saved[2];
    const double n = ctx->saved_data["n"].toDouble();
    const at::Tensor g = grads[0];
    const at::Tensor g_bias = g.sum(0), g_weight = (g * xhat).sum(0);
    at::Tensor sums = torch::cat({g_bias, g_weight}).to(torch::kFloat64).contiguous();
    transport_of(ctx)->allreduce(sums, RankTransport::Op::Sum);
    const int64_t C = xhat.size(1);
    at::Tensor grad_x;
    if (n > 1) {
      const at::Tensor sb = sums.slice(0, 0, C), sw = sums.slice(0, C, 2 * C);
      grad_x = ((g.to(torch::kFloat64) - sb / n - xhat.to(torch::kFloat64) * (sw / n)) *
                (weight.to(torch::kFloat64) * invstd))
                   .to(g.scalar_type());
    } else {
      grad_x = g * (weight.to(torch::kFloat64) * invstd).to(g.scalar_type());
    }
    return {grad_x, g_weight, g_bias, grads[1], {}, {}, {}, {}, {}};
  }
};

// The logits, with the last token as a second input: backward passes the logits' gradient on
// untouched and hands the token chain a zero, so every exchange's backward runs. The logits come
// back as a view of themselves (LibTorch's handling of a returned input): no pass over them, where
// `logits + token * 0` would cost an add forward and a sum backward over every row.
class TieTokenFn : public torch::autograd::Function<TieTokenFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& token) {
    ctx->saved_data["token_type"] = int64_t(token.scalar_type());
    return logits;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto type = c10::ScalarType(ctx->saved_data["token_type"].toInt());
    return {grads[0], torch::zeros({}, grads[0].options().dtype(type))};
  }
};

// ---- the halo layout, cached per rank graph ------------------------------------------------------

bool built_from(const HaloLayout& h, const MessageGraph& g) {
  if (g.send_rows.size() != h.send_rows.size() || g.recv_offset != h.recv_offset) return false;
  for (size_t p = 0; p < h.send_rows.size(); ++p)
    if (!g.send_rows[p].is_same(h.send_rows[p])) return false;
  return g.halo_owner.is_same(h.halo_owner) && g.boundary_row.is_same(h.boundary_row);
}

HaloLayout make_halo_layout(const MessageGraph& g, int P) {
  HaloLayout h;
  std::vector<at::Tensor> peers;
  h.send_offset.push_back(0);
  for (int p = 0; p < P; ++p) {
    const at::Tensor& rows = g.send_rows[size_t(p)];
    peers.push_back(torch::full({rows.numel()}, int64_t(p), rows.options()));
    h.send_offset.push_back(h.send_offset.back() + rows.numel());
  }
  h.send_all = torch::cat(g.send_rows);
  h.send_key = h.send_all * P + torch::cat(peers);
  // (32-bit: a rank's rows are far fewer than 2^31; its CSR has int32 columns.)
  if (g.boundary_row.numel() > 0) h.boundary = torch::stack({g.boundary_row, g.boundary_halo}).to(torch::kInt32);
  const c10::Device dev = g.rowptr.device();
  h.send_ends = torch::tensor(h.send_offset, torch::kInt64).to(dev);
  h.recv_ends = torch::tensor(g.recv_offset, torch::kInt64).to(dev);
  h.send_rows = g.send_rows;
  h.halo_owner = g.halo_owner;
  h.boundary_row = g.boundary_row;
  h.recv_offset = g.recv_offset;
  return h;
}

// Cached by the graph's CSR; a graph that shares the CSR with other send lists (none does:
// every rank graph has its own tensors) is built afresh rather than given the wrong ones.
HaloLayout halo_layout(const MessageGraph& g, int P) {
  static CsrCache<HaloLayout> cache;
  HaloLayout h = cache.get(g.rowptr, g.col, g.num_src, [&] { return make_halo_layout(g, P); });
  return built_from(h, g) ? h : make_halo_layout(g, P);
}

}  // namespace

HaloPass::HaloPass(const MessageGraph& g, int64_t layers)
    : g_(g), P_(g.transport->size()), layers_(layers) {
  TORCH_CHECK(layers <= 64, "distributed models support at most 64 layers");
  const auto opts = g.degree.options();
  token_ = torch::zeros({}, opts);
  if (at::GradMode::is_enabled()) token_.requires_grad_(true);
  layout_ = halo_layout(g, P_);
  dirty_send_ = torch::ones({layout_.send_all.numel()}, opts.dtype(torch::kBool));
  dirty_recv_ = torch::ones({g.num_halo()}, opts.dtype(torch::kBool));
}

void HaloPass::set_computed(const at::Tensor& comp_owned, bool all) {
  all_computed_ = all;
  comp_owned_ = comp_owned;
  peer_bits_ = halo_bits_ = at::Tensor();
  if (all) return;
  const auto [send_counts, recv_counts] = list_counts();
  // The masks travel in the narrowest integer type that holds their bits (a byte up to 8 layers:
  // an eighth of the bytes of int64 for every send row, 11 MB a rank on products-scale at 4 GPUs);
  // the non-negative values survive the round trip.
  const auto narrow = layers_ <= 8 ? torch::kUInt8 : layers_ <= 15 ? torch::kInt16
                      : layers_ <= 31 ? torch::kInt32 : torch::kInt64;
  comp_halo_ = g_.transport
                   ->exchange(comp_owned.to(narrow).index_select(0, layout_.send_all).unsqueeze(1).contiguous(),
                              send_counts, recv_counts)
                   .squeeze(1)
                   .to(torch::kInt64);
}

at::Tensor HaloPass::bit(const at::Tensor& comp, int64_t t) const {
  return comp.bitwise_right_shift(t - 1).bitwise_and(1).to(torch::kBool);
}

void HaloPass::read_bits() const {
  if (peer_bits_.defined()) return;
  const auto opts = g_.degree.options().dtype(torch::kInt64);
  peer_bits_ = torch::zeros({g_.num_dst * P_}, opts);
  halo_bits_ = torch::zeros({g_.num_halo()}, opts);
  if (g_.boundary_row.numel() == 0) return;
  // Plain models compute every row at every layer (undefined bits: all set). Layers before the
  // first one asked for are left out (bits t - 1 >= first_read_layer_ - 1 kept).
  const uint64_t layers = ~((uint64_t(1) << (first_read_layer_ - 1)) - 1);
  kernels::halo_read_bits(layout_.boundary, g_.halo_owner, P_,
                          all_computed_ ? at::Tensor() : comp_owned_, all_computed_ ? at::Tensor() : comp_halo_,
                          peer_bits_, halo_bits_, layers);
}

void HaloPass::set_first_read_layer(int64_t t) {
  TORCH_CHECK(t >= 1 && t <= 64 && !peer_bits_.defined(),
              "HaloPass::set_first_read_layer: a layer in 1..64, before the read bits are built");
  first_read_layer_ = t;
}

at::Tensor HaloPass::peer_reads(int64_t t) const {
  TORCH_CHECK(t >= first_read_layer_, "HaloPass::peer_reads: layer ", t, "'s reads were left out");
  read_bits();
  return bit(peer_bits_, t);
}

at::Tensor HaloPass::halo_reads(int64_t t) const {
  TORCH_CHECK(t >= first_read_layer_, "HaloPass::halo_reads: layer ", t, "'s reads were left out");
  read_bits();
  return bit(halo_bits_, t);
}

at::Tensor HaloPass::count_ends(const at::Tensor& send_keep, const at::Tensor& recv_keep) const {
  // Running sums at the peers' boundaries.
  // (The offsets are device tensors of the cached layout: a host tensor copied here would make
  // the host wait for the device, twice per planned exchange.)
  auto ends = [](const at::Tensor& keep, const at::Tensor& offset) {
    const at::Tensor csum = torch::cat({torch::zeros({1}, keep.options().dtype(torch::kInt64)),
                                        keep.to(torch::kInt64).cumsum(0)});
    return csum.index_select(0, offset);
  };
  return torch::cat({ends(send_keep, layout_.send_ends), ends(recv_keep, layout_.recv_ends)});
}

HaloPass::Counts HaloPass::counts_from_ends(const int64_t* e) const {
  std::vector<int64_t> send(static_cast<size_t>(P_)), recv(static_cast<size_t>(P_));
  for (int p = 0; p < P_; ++p) {
    send[size_t(p)] = e[p + 1] - e[p];
    recv[size_t(p)] = e[P_ + 2 + p] - e[P_ + 1 + p];
  }
  return {send, recv};
}

HaloPass::Counts HaloPass::counts(const at::Tensor& send_keep, const at::Tensor& recv_keep) const {
  const at::Tensor both = count_ends(send_keep, recv_keep).to(torch::kCPU).contiguous();
  return counts_from_ends(both.data_ptr<int64_t>());
}

at::Tensor HaloPass::exchange(const at::Tensor& src_in, const at::Tensor& prev_halo, const RowUpdate* update,
                              const at::Tensor& send_keep, const at::Tensor& recv_keep, const Counts& counts,
                              int64_t t, ForwardStats& st, Build build) {
  const auto& [send_counts, recv_counts] = counts;
  const int64_t full = layout_.send_all.numel();
  // The counts are on the host already: selections of known size need no further device wait,
  // and everything selected (plain models) needs no selection at all.
  int64_t n_send = 0, n_recv = 0;
  for (int p = 0; p < P_; ++p) {
    n_send += send_counts[size_t(p)];
    n_recv += recv_counts[size_t(p)];
  }
  at::Tensor recv_idx = n_recv == g_.num_halo() ? torch::arange(n_recv, layout_.send_all.options())
                                                : torch::nonzero_static(recv_keep, n_recv).squeeze(1);
  // Compact inputs (set_compact_halo): the received rows' positions among the held halo rows.
  const bool compact = compact_pos_.defined();
  if (compact) recv_idx = compact_pos_.index_select(0, recv_idx);
  const at::Tensor sidx = n_send == full ? layout_.send_all
                                         : layout_.send_all.index_select(0, torch::nonzero_static(send_keep, n_send).squeeze(1));
  const auto none_rows = torch::empty({0}, layout_.send_all.options());
  const auto none_values = torch::empty({0, src_in.size(1)}, src_in.options());
  auto or_none = [](const at::Tensor& v, const at::Tensor& none) { return v.defined() ? v : none; };
  const auto out = HaloExchangeFn::apply(
      src_in.contiguous(), or_none(prev_halo, none_values), update ? or_none(update->values, none_values) : none_values,
      update ? or_none(update->add_values, none_values) : none_values, token_, sidx, recv_idx,
      update ? or_none(update->rows, none_rows) : none_rows, update ? or_none(update->add_rows, none_rows) : none_rows,
      send_counts, recv_counts, g_.num_dst, compact ? compact_rows_ : g_.num_halo(),
      reinterpret_cast<int64_t>(g_.transport.get()), int64_t(build));
  token_ = out[1];
  const size_t k = size_t(t - 1);
  for (auto* v : {&st.halo_rows, &st.halo_rows_full, &st.halo_bytes, &st.halo_bytes_full})
    if (v->size() <= k) v->resize(k + 1, 0);
  const int64_t row_bytes = src_in.size(1) * int64_t(src_in.element_size());
  st.halo_rows[k] += sidx.numel();
  st.halo_rows_full[k] += full;
  st.halo_bytes[k] += sidx.numel() * row_bytes;
  st.halo_bytes_full[k] += full * row_bytes;
  return out[0];
}

HaloPass::Counts HaloPass::list_counts() const {
  std::vector<int64_t> send(static_cast<size_t>(P_)), recv(static_cast<size_t>(P_));
  for (int p = 0; p < P_; ++p) {
    send[size_t(p)] = layout_.send_offset[size_t(p) + 1] - layout_.send_offset[size_t(p)];
    recv[size_t(p)] = g_.recv_offset[size_t(p) + 1] - g_.recv_offset[size_t(p)];
  }
  return {send, recv};
}

HaloPass::Counts HaloPass::counts_of_layer(const int64_t* c) const {
  return {std::vector<int64_t>(c, c + P_), std::vector<int64_t>(c + P_, c + 2 * P_)};
}

HaloPass::Masks HaloPass::keep_range(int64_t t0, int64_t t1, const std::vector<bool>& width_changed,
                                     bool all_readers) {
  const int64_t K = t1 - t0 + 1;
  Masks m;
  if (all_computed_) {  // every row changes and every held row is read: everything goes
    m.send_go = torch::ones({K, layout_.send_all.numel()}, dirty_send_.options());
    m.recv_go = torch::ones({K, g_.num_halo()}, dirty_recv_.options());
    return m;
  }
  uint64_t changed = 0;  // bit t-1: layer t's input changed on every row
  for (int64_t t = t0; t <= t1; ++t)
    if (width_changed[size_t(t)]) changed |= uint64_t(1) << (t - 1);
  read_bits();
  m.send_go = torch::empty({K, layout_.send_all.numel()}, dirty_send_.options());
  m.recv_go = torch::empty({K, g_.num_halo()}, dirty_recv_.options());
  // A send-list entry is owned row send_all[i] going to its peer: it changes with that row and is
  // read when the peer reads it (peer_bits at its key); a halo row changes at its owner and is
  // read by the rows here.
  const at::Tensor send = kernels::halo_keep_masks(comp_owned_, layout_.send_all, peer_bits_, layout_.send_key,
                                                   layout_.send_ends, t0, K, changed, all_readers, dirty_send_,
                                                   m.send_go);
  const at::Tensor recv = kernels::halo_keep_masks(comp_halo_, {}, halo_bits_, {}, layout_.recv_ends, t0, K, changed,
                                                   all_readers, dirty_recv_, m.recv_go);
  m.counts = torch::cat({send, recv}, 1);
  return m;
}

void HaloPass::plan(const std::vector<bool>& input_changed, bool all_readers) {
  const int64_t L = int64_t(input_changed.size()) - 1;
  planned_.assign(size_t(std::max<int64_t>(L + 1, 0)), Planned{});
  plan_counts_ = at::Tensor();
  if (L < 2) return;
  // Every layer's masks in one pass per side, their counts copied to the host with the caller's
  // sizes (plain models: the lists' own sizes, known here).
  const Masks m = keep_range(2, L, input_changed, all_readers);
  for (int64_t t = 2; t <= L; ++t) {
    Planned& p = planned_[size_t(t)];
    p.send_keep = m.send_go[t - 2];
    p.recv_keep = m.recv_go[t - 2];
    if (all_computed_) {
      p.counts = list_counts();
      p.counted = true;
    }
  }
  if (!all_computed_) plan_counts_ = m.counts.flatten();
}

at::Tensor HaloPass::halo_read_after_first_layer(int64_t layers) const {
  if (g_.boundary_row.numel() == 0 || layers < 2)
    return torch::zeros({g_.num_halo()}, g_.degree.options().dtype(torch::kBool));
  // Read at any layer 2..layers (bits 1..layers-1).
  const int64_t deeper = layers >= 64 ? -2 : ((int64_t(1) << layers) - 1) & ~int64_t(1);
  read_bits();
  return halo_bits_.bitwise_and(deeper).ne(0);
}

void HaloPass::set_compact_halo(const at::Tensor& halo_pos, int64_t compact_rows) {
  TORCH_CHECK(halo_pos.numel() == g_.num_halo() && compact_rows >= 0 && compact_rows <= g_.num_halo(),
              "HaloPass::set_compact_halo: one position per halo row and at most every halo row");
  compact_pos_ = halo_pos;
  compact_rows_ = compact_rows;
}

void HaloPass::set_plan_counts(const at::Tensor& host_counts) {
  if (!plan_counts_.defined()) return;
  TORCH_CHECK(host_counts.is_cpu() && host_counts.scalar_type() == torch::kInt64 &&
                  host_counts.numel() == plan_counts_.numel(),
              "HaloPass::set_plan_counts: expected the ", plan_counts_.numel(), " planned counts on the host");
  const at::Tensor c = host_counts.contiguous();
  const int64_t* e = c.data_ptr<int64_t>();
  for (auto& p : planned_) {  // layers 2..L in order, 2P counts each
    if (!p.send_keep.defined() || p.counted) continue;
    p.counts = counts_of_layer(e);
    p.counted = true;
    e += 2 * P_;
  }
  plan_counts_ = at::Tensor();
}

std::tuple<at::Tensor, at::Tensor, HaloPass::Counts> HaloPass::masks_and_counts(int64_t t, bool width_changed,
                                                                                bool all_readers) {
  if (size_t(t) < planned_.size() && planned_[size_t(t)].send_keep.defined()) {
    const Planned& p = planned_[size_t(t)];
    TORCH_CHECK(p.counted, "HaloPass::extend: layer ", t, " was planned but its counts never set");
    return {p.send_keep, p.recv_keep, p.counts};
  }
  std::vector<bool> changed(size_t(t + 1), false);
  changed[size_t(t)] = width_changed;
  const Masks m = keep_range(t, t, changed, all_readers);
  if (all_computed_) return {m.send_go[0], m.recv_go[0], list_counts()};
  const at::Tensor c = m.counts.to(torch::kCPU).contiguous();
  return {m.send_go[0], m.recv_go[0], counts_of_layer(c.data_ptr<int64_t>())};
}

at::Tensor HaloPass::extend(const at::Tensor& h_owned, int64_t t, bool width_changed, bool all_readers,
                            ForwardStats& st, bool grow) {
  const auto [go, go_recv, c] = masks_and_counts(t, width_changed, all_readers);
  // The previous extend's halo rows are this layer's frozen copies when the widths agree (layer
  // 2 has none: layer 1 reads the input features, every row of which changes).
  const at::Tensor prev = last_src_.defined() && last_src_.size(1) == h_owned.size(1)
                              ? last_src_.slice(0, g_.num_dst)
                              : at::Tensor();
  grown_ = grow && h_owned.size(0) == g_.num_dst &&
           has_room(h_owned, compact_pos_.defined() ? compact_rows_ : g_.num_halo());
  st.first_output_grown = st.first_output_grown || grown_;
  last_src_ = exchange(h_owned, prev, nullptr, go, go_recv, c, t, st, grown_ ? Build::Grow : Build::Copy);
  return last_src_;
}

at::Tensor HaloPass::extend_update(const RowUpdate& update, int64_t t, bool all_readers, ForwardStats& st) {
  TORCH_CHECK(last_src_.defined(), "HaloPass::extend_update: layer ", t, " has no earlier extend to update");
  const auto [go, go_recv, c] = masks_and_counts(t, false, all_readers);
  Build build = in_place_ ? Build::InPlace : Build::Copy;
  if (build == Build::InPlace && grown_) {
    // The rows overwritten here are layer 1's output: kept and written back in the backward, or,
    // for a large update, left as they are under a copy (from then on, in place again).
    const int64_t changed = (update.rows.defined() ? update.rows.numel() : 0) +
                            (update.add_rows.defined() ? update.add_rows.numel() : 0);
    build = changed * 8 <= g_.num_dst ? Build::InPlaceRestoring : Build::Copy;
    grown_ = build == Build::InPlaceRestoring;
    if (grown_) st.rows_restored += changed;
    else st.grown_then_copied = true;
  }
  last_src_ = exchange(last_src_, at::Tensor(), &update, go, go_recv, c, t, st, build);
  return last_src_;
}

void HaloPass::replace_last(const at::Tensor& src) {
  TORCH_CHECK(last_src_.defined() && src.sizes() == last_src_.sizes(),
              "HaloPass::replace_last: the rows of the last extend, as they are");
  last_src_ = src;
}

at::Tensor HaloPass::inner_rows(int64_t t) {
  const at::Tensor keep = peer_reads(t).index_select(0, layout_.send_key);
  return std::get<0>(torch::_unique(layout_.send_all.index_select(0, keep.nonzero().squeeze(1)), true));
}

at::Tensor HaloPass::inner_fill(const at::Tensor& a_src, int64_t t, ForwardStats& st) {
  TORCH_CHECK(!compact_pos_.defined(), "HaloPass::inner_fill: MixHop's inner power needs every halo row");
  const at::Tensor keep = peer_reads(t).index_select(0, layout_.send_key);
  const at::Tensor recv_keep = halo_reads(t);
  return exchange(a_src.slice(0, 0, g_.num_dst), at::Tensor(), nullptr, keep, recv_keep, counts(keep, recv_keep), t,
                  st);
}

at::Tensor HaloPass::batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                at::Tensor& running_mean, at::Tensor& running_var, bool training,
                                double momentum, double eps) {
  if (!training)
    return torch::batch_norm(x, weight, bias, running_mean, running_var, false, momentum, eps, false);
  const auto out = SyncBatchNormFn::apply(x.contiguous(), weight, bias, token_, running_mean,
                                          running_var, momentum, eps,
                                          reinterpret_cast<int64_t>(g_.transport.get()));
  token_ = out[1];
  return out[0];
}

at::Tensor HaloPass::finish(const at::Tensor& logits) const {
  if (!token_.requires_grad()) return logits;
  return TieTokenFn::apply(logits, token_);
}

}  // namespace adgnn::detail
