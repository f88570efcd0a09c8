// adgnn/model: the AD-GNN model (../shared/docs/method.md): six backbones, each plain or with
// per-node depth (ad: learned f_delta; ad_fast: the degree estimate; ad_sharp: AD#), one process
// or a rank of a distributed run (the halo rows exchanged between layers).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/graph.h"

namespace adgnn {

// The six backbones (adgnn/src/backbones/, one file each).
enum class Backbone { Gcn, Gat, Sage, MixHop, GatV2, DirGnn };
// How deep each node aggregates: plain (every layer), ad (the learned f_delta), ad_fast (the
// degree estimate), ad_sharp (AD#: the fast estimate calibrated per degree bucket).
enum class Variant { Plain, Ad, AdFast, AdSharp };
// The names the command line, YAML configs, configuration lines and checkpoints use ("gcn",
// "gatv2", "ad_fast", ...).
const char* to_string(Backbone b);
const char* to_string(Variant v);
std::ostream& operator<<(std::ostream& os, Backbone b);
std::ostream& operator<<(std::ostream& os, Variant v);
// Those names parsed; InputError "<what> <name>: unknown backbone (gcn, ...)" for any other.
Backbone parse_backbone(const std::string& name, const std::string& what = "--model");
Variant parse_variant(const std::string& name, const std::string& what = "--variant");
// The paper's name of a model: GCN, AD-GAT, AD-SAGE_fast, AD-MixHop#.
std::string model_name(Backbone b, Variant v);

struct ModelConfig {
  Backbone backbone = Backbone::Gcn;
  Variant variant = Variant::Plain;
  int64_t in_dim = 0, hidden = 64, out_dim = 0, layers = 2;
  int64_t t_max = 0;                // exponent of the depth benefit (0: layers)
  double dropout = 0.5;
  bool batchnorm = false;           // BatchNorm1d after each hidden layer
  int64_t heads = 1;                // GAT / GATv2 attention heads (hidden layers concatenate)
  double lambda = 0.0;              // tau(t) = lambda + (1 - lambda) theta(t)
  double kappa = 0.05;              // temperature of the straight-through surrogate
  double band = 3.0;                // surrogate evaluated where |eps - tau| < band * kappa (<= 0: all rows)
  // The depth benefit to [0, 1]: min-max of eps_hat, linear (the paper's); min-max of log eps_hat,
  // log; or its quantile over every node, rank (depths spread evenly whatever its scale).
  std::string normalisation = "linear";
  double theta_init = 0.0;          // initial a_s of theta (a_s = 0: theta(2) = 0.5; not with depth_target)
  // A target depth distribution that theta's thresholds (and f_delta) learn towards, jointly with
  // the task: "" (off), "uniform" (equal shares of depths 1..layers) or layers + 1 shares of the
  // depths 0..layers. Training adds depth_target_weight * sum_t (S_t - Q_t)^2, S_t the
  // surrogate's share of nodes with T(v) >= t and Q_t the target's (depth/depth_target.h).
  // theta starts at tau(t) = 1 - Q_t, the target's thresholds when eps is spread evenly (rank).
  std::string depth_target;
  double depth_target_weight = 1.0;
  // Same-label estimate of the fast variants (ad_fast, ad_sharp): "degree" (the paper's degree
  // product) or an appendix alternative (common_neighbours, jaccard, adamic_adar, betweenness,
  // kshell, clustering; one process only). Ignored by plain and ad.
  std::string same_label_heuristic = "degree";
  // Exp-2's case study: nodes with degree <= this never aggregate (the self-only update at every
  // layer, as an AD node with T(v) = 0); 0: off.
  int64_t degree_threshold = 0;
  double dirgnn_alpha = 0.5;
  uint64_t seed = 0;
  std::string device = "cpu";       // where parameters live ("cpu", "cuda", "cuda:1")
  bool float64 = false;             // double-precision parameters (gradient checks, references)
  // The activations' storage: "fp32", or "bf16": the input features, every layer's output, the
  // dropout outputs, the aggregation's inputs and the exchanged halo rows in bfloat16 (half the
  // bytes that bound a step and a graph's size on a GPU), their sums (SpMM, GEMM, softmax,
  // reductions) in float32; the logits, the loss, the depth benefit, parameters, gradients and
  // the optimizer's state stay float32 (each layer multiplies by a bfloat16 copy of its weights).
  // Not with float64.
  std::string precision = "fp32";
  // Diagnostic: at layers >= 2, rows in the surrogate band use the soft mask sigmoid((eps -
  // tau) / kappa) in the forward pass too, so the surrogate path can be checked by finite
  // differences (its gradient is the straight-through one).
  bool soft_masks = false;
  // Fixed min and max of the log depth benefit instead of the computed ones: a trained model's
  // (`adgnn predict`), or held fixed for finite differences (the min-max constants are not
  // differentiated).
  std::optional<std::pair<double, double>> benefit_range;
  // AD's deeper layers, when they compute few rows (< 1/4), can read a compact input: dropout
  // on only the rows their computed rows read, and a graph of those rows (the same values).
  // That saves passes over every source row, at the price of several device synchronisations
  // per layer (data-dependent sizes). "auto": on the CPU only, where it is faster (arxiv-scale,
  // `adgnn bench`); on a GPU the synchronisations leave the step host-bound (docs/decisions/compact-deep-layers.md).
  // "on" / "off": always / never ("off" is also the reference of the tests).
  std::string compact_deep_layers = "auto";
  // Without the compact input, AD's deeper layers drop out only the rows their few computed rows
  // read (flagged per row: no sort, no device wait) instead of every source row; the values are
  // the same. false: every row (the tests' reference).
  bool dropout_rows_read = true;
  // A rank of a distributed AD run: layers >= 2 hold only the halo rows that a row computed
  // there reads (docs/distributed.md), instead of every halo row. "auto": where fewer than a
  // quarter of the halo rows are read, every layer >= 2 computes fewer than 1/8 of the rows,
  // and their backward regroups their entries (the CPU; a GPU from 2^23 entries per rank), so
  // the per-pass graph needs no transpose; "on" / "off": whenever possible / never (MixHop
  // never: its second hop reads every row).
  std::string compact_halo = "auto";
  // AD (learned): f_delta's precision, "fp32", "tf32" (its matrix products on TF32 tensor cores,
  // forward and backward) or "bf16" (its per-pair tensors stored in bfloat16, its products in
  // bfloat16 with float32 sums); CUDA float32 models only, elsewhere fp32. Only f_delta's MLP and
  // its input; the layers stay fp32.
  std::string fdelta_precision = "fp32";
};

// The activations' type of a model: bfloat16 (precision bf16), float64 (float64) or float32; the
// input features' and the graph's edge weights' type (part_tensors, message_graph), which the
// model would otherwise convert at every forward pass.
c10::ScalarType activation_type(const ModelConfig& cfg);

// What one forward pass computed, besides the logits.
struct ForwardStats {
  std::vector<int64_t> active_rows;     // per layer: rows fully updated (active)
  std::vector<int64_t> computed_rows;   // per layer: rows aggregated (active + surrogate band)
  std::vector<int64_t> edges_processed; // per layer: CSR entries read by those rows
  // With Model::set_defer_stats(true), edges_processed stays empty and its counts stay on the
  // device here until settle() copies them (a device wait the caller places where it waits
  // anyway, e.g. after the optimizer step).
  at::Tensor pending_edges;
  void settle();
  // Distributed runs, per layer t (the exchange of its input; layer 1 reads static features):
  // halo rows sent by this rank, and what a full halo exchange would send; bytes likewise.
  std::vector<int64_t> halo_rows, halo_rows_full, halo_bytes, halo_bytes_full;
  // Halo rows that layers >= 2 held (ModelConfig::compact_halo); -1: every halo row.
  int64_t deep_halo_rows = -1;
  // Layer 1's forward was issued before the wait for the layers' row counts (one process,
  // lambda = 0: docs/decisions/early-first-layer.md).
  bool first_layer_early = false;
  // A rank's training pass: layer 2's input was grown from layer 1's output, with no copy of the
  // owned rows (docs/decisions/first-output-room.md), and the owned rows the later layers' in-place updates
  // overwrote and write back in their backward.
  // grown_then_copied: an update too large to keep copied the rows instead.
  bool first_output_grown = false, grown_then_copied = false;
  int64_t rows_restored = 0;
};

struct ForwardOutput {
  at::Tensor logits;       // [num_dst, out_dim]
  at::Tensor depth;        // int64 [num_dst], T(v) (plain: layers)
  at::Tensor eps;          // float [num_dst], normalised depth benefit (plain: undefined)
  at::Tensor reg_loss;     // L_reg of the learned variant (0-dim; otherwise a zero on the CPU)
  at::Tensor depth_loss;   // a training pass's target-depth penalty (0-dim; undefined without one)
  // AD under linear / log normalisation: the min and max of the log depth benefit over every node
  // this pass normalised with, float64 [-min, max] (what ModelConfig::benefit_range fixes;
  // checkpoints keep it, so that `adgnn predict` normalises a new graph as training did).
  at::Tensor benefit_range;
  // h^(t), t = 1..L, over the destination rows, from evaluation passes and AD#'s training passes;
  // empty after the other training passes (the backward does not read them: not holding them
  // lowers the peak) and after a rank's training pass, whose halo exchanges update the layers'
  // inputs in place.
  std::vector<at::Tensor> layer_outputs;
  ForwardStats stats;
};

class Model {
 public:
  explicit Model(const ModelConfig& cfg);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  // x: input rows [num_src, F]. training: dropout on, BatchNorm batch statistics; epoch keys the
  // dropout masks. labels / train_mask (over the dst rows, or over all source rows on a rank
  // with halo rows) feed L_reg of the learned variant and AD#'s estimates; may be undefined.
  // On a rank (g.distributed()), every global quantity (the depth benefit's min and max,
  // BatchNorm statistics, L_reg's normalisation, AD#'s estimates) is reduced over the ranks and
  // the halo rows are exchanged between layers: all ranks compute the one-process function.
  ForwardOutput forward(const MessageGraph& g, const at::Tensor& x, bool training, int64_t epoch,
                        const at::Tensor& labels = {}, const at::Tensor& train_mask = {});

  const ModelConfig& config() const;
  // Whether forward() leaves its per-layer edge counts on the device (ForwardStats::settle):
  // off by default; the trainer and the benchmark turn it on, so that a training step's only
  // device waits are the ones it cannot avoid.
  void set_defer_stats(bool on);
  // Named parameters in a fixed order; theta's are named "theta.*" (no weight decay).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  // Non-learned state saved in checkpoints (BatchNorm running statistics).
  std::vector<std::pair<std::string, at::Tensor>> named_buffers() const;
  int64_t num_parameters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A training step's objective: the cross entropy summed over `rows` times `scale` (1 / the
// training nodes of every rank), plus L_reg where the pass computed one and the target-depth
// penalty where there is one. The zero that stands for L_reg otherwise carries no gradient and
// is not added (no launch).
at::Tensor training_loss(const ForwardOutput& out, const at::Tensor& rows, const at::Tensor& labels, double scale);

}  // namespace adgnn
