// One forward pass of the model (forward_pass.h): message passing with per-node depth (frozen
// rows, self-only updates at width-changing layers) and the straight-through surrogate for the
// hard masks (../shared/docs/method.md).
#include "model/forward_pass.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <ATen/OpMathType.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "depth/depth_target.h"
#include "ops/kernels.h"
#include "graph/subgraphs.h"
#include "ops/csr.h"

namespace adgnn::detail {

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

ForwardPass::ForwardPass(ModelParts& m, const MessageGraph& g, const at::Tensor& x, bool training, int64_t epoch,
                         const at::Tensor& labels, const at::Tensor& train_mask)
    : m_(m),
      c_(m.cfg),
      g_(g),
      x_(x.to(activation_type(m.cfg))),
      training_(training),
      epoch_(epoch),
      labels_(labels),
      train_mask_(train_mask),
      L_(m.cfg.layers),
      n_(g.num_dst) {}

ForwardOutput ForwardPass::run() {
  begin();
  depths();
  plan_halo();
  row_lists();
  edges_are_entries_ = masks_.has_value();  // every layer's count is its computed rows' entries
  for (int64_t t = 1; t <= L_; ++t) layer(t);
  finish();
  return std::move(out_);
}

bool ForwardPass::width_changes(int64_t t) const {
  const Layer& l = *m_.layers[size_t(t - 1)];
  return t == 1 || t == L_ || l.in_dim() != l.out_dim();
}

void ForwardPass::begin() {
  TORCH_CHECK(g_.num_src == n_ || g_.distributed(),
              "Model::forward: halo rows need a transport (the distributed trainer sets it)");
  TORCH_CHECK(x_.size(0) == g_.num_src, "Model::forward: x must have one row per source row");
  // (No launch: training_loss. In the logits' type: float32 where the activations are bfloat16.)
  out_.reg_loss = torch::zeros({}, x_.options().device(torch::kCPU).dtype(at::toOpMathType(x_.scalar_type())));
  // A plain model's layers compute every row (an AD model's never ask for this list).
  if (!m_.adaptive() && c_.degree_threshold <= 0) all_rows_ = torch::arange(n_, g_.rowptr.options());
  // A rank's training pass updates each exchanged input in place (HaloPass::set_in_place): no
  // one reads the earlier layers' outputs then, except AD#'s calibration.
  exchange_in_place_ = g_.distributed() && training_ && c_.variant != Variant::AdSharp;
  if (g_.distributed()) {
    halo_ = std::make_unique<HaloPass>(g_, L_);
    halo_->set_in_place(exchange_in_place_);
    // Only MixHop's layer 1 exchanges (its second hop): the others' read bits start at layer 2.
    halo_->set_first_read_layer(c_.backbone == Backbone::MixHop ? 1 : 2);
  }
  // A rank's training pass builds layer 1's output (over every row) with room for the halo rows
  // after it, where the layer can, and layer 2's exchange grows it into [owned; halo] instead of
  // copying every owned row (HaloPass::extend's grow). The room: as many rows as the last
  // training pass held, and an eighth more (the depths move little between steps); the first
  // pass, or one that needs more, copies.
  if (exchange_in_place_ && L_ >= 2 && m_.halo_rows_held >= 0)
    first_room_ = std::min(g_.num_halo(), m_.halo_rows_held + m_.halo_rows_held / 8);
  h_src_ = x_;
  hin_ = training_ ? dropout_rows(h_src_, g_.global_id, c_.dropout, c_.seed, epoch_, 1) : h_src_;
  comp_list_.resize(size_t(L_ + 1));
  act_list_.resize(size_t(L_ + 1));
  band_list_.resize(size_t(L_ + 1));
  frozen_list_.resize(size_t(L_ + 1));
  comp_entries_.assign(size_t(L_ + 1), -1);
}

// Per layer t (row t - 1): the rows computed, those fully updated (active) and those computed for
// the surrogate (band), and the frozen rows of the width-changing layers, as the rows of one bool
// tensor with their counts (depth_masks; one kernel on the GPU, where whole-tensor operations cost
// the host about 25 launches and layer-by-layer ones a dozen a layer).
void ForwardPass::depths() {
  spec_.layers = L_;
  for (int64_t t = 1; t <= L_; ++t)
    if (width_changes(t)) spec_.frozen_layers.push_back(t);
  if (m_.adaptive()) {
    RECORD_USER_SCOPE("depth benefit");
    if (c_.variant == Variant::Ad) z_ = m_.layers.front()->input_transform(hin_);
    // (f_delta reads z in float32 where the activations are bfloat16: its own precision is
    // ModelConfig::fdelta_precision.)
    eps_ = m_.depth_benefit(g_, z_.defined() ? z_.to(at::toOpMathType(z_.scalar_type())) : z_, training_, labels_,
                            train_mask_, out_.reg_loss);
    Thresholds th = m_.tau();
    tau_ = th.all;
    tau_layers_ = std::move(th.layers);
    if (training_ && !m_.depth_at_least.empty())
      out_.depth_loss = depth_target_penalty(eps_, tau_layers_, m_.depth_at_least_t, c_.kappa, c_.depth_target_weight,
                                             g_.transport.get());
    // T(v) = max{t : eps_v >= tau(t)}; tau increases, so it is the count of satisfied t.
    // The surrogate only matters where it carries a gradient: through tau(t) (theta enters from
    // t = 2 on) or through eps (the learned variant). Elsewhere the band would cost a self-only
    // update of nearly every row for a zero gradient.
    using Band = DepthMaskSpec::Band;
    spec_.band = !training_ ? Band::None : c_.band > 0 ? Band::Width : Band::All;
    spec_.band_width = c_.band * c_.kappa;
    spec_.no_band_at_layer1 = training_ && !eps_.requires_grad();
    masks_ = depth_masks(eps_, tau_, {}, g_.rowptr, spec_);
  } else if (c_.degree_threshold > 0) {
    // Exp-2: low-degree nodes never aggregate; the others use every layer.
    tau_ = torch::zeros({L_}, x_.options());
    tau_layers_ = tau_.unbind(0);
    masks_ = depth_masks({}, {},
                         torch::where(g_.degree.slice(0, 0, n_) > double(c_.degree_threshold), L_, 0).to(torch::kInt64),
                         g_.rowptr, spec_);
  } else {
    depth_ = torch::full({n_}, L_, torch::dtype(torch::kInt64).device(x_.device()));
  }
  if (!masks_) return;
  depth_ = masks_->depth;
  comp_all_ = masks_->stacked.narrow(0, 0, L_);
  active_all_ = masks_->stacked.narrow(0, L_, L_);
  band_all_ = masks_->stacked.narrow(0, 2 * L_, L_);
  // Each row's position among its layer's computed rows, -1 where not computed: the
  // aggregation's row map and merge_rows'.
  comp_pos_all_ = masks_->comp_pos;
  // Layer 1 computes every row when lambda = 0 (tau(1) = 0 <= every eps; docs/method.md): its
  // forward is issued before the wait for the counts, so that the device runs layer 1 (the
  // graph's SpMM and product) while the host reads the counts and builds the row lists,
  // instead of idling until the host has issued it. Kept only if the counts confirm
  // that every row is computed; the loop's call would be the same, with rows 0..n-1 listed.
  // A rank too: its layer 1 reads the input features it holds, no exchange, except
  // MixHop's, whose second hop exchanges (HaloPass::inner_fill) in the loop's order.
  first_layer_early_ = (!g_.distributed() || c_.backbone != Backbone::MixHop) && m_.adaptive() && c_.lambda == 0;
}

void ForwardPass::issue_first_layer() {
  RECORD_USER_SCOPE("layer 1");
  {
    RECORD_USER_SCOPE("aggregate");
    Layer& first = *m_.layers.front();
    first_upd_ = first_forward(first, [&] {
      return forward_rows(first, g_, hin_, m_.row_ids(n_, g_.rowptr.options()), g_.col.numel(),
                          comp_pos_all_.select(0, 0));
    });
  }
}

template <class Forward>
at::Tensor ForwardPass::first_forward(Layer& layer, Forward&& forward) {
  struct Reset {
    Layer& layer;
    ~Reset() { layer.set_output_room(-1); }
  } reset{layer};
  layer.set_output_room(first_room_);
  at::Tensor r = forward();
  grown_from_ = layer.take_output_with_room();
  return r;
}

void ForwardPass::plan_halo() {
  if (!halo_) return;
  if (!masks_) {
    halo_->set_computed({}, true);
  } else {
    // A rank on a GPU issues layer 1 before its halo plan, too, and runs the plan (the exchange
    // of the computed-row bits, the read bits and keep masks, the counts) on a second stream
    // beside it (the plan is ~40 small operations whose issue the device would otherwise wait
    // for before layer 1 could start). The default stream waits for the plan's stream once the
    // counts' copy, the row lists and the deeper layers' compact graph are queued there
    // (row_lists); the plan's stream first waits for the masks. (The plan's tensors stay alive
    // until the default stream has used them, or a later plan's stream, which first waits for
    // the default one, reuses their memory.)
    if (first_layer_early_ && x_.is_cuda()) {
      // The plan's stream waits for the masks, not for layer 1: the event goes before it.
      const c10::impl::VirtualGuardImpl cuda(x_.device().type());
      const c10::Stream side = halo_plan_stream(x_.device());
      c10::Event masked(x_.device().type());
      masked.record(cuda.getStream(x_.device()));
      issue_first_layer();
      masked.block(side);
      plan_stream_.emplace(side);
    }
    // Bit t - 1: computed at layer t.
    const at::Tensor layer_no = torch::arange(1, L_ + 1, depth_.options()).unsqueeze(1);  // [L, 1]
    halo_->set_computed(comp_all_.to(torch::kInt64).bitwise_left_shift(layer_no - 1).sum(0), false);
  }
  // Every exchange's rows, decided now: their sizes come back with the row lists.
  std::vector<bool> input_changed(size_t(L_ + 1), false);
  for (int64_t t = 2; t <= L_; ++t) {
    const Layer& prev = *m_.layers[size_t(t - 2)];
    input_changed[size_t(t)] = t - 1 == 1 || prev.in_dim() != prev.out_dim();
  }
  halo_->plan(input_changed, c_.backbone == Backbone::MixHop);
}

// Every layer's row lists (computed, active, surrogate band; frozen at width-changing layers) from
// one pass over the stacked masks (mask_rows) and one host copy of their sizes: on a GPU each
// nonzero waited for the device, three or four per layer left it idle between layers.
void ForwardPass::row_lists() {
  if (!masks_) return;
  // Rows of `stacked`: every layer's computed, then active, then band rows, then the frozen
  // rows of the width-changing layers (spec.frozen_layers); `lists` in the same order.
  std::vector<at::Tensor*> lists;
  for (auto* v : {&comp_list_, &act_list_, &band_list_})
    for (int64_t t = 1; t <= L_; ++t) lists.push_back(&(*v)[size_t(t)]);
  for (int64_t t : spec_.frozen_layers) lists.push_back(&frozen_list_[size_t(t)]);
  const int64_t listed_masks = int64_t(lists.size());
  // One host copy: the lists' sizes, each layer's CSR entries of its computed rows (the
  // aggregation's backward sizes its buffers with them instead of waiting for the device) and
  // the halo exchanges' sizes (a rank of a distributed run).
  comp_entries_dev_ = masks_->counts.narrow(0, listed_masks, L_);
  at::Tensor sizes = masks_->counts;
  // Compact halo inputs for layers >= 2 (docs/distributed.md): the count of halo rows they
  // read. "auto" only where the backward of few rows regroups their entries (the CPU; on a GPU
  // from kRegroupMinEntries), so that the per-pass graph needs no transpose.
  const bool try_compact_halo =
      halo_ && L_ >= 2 && g_.num_halo() > 0 && c_.backbone != Backbone::MixHop &&
      (c_.compact_halo == "on" ||
       (c_.compact_halo == "auto" && (x_.is_cpu() || g_.col.numel() >= kernels::regroup_min_entries())));
  const at::Tensor halo_read = try_compact_halo ? halo_->halo_read_after_first_layer(L_) : at::Tensor();
  // ... and the rows that layers >= 2 compute (and their CSR entries): the only ones whose
  // columns the compact graph needs remapped.
  const at::Tensor deep_rows_mask = try_compact_halo ? comp_all_.slice(0, 1).any(0) : at::Tensor();
  if (try_compact_halo)
    sizes = torch::cat({sizes, halo_read.sum().to(torch::kInt64).view({1}), deep_rows_mask.sum().view({1}),
                        (deep_rows_mask.to(torch::kInt64) * (g_.rowptr.slice(0, 1, n_ + 1) - g_.rowptr.slice(0, 0, n_)))
                            .sum()
                            .view({1})});
  const int64_t counts_at = listed_masks + L_ + (try_compact_halo ? 3 : 0);
  const at::Tensor halo_counts = halo_ ? halo_->plan_counts() : at::Tensor();
  if (halo_counts.defined()) sizes = torch::cat({sizes, halo_counts});
  if (first_layer_early_) {
    if (x_.is_cuda()) {
      const at::Tensor host = at::empty(sizes.sizes(), sizes.options().device(torch::kCPU).pinned_memory(true));
      host.copy_(sizes, /*non_blocking=*/true);
      const c10::impl::VirtualGuardImpl cuda(x_.device().type());
      c10::Event counted(x_.device().type());
      counted.record(cuda.getStream(x_.device()));
      if (!plan_stream_) issue_first_layer();
      counted.synchronize();
      sizes = host;
    } else {
      issue_first_layer();
      sizes = sizes.to(torch::kCPU).contiguous();
    }
  } else {
    sizes = sizes.to(torch::kCPU).contiguous();
  }
  if (halo_counts.defined()) halo_->set_plan_counts(sizes.slice(0, counts_at));
  const int64_t* size = sizes.data_ptr<int64_t>();
  int64_t listed = 0;  // the lists' total: their buffer sized without a second device wait
  for (int64_t k = 0; k < listed_masks; ++k) listed += size[k];
  const at::Tensor rows = mask_rows(*masks_, listed);  // by mask, then row
  for (int64_t t = 1; t <= L_; ++t) comp_entries_[size_t(t)] = size[listed_masks + t - 1];
  if (first_upd_.defined() && (size[0] != n_ || comp_entries_[1] != g_.col.numel())) first_upd_ = at::Tensor();
  if (try_compact_halo) {
    const int64_t held = size[listed_masks + L_];
    bool few_deep = true;  // every layer >= 2 computes few rows (the backward's regrouping)
    for (int64_t t = 2; t <= L_; ++t) few_deep = few_deep && size[t - 1] * 8 < n_;
    if (c_.compact_halo == "on" || (held * 4 < g_.num_halo() && few_deep)) {
      // Few rows computed: only their entries remapped (a layer computing many would build a
      // transpose of every entry). Built when layer 2 needs it, not now: the device, which the
      // host copy above left idle, then gets layer 1's kernels first and runs them while the
      // host builds it. (A rank whose layer 1 was issued before its plan builds it on the
      // plan's stream instead, below.)
      deep_plan_ = DeepGraphPlan{halo_read, deep_rows_mask, held, few_deep ? size[listed_masks + L_ + 1] : -1,
                                 size[listed_masks + L_ + 2]};
    }
  }
  int64_t offset = 0;
  for (int64_t k = 0; k < listed_masks; ++k) {
    const int64_t count = size[k];
    *lists[size_t(k)] = rows.narrow(0, offset, count);
    offset += count;
  }
  if (plan_stream_) {
    // Still on the plan's stream: the row lists above and the deeper layers' compact graph,
    // none of which reads layer 1's output, run there beside layer 1 too; on the default stream
    // they would be small kernels between layer 1 and layer 2's exchange. Then the default
    // stream waits for the plan's.
    if (deep_plan_) build_deep_graph();
    const c10::impl::VirtualGuardImpl cuda(x_.device().type());
    c10::Event planned(x_.device().type());
    planned.record(cuda.getStream(x_.device()));
    plan_stream_.reset();
    planned.block(cuda.getStream(x_.device()));
  }
}

void ForwardPass::build_deep_graph() {
  const DeepGraphPlan p = std::move(*deep_plan_);
  deep_plan_.reset();
  at::Tensor halo_pos;
  const at::Tensor deep_rows =
      p.deep_count >= 0 ? torch::nonzero_static(p.deep_rows_mask, p.deep_count).squeeze(1) : at::Tensor();
  deep_graph_.emplace(
      compact_halo_graph(g_, p.halo_read, p.held, c_.backbone == Backbone::DirGnn, halo_pos, deep_rows, p.deep_entries));
  halo_->set_compact_halo(halo_pos, p.held);
  out_.stats.deep_halo_rows = p.held;
}

void ForwardPass::layer(int64_t t) {
  // Profiler scopes (adgnn train --profile): per layer, and its parts.
  RECORD_USER_SCOPE(t == 1 ? "layer 1" : t == 2 ? "layer 2" : t == 3 ? "layer 3" : "layer 4+");
  Step s;
  s.t = t;
  s.layer = m_.layers[size_t(t - 1)].get();
  if (t == 2 && deep_plan_) build_deep_graph();
  s.graph = t >= 2 && deep_graph_ ? &*deep_graph_ : &g_;
  s.last = t == L_;
  s.width_change = width_changes(t);
  if (t > 1) exchange_input(s);
  s.layer->set_halo(halo_.get(), t, &out_.stats);
  if (!m_.adaptive() && c_.degree_threshold <= 0)
    plain_layer(s);
  else
    adaptive_layer(s);
}

void ForwardPass::exchange_input(Step& s) {
  const int64_t t = s.t;
  if (halo_) {
    RECORD_USER_SCOPE("halo exchange");
    const Layer& prev = *m_.layers[size_t(t - 2)];
    const bool prev_width_change = t - 1 == 1 || prev.in_dim() != prev.out_dim();
    const bool mixhop = c_.backbone == Backbone::MixHop;
    if (pending_) {
      h_src_ = halo_->extend_update(*pending_, t, mixhop, out_.stats);
      pending_.reset();
      h_dst_ = h_src_.slice(0, 0, n_);  // layer t-1's output
      keep_output(h_dst_);
    } else {
      const bool grow = t == 2 && grown_from_.defined() && h_dst_.is_same(grown_from_);
      h_src_ = halo_->extend(h_dst_, t, prev_width_change, mixhop, out_.stats, grow);
    }
    grown_from_ = at::Tensor();
  } else {
    h_src_ = h_dst_;
  }
  hin_ = h_src_;  // dropped out by drop_input, once the rows this layer reads are known
}

// The mask is a function of (global id, column), so dropping out only the rows that are read
// gives them the values of the full-tensor dropout. At AD's deeper layers (training), whose few
// computed rows read few rows, those rows become a compact input with a graph of their own
// (restrict_to): no pass over every source row. Width-changing layers also read their frozen
// rows (frozen_rows; undefined: every row, as plain layers); MixHop's two hops read every row.
void ForwardPass::drop_input(Step& s, const at::Tensor& comp_rows, bool reads_frozen, const at::Tensor& frozen_rows) {
  const int64_t t = s.t;
  if (!training_ || t == 1) return;
  RECORD_USER_SCOPE("dropout");
  const MessageGraph& gl = *s.graph;
  Layer& layer = *s.layer;
  at::Tensor read;
  const bool few = comp_rows.defined() && comp_rows.numel() > 0 && computes_few_rows(comp_rows.numel(), n_);
  const bool compact_ok = c_.compact_deep_layers == "on" || (c_.compact_deep_layers == "auto" && h_src_.is_cpu());
  if (few && !reads_frozen && compact_ok) read = layer.rows_read(gl, comp_rows);
  if (!read.defined()) {
    // The same rows as flags, plus any frozen rows: a full-size input whose unread rows
    // stay unset (no pass over them; a rank holds ~4x its own rows on products-scale, and
    // frozen rows are owned ones, docs/decisions/dropout-rows-read.md).
    at::Tensor flags;
    if (few && c_.dropout_rows_read && (!reads_frozen || frozen_rows.defined())) {
      flags = layer.read_flags(gl, comp_rows);
      if (flags.defined() && reads_frozen) flags.index_fill_(0, frozen_rows, 1);
    }
    if (flags.defined() && !reads_frozen) {
      // The frozen rows keep h_src as it is (merge_rows, or the next exchange's update): one
      // node passes it on and adds the dropped rows' gradient into its own.
      auto [dropped, kept] = dropout_rows_and_input(h_src_, gl.global_id, c_.dropout, c_.seed, epoch_, t, flags);
      hin_ = dropped;
      h_src_ = kept;
      if (halo_)
        halo_->replace_last(kept);
      else
        h_dst_ = kept;
      return;
    }
    hin_ = dropout_rows(h_src_, gl.global_id, c_.dropout, c_.seed, epoch_, t, flags);
    return;
  }
  hin_ = dropout_rows(h_src_.index_select(0, read), gl.global_id.index_select(0, read), c_.dropout, c_.seed, epoch_,
                      t);
  s.compact = restrict_to(gl, comp_rows, read, c_.backbone == Backbone::DirGnn);
  s.compact_rows = torch::searchsorted(read, comp_rows);
}

at::Tensor ForwardPass::post(const Step& s, at::Tensor v) {
  if (s.last) return v;
  if (c_.batchnorm) {
    const size_t k = size_t(s.t - 1);
    v = halo_ ? halo_->batch_norm(v, m_.bn_weight[k], m_.bn_bias[k], m_.bn_mean[k], m_.bn_var[k], training_, 0.1,
                                  1e-5)
              : m_.batchnorm(k, v, training_);
  }
  return s.layer->relu_fused() ? v : torch::relu(v);  // (without BatchNorm the layer may end with it)
}

void ForwardPass::plain_layer(Step& s) {
  const int64_t t = s.t;
  Layer& layer = *s.layer;
  const MessageGraph& gl = *s.graph;
  if (next_input_.defined())
    hin_ = std::exchange(next_input_, at::Tensor());
  else
    drop_input(s, {}, true, {});
  // A hidden layer ending with its fused ReLU also drops out the next layer's input (one
  // process: the next layer reads these rows only): the dropout's backward, a pass over
  // every row, becomes a factor in the ReLU's (linear_relu_dropout).
  const bool fuse = training_ && !s.last && c_.dropout > 0 && !halo_ && !c_.batchnorm && layer.relu_fused();
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
      layer.set_output_dropout(dropout_mask(gl.global_id, n_, x_.device(), c_.dropout, c_.seed, epoch_, t + 1));
    upd = t == 1 ? first_forward(layer, [&] { return layer.forward(gl, hin_, all_rows_); })
                 : layer.forward(gl, hin_, all_rows_);
    undropped = layer.take_output_before_dropout();
  }
  if (undropped.defined()) {
    next_input_ = upd;
    upd = undropped;
  }
  upd = post(s, upd);
  out_.stats.active_rows.push_back(n_);
  out_.stats.computed_rows.push_back(n_);
  edges_.push_back(layer.edges_read(gl, all_rows_, {}));
  layer.set_halo(nullptr, 0, nullptr);
  h_dst_ = upd;
  keep_output(h_dst_);
}

