// A pass's normalised depth benefit (ModelParts::depth_benefit): the fast variants' from the graph's
// same-label estimate, the learned variant's from f_delta, with its regulariser L_reg.
#include <torch/torch.h>

#include <string>

#include "adgnn/model.h"
#include "adgnn/ops.h"
#include "depth/depth_benefit.h"
#include "depth/heuristics.h"
#include "ops/csr.h"
#include "depth/fdelta.h"
#include "model/model_parts.h"

namespace adgnn::detail {

namespace {

bool same_tensor(const at::Tensor& a, const at::Tensor& b, int64_t version) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || (a.data_ptr() == b.data_ptr() && a.numel() == b.numel() && a._version() == version);
}

}  // namespace

const at::Tensor& ModelParts::row_ids(int64_t n, const at::TensorOptions& opts) {
  if (!row_ids_cache.defined() || row_ids_cache.numel() != n || row_ids_cache.device() != opts.device() ||
      row_ids_cache.scalar_type() != opts.dtype().toScalarType())
    row_ids_cache = torch::arange(n, opts);
  return row_ids_cache;
}

const ModelParts::RegPairs& ModelParts::reg_pairs(const RegEdges& re, const at::Tensor& entry_pair, c10::ScalarType dtype) {
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

const ModelParts::RegEdges& ModelParts::reg_edges_for(const MessageGraph& g, const at::Tensor& labels, const at::Tensor& train_mask) {
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
  const EdgeList e = edges_of_rows(g.rowptr, g.col, torch::arange(g.num_dst, g.rowptr.options()),
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

at::Tensor ModelParts::depth_benefit(const MessageGraph& g, const at::Tensor& z_src, bool training,
                         const at::Tensor& labels, const at::Tensor& train_mask,
                         at::Tensor& reg_loss) {
  const bool fixed = cfg.variant == Variant::AdFast;
  if (fixed && fast_eps.defined() && cached_for(g) && fast_eps.scalar_type() == theta_a.scalar_type())
    return fast_eps;
  at::Tensor eps = compute_depth_benefit(g, z_src, training, labels, train_mask, reg_loss);
  if (fixed) fast_eps = eps.detach();
  return eps;
}

at::Tensor ModelParts::compute_depth_benefit(const MessageGraph& g, const at::Tensor& z_src, bool training,
                                 const at::Tensor& labels, const at::Tensor& train_mask,
                                 at::Tensor& reg_loss) {
  const int64_t n = g.num_dst;
  const at::Tensor deg = g.degree.slice(0, 0, n);
  at::Tensor d_plus;
  if ((cfg.variant == Variant::AdFast || cfg.variant == Variant::AdSharp) && cfg.same_label_heuristic != "degree") {
    // The appendix's alternative heuristics: d+_v = sum_u p_uv over the whole graph.
    if (g.distributed())
      throw InputError("--heuristic " + cfg.same_label_heuristic +
                       ": needs the whole graph; distributed runs support only degree");
    if (!cached_for(g)) {
      const at::Tensor p = same_label_probability(cfg.same_label_heuristic, g.rowptr, g.col);
      const at::Tensor rows = torch::repeat_interleave(g.rowptr.to(torch::kCPU).diff());
      heuristic_d_plus = torch::zeros({g.num_src}, torch::kFloat64).index_add(0, rows, p).slice(0, 0, n).to(deg.device());
      heuristic_rowptr = g.rowptr;
    }
    d_plus = heuristic_d_plus.to(theta_a.scalar_type());
  } else if (cfg.variant == Variant::AdFast || cfg.variant == Variant::AdSharp) {
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
    const PairLogits pl = fdelta_pair_logits(
        g.rowptr, g.col, z_src, fd_w1, fd_b1, fd_w2, fd_b2,
        cfg.fdelta_precision == "tf32"   ? FDeltaPrecision::kTf32
        : cfg.fdelta_precision == "bf16" ? FDeltaPrecision::kBf16
                                         : FDeltaPrecision::kFp32);
    d_plus = sigmoid_row_sums(g.rowptr, re.dst, pl.entry_pair, pl.logit);
    // L_reg: BCE on training edges (both endpoints in the training set), target y_u == y_v.
    // On a rank: this rank's rows' share of the mean over every rank's training edges (the
    // count reduced on the device: no host wait).
    if (with_reg) {
      const RegPairs& rp = reg_pairs(re, pl.entry_pair, pl.logit.scalar_type());
      if (g.distributed()) {
        at::Tensor count = torch::full({1}, double(re.sel.numel()), pl.logit.options().dtype(torch::kFloat64));
        g.transport->allreduce(count, RankTransport::Op::Sum);
        reg_loss = pair_bce_sum(pl.logit, rp.sel_pair, rp.target) /
                   count.clamp_min(1).to(pl.logit.scalar_type()).squeeze(0);
      } else if (re.sel.numel() > 0) {
        reg_loss = pair_bce_sum(pl.logit, rp.sel_pair, rp.target) / double(re.sel.numel());
      }
    }
  }
  const at::Tensor d = deg.to(d_plus.scalar_type());
  // log eps_hat = t_max (2 log|alpha| + log(d + 1)) (depth_benefit.h), normalised by its
  // minimum and maximum over the rows.
  const double t_max = double(cfg.t_max > 0 ? cfg.t_max : cfg.layers);
  at::Tensor offset;
  if (cfg.variant == Variant::AdSharp) {  // eps = (beta alpha^2 (d + 1) / gamma)^t_max
    const at::Tensor b = degree_bucket(deg);
    offset = t_max * (sharp_log_beta.index_select(0, b) - sharp_log_gamma.index_select(0, b)).to(d.scalar_type());
  }
  if (cfg.normalisation == "rank") {
    benefit_range = at::Tensor();
    return rank_normalised_depth_benefit(d_plus, d, offset, t_max, g.transport.get());
  }
  // The min and max stay on the device (float64 [-lo, hi]): no host wait per step. Min-max
  // constants are treated as constants (not differentiated), identically on every rank.
  at::Tensor range;
  if (cfg.benefit_range) {
    range = torch::tensor({-cfg.benefit_range->first, cfg.benefit_range->second},
                          d.options().dtype(torch::kFloat64));
  } else {
    range = depth_benefit_range(d_plus.detach(), d, offset, t_max);
    // Global min and max: every rank normalises identically.
    if (g.distributed()) g.transport->allreduce(range, RankTransport::Op::Max);
  }
  benefit_range = range;
  return normalised_depth_benefit(d_plus, d, offset, range, t_max, cfg.normalisation == "log");
}

}  // namespace adgnn::detail
