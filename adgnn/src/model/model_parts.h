// What a Model holds (internal): its layers and parameters, the buffers checkpoints save, and the
// per-graph constants a forward pass builds once and reuses. Model::Impl is this struct; a
// ForwardPass (forward_pass.h) reads and updates it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "adgnn/model.h"
#include "backbones/layer.h"
#include "depth/surrogate.h"

namespace adgnn::detail {

struct ModelParts {
  ModelConfig cfg;
  std::vector<std::unique_ptr<Layer>> layers;
  // BatchNorm after hidden layer t (t = 0..L-2): weight, bias; running mean, var.
  std::vector<at::Tensor> bn_weight, bn_bias, bn_mean, bn_var;
  at::Tensor theta_a;  // a_2..a_L
  std::vector<double> depth_at_least;  // --depth-target's Q_t, t = 1..L (empty: none)
  at::Tensor depth_at_least_t;         // the same on the model's device, in its type
  at::Tensor fd_w1, fd_b1, fd_w2, fd_b2;  // f_delta: 2H -> H -> 1
  // AD#: log beta and log gamma per degree bucket floor(log2(d + 1)), from the previous training
  // forward pass (buffers: checkpointed, so a resumed run continues with the same estimates).
  static constexpr int64_t kBuckets = 32;
  at::Tensor sharp_log_beta, sharp_log_gamma;
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
  // The min and max of the log depth benefit (float64 [-lo, hi]) the last depth benefit was
  // normalised with (linear, log; undefined under rank): ForwardOutput::benefit_range.
  at::Tensor benefit_range;

  // The halo rows that the last training pass's layers >= 2 held (a rank; -1: none yet): the
  // room the next pass leaves after layer 1's output, whose size it must pick before its
  // own count reaches the host. Every halo row would cost 0.5 GiB of peak memory a rank at
  // products-scale, for ~15% of them used.
  int64_t halo_rows_held = -1;

  // 0..n-1 on the device (layer 1's rows when it computes every row), kept between passes.
  at::Tensor row_ids_cache;
  const at::Tensor& row_ids(int64_t n, const at::TensorOptions& opts);

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
  const RegEdges& reg_edges_for(const MessageGraph& g, const at::Tensor& labels, const at::Tensor& train_mask);
  // The selection as f_delta's pairs (int64 [S]) and its targets in the logits' type, for the
  // entry_pair they were built from (f_delta's cache keeps it while the CSR lives).
  struct RegPairs {
    at::Tensor entry_pair, sel, sel_pair, target;
  };
  RegPairs reg_pairs_;
  const RegPairs& reg_pairs(const RegEdges& re, const at::Tensor& entry_pair, c10::ScalarType dtype);

  // forward() leaves ForwardStats' device counts for the caller to settle (set_defer_stats).
  bool defer_stats = false;

  bool adaptive() const { return cfg.variant != Variant::Plain; }

  // AD#'s degree bucket of each node, floor(log2(d + 1)) clamped to the buckets.
  static at::Tensor degree_bucket(const at::Tensor& deg);
  // AD#'s estimators (sharp_calibration.cpp): from a training pass's embeddings, the next pass's
  // log beta and log gamma per degree bucket.
  void update_sharp(const MessageGraph& g, const at::Tensor& x, const std::vector<at::Tensor>& outs,
                    const at::Tensor& deg, const at::Tensor& labels, const at::Tensor& train_mask);

  Thresholds tau() const { return tau_thresholds(theta_a, cfg.layers, cfg.lambda); }

  // Normalised depth benefit eps_tilde over the destination rows (depth_benefit_estimate.cpp):
  // the fast variants' from the graph (cached), the learned variant's from f_delta of z_src
  // (layer 1's input transform), with L_reg into reg_loss on a training pass with labels.
  at::Tensor depth_benefit(const MessageGraph& g, const at::Tensor& z_src, bool training, const at::Tensor& labels,
                           const at::Tensor& train_mask, at::Tensor& reg_loss);
  at::Tensor compute_depth_benefit(const MessageGraph& g, const at::Tensor& z_src, bool training,
                                   const at::Tensor& labels, const at::Tensor& train_mask, at::Tensor& reg_loss);

  // BatchNorm1d over the given rows (training: batch statistics, updating running ones).
  at::Tensor batchnorm(size_t t, const at::Tensor& x, bool training);
};

}  // namespace adgnn::detail