void ForwardPass::adaptive_layer(Step& s) {
  const int64_t t = s.t;
  Layer& layer = *s.layer;
  LayerRows r;
  r.comp = comp_list_[size_t(t)];
  r.act = act_list_[size_t(t)];
  r.band = band_list_[size_t(t)];
  if (s.width_change) r.frozen = frozen_list_[size_t(t)];
  // This layer's row map and active rows, for merge_rows / band_diff: one kernel each on the
  // GPU where a gather, a copy and a scatter (and their backward nodes) built the output.
  r.pos = comp_pos_all_.select(0, t - 1);
  r.active = active_all_.select(0, t - 1);
  out_.stats.active_rows.push_back(r.act.numel());
  out_.stats.computed_rows.push_back(r.comp.numel());
  {
    const at::Tensor entries_t = comp_entries_dev_.select(0, t - 1);
    edges_.push_back(layer.edges_read(*s.graph, r.comp, entries_t));
    edges_are_entries_ = edges_are_entries_ && edges_.back().is_same(entries_t);
  }
  drop_input(s, r.comp, s.width_change, r.frozen);
  const at::Tensor upd = aggregate(s, r);
  layer.set_halo(nullptr, 0, nullptr);
  Merged mg = frozen_rows(s, r, upd);
  if (r.band.numel() > 0) straight_through(s, r, mg);
  if (t == 1) z_ = at::Tensor();  // (the learned variant's f_delta input: its last reader was layer 1)
  if (pending_) return;  // h_dst and this layer's output come with the next exchange
  h_dst_ = mg.next;
  keep_output(h_dst_);
}

at::Tensor ForwardPass::aggregate(Step& s, const LayerRows& r) {
  const int64_t t = s.t;
  Layer& layer = *s.layer;
  if (s.compact) {
    RECORD_USER_SCOPE("aggregate (compact)");
    TransientCsrScope transient;
    return layer.forward(*s.compact, hin_, s.compact_rows);
  }
  RECORD_USER_SCOPE("aggregate");
  if (t == 1 && first_upd_.defined()) {
    out_.stats.first_layer_early = true;
    return std::exchange(first_upd_, at::Tensor());
  }
  auto rows_forward = [&] { return forward_rows(layer, *s.graph, hin_, r.comp, comp_entries_[size_t(t)], r.pos); };
  return t == 1 && r.comp.numel() == n_ ? first_forward(layer, rows_forward) : rows_forward();
}

// The rows that keep their value (or take the self-only one) and the layer's output.
// The straight-through term (straight_through) is (s - base) * (update - frozen). With base =
// s.detach() (hard masks, or layer 1) its value is 0 and so is its gradient with respect to
// (update - frozen): only s carries one. The difference is then built from detached rows, which
// saves two passes over every row of h_dst in the backward (index_select's full-size gradient
// and its accumulation). With soft masks from layer 2 on, base is the hard mask.
ForwardPass::Merged ForwardPass::frozen_rows(const Step& s, const LayerRows& r, at::Tensor upd) {
  RECORD_USER_SCOPE("frozen rows");
  const int64_t t = s.t;
  Layer& layer = *s.layer;
  const bool has_band = r.band.numel() > 0;
  const bool band_diff_grad = diff_carries_gradient(t);
  auto band_input = [&](const at::Tensor& v) { return band_diff_grad ? v : v.detach(); };
  Merged mg;
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
      r.act.numel() == n_ &&
      (!has_band || (!band_diff_grad && (s.width_change ? s.last || !c_.batchnorm : !(halo_ && t < L_))));
  if (all_active) {
    upd = post(s, upd);
    mg.next = upd;
    if (has_band && s.width_change && r.band.numel() * 2 >= n_) {
      // Most rows in the band (layer 1 of the learned variant: every node whose eps is near
      // tau(1) = 0): their difference in one pass over the rows, without gathering hin's and
      // the update's band rows (no BatchNorm here: all_active excludes it with a band). Its
      // self term (post: a ReLU unless last) from f_delta's input z = input_transform(hin)
      // where the layer's self term is z + bias (GCN), instead of another product over every row.
      at::NoGradGuard no_grad;
      const at::Tensor bias = t == 1 && z_.defined() ? layer.self_only_bias() : at::Tensor();
      mg.diff = bias.defined() ? band_diff(z_.narrow(0, 0, n_), upd, r.pos, r.band, like(bias, z_), !s.last)
                               : band_diff(post(s, layer.self_only_leading(hin_, n_)), upd, r.pos, r.band);
    } else if (has_band && s.width_change) {
      at::NoGradGuard no_grad;
      mg.frozen_band = post(s, layer.self_only(hin_.index_select(0, r.band)));
    } else if (has_band) {
      mg.frozen_band = band_input(h_dst_).index_select(0, r.band);
    }
  } else if (s.width_change && r.frozen.numel() * 2 >= n_ && (s.last || !c_.batchnorm)) {
    // Inactive rows at width-changing layers: the layer with the self term only. Most rows
    // inactive (the classifier of a model whose nodes mostly stopped): the self term of
    // every row, then the computed rows' updates merged in. One GEMM over the rows
    // instead of a gather of the frozen rows, a gather of the output, and their two
    // full-size index_add backwards. Needs a row-wise post: no BatchNorm over rows.
    upd = post(s, upd);
    // (A slice of a rank's owned rows would cost the backward a zero-filled copy of hin.)
    const at::Tensor self = post(s, layer.self_only_leading(hin_, n_));
    mg.next = merge_rows(self, upd, r.pos, r.active);
    if (has_band && !band_diff_grad)
      mg.diff = band_diff(self, upd, r.pos, r.band);
    else if (has_band)
      mg.frozen_band = band_input(self).index_select(0, r.band);
  } else if (s.width_change) {
    // Few rows frozen, or BatchNorm over the rows: the frozen rows' self term alone.
    const at::Tensor self = layer.self_only(hin_.index_select(0, r.frozen));
    const at::Tensor both = post(s, torch::cat({upd, self}, 0));
    upd = both.slice(0, 0, r.comp.numel());
    const at::Tensor frozen = both.slice(0, r.comp.numel());
    // Every row is active (its update) or not (its self-only value; an active band row takes
    // the update): one gather of `both` builds the output, instead of zeros and two scatters.
    const auto idx = r.act.options();
    const at::Tensor where =
        torch::empty({n_}, idx)
            .index_put_({r.frozen}, torch::arange(r.frozen.numel(), idx) + r.comp.numel())
            .index_put_({r.act},
                        has_band ? torch::searchsorted(r.comp, r.act) : torch::arange(r.act.numel(), idx));
    mg.next = both.index_select(0, where);
    if (has_band) mg.frozen_band = band_input(frozen).index_select(0, torch::searchsorted(r.frozen, r.band));
  } else {
    // Inactive rows keep the previous layer's value: one copy of h_dst with the active rows
    // replaced (the backward routes their gradient to the update, the rest to h_dst), or on
    // a rank whose next layer exchanges halo rows, that exchange's update (`pending`).
    upd = post(s, upd);
    if (halo_ && t < L_) {
      // Position in comp of the active rows (comp = act without a band).
      const at::Tensor active_upd = has_band ? upd.index_select(0, torch::searchsorted(r.comp, r.act)) : upd;
      pending_ = RowUpdate{r.act, active_upd, {}, {}};
    } else {
      mg.next = merge_rows(h_dst_, upd, r.pos, r.active);
    }
    if (has_band && !band_diff_grad)
      mg.diff = band_diff(h_dst_, upd, r.pos, r.band);
    else if (has_band)
      mg.frozen_band = band_input(h_dst_).index_select(0, r.band);
  }
  mg.upd = upd;
  return mg;
}

// Straight-through: the forward keeps the hard mask, the backward sees d/d(eps, tau) of
// sigmoid((eps - tau) / kappa) * (update - frozen) over the band rows.
void ForwardPass::straight_through(const Step& s, const LayerRows& r, Merged& mg) {
  const int64_t t = s.t;
  const at::Tensor& tau_t = tau_layers_[size_t(t - 1)];
  const bool band_diff_grad = diff_carries_gradient(t);
  if (!mg.diff.defined()) {
    const at::Tensor upd = band_diff_grad ? mg.upd : mg.upd.detach();
    mg.diff = upd.index_select(0, torch::searchsorted(r.comp, r.band)) - mg.frozen_band;
  }
  if (!band_diff_grad) {
    // (s - s.detach()) * diff: zero, with a gradient for s only (surrogate.h). A rank's
    // pending update carries the term as zeros into its next exchange, which sends the band
    // rows to their readers: their gradients come back through it.
    if (pending_) {
      pending_->add_rows = r.band;
      pending_->add_values = band_straight_through_term(eps_, tau_t, r.band, mg.diff, c_.kappa);
    } else {
      mg.next = band_straight_through(mg.next, eps_, tau_t, r.band, mg.diff, c_.kappa);
    }
    return;
  }
  // Soft masks: base is the hard mask, and the difference carries its gradient too.
  const at::Tensor sig = torch::sigmoid((eps_.index_select(0, r.band) - tau_t) / c_.kappa);
  const at::Tensor base = r.active.index_select(0, r.band).to(sig.scalar_type());
  // In place: `next` is a fresh tensor (an index_put or index_select of the rows) that no
  // backward reads, so this saves a copy of every row.
  const at::Tensor st = (sig - base).unsqueeze(1) * mg.diff;
  if (pending_) {
    pending_->add_rows = r.band;
    pending_->add_values = st;
  } else {
    mg.next.index_add_(0, r.band, st);
  }
}

void ForwardPass::finish() {
  if (exchange_in_place_) {
    out_.layer_outputs.clear();  // the in-place updates overwrote them
    if (L_ >= 2) m_.halo_rows_held = out_.stats.deep_halo_rows >= 0 ? out_.stats.deep_halo_rows : g_.num_halo();
  }
  // (Then they are comp_entries_dev already: no stack of its rows.)
  out_.stats.pending_edges =
      edges_are_entries_ && int64_t(edges_.size()) == L_ ? comp_entries_dev_ : torch::stack(edges_);
  if (!m_.defer_stats) out_.stats.settle();
  out_.logits = halo_ ? halo_->finish(h_dst_) : h_dst_;
  out_.logits = out_.logits.to(at::toOpMathType(out_.logits.scalar_type()));  // bfloat16: the loss in float32
  out_.depth = depth_;
  out_.eps = eps_;
  if (m_.adaptive()) out_.benefit_range = m_.benefit_range;
  // AD#: this pass's embeddings calibrate the next pass's depth benefit.
  if (c_.variant == Variant::AdSharp && training_ && labels_.defined() && train_mask_.defined())
    m_.update_sharp(g_, x_.slice(0, 0, n_), out_.layer_outputs, g_.degree.slice(0, 0, n_), labels_.slice(0, 0, n_),
                    train_mask_.slice(0, 0, n_));
}

}  // namespace adgnn::detail
