// adgnn/gnn: graphs as tensors and the sparse aggregation every backbone is built on. The
// aggregation takes the rows to compute explicitly ("which rows are active at layer t"), so an
// inactive row costs nothing. Models and the AD mechanism build on this (models issue).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/loaders.h"

namespace adgnn {

struct GraphTensors {
  int64_t num_nodes = 0, num_features = 0, num_classes = 0;
  at::Tensor rowptr, col;          // symmetric, self-loop-free, deduplicated (int64 / int32)
  at::Tensor out_rowptr, out_col;  // stored direction u -> v in row u, loops and duplicates dropped
  at::Tensor in_rowptr, in_col;    // its transpose: row v lists the u with u -> v
  at::Tensor degree;               // float32 [N], degree in the symmetric graph
  at::Tensor x;                    // float32 [N, F], dense
  at::Tensor y;                    // int64 [N]
};

GraphTensors to_tensors(const Graph& g, c10::Device device);

// out[i] = sum over k in row rows[i] of weight[k] * x[col[k]]; all rows when `rows` is undefined.
// weight (one value per CSR entry) may be undefined (all ones). Differentiable in x and weight;
// the CPU kernels are deterministic (no atomics), float32 and float64.
at::Tensor csr_aggregate(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight,
                         const at::Tensor& x, const at::Tensor& rows = {});

// Whether this build has the CUDA kernels (ADGNN_CUDA=ON).
bool cuda_kernels_built();

// ---- message passing with per-node depth ------------------------------------------------------

// Where a layer's neighbour rows come from. Destination rows are the first num_dst source rows
// (one process: every node; a rank: its owned nodes, followed by its halo rows). Degrees are
// those of the whole graph, so normalisations agree with the one-process run.
struct MessageGraph {
  int64_t num_dst = 0, num_src = 0;
  at::Tensor rowptr, col;            // symmetric, no self-loops; rows: dst, columns: src
  at::Tensor out_rowptr, out_col;    // stored direction: row v lists u with v -> u
  at::Tensor in_rowptr, in_col;      // row v lists u with u -> v
  at::Tensor degree;                 // float [num_src], symmetric degree
  at::Tensor in_degree, out_degree;  // float [num_src], of the directed simple graph
  at::Tensor gcn_weight;             // per symmetric entry (v, u): 1 / sqrt((d_v + 1)(d_u + 1))
  at::Tensor in_weight, out_weight;  // DirGNN's GCN normalisation per in- / out-CSR entry
  at::Tensor global_id;              // int64 [num_src], node ids for partition-invariant dropout
  at::Tensor max_degree_product;     // float scalar: max over edges of d_u d_v (global)
};
// Edge normalisations in `dtype` (the model's precision), computed in float64.
MessageGraph message_graph(const GraphTensors& t, c10::ScalarType dtype = c10::ScalarType::Float);

struct ModelConfig {
  std::string backbone = "gcn";     // gcn, gat, sage, mixhop, gatv2, dirgnn
  std::string variant = "plain";    // plain, ad (learned), ad_fast, ad_sharp (AD#, on the fast estimate)
  int64_t in_dim = 0, hidden = 64, out_dim = 0, layers = 2;
  int64_t t_max = 0;                // exponent of the depth benefit (0: layers)
  double dropout = 0.5;
  bool batchnorm = false;           // BatchNorm1d after each hidden layer
  int64_t heads = 1;                // GAT / GATv2 attention heads (hidden layers concatenate)
  double lambda = 0.0;              // tau(t) = lambda + (1 - lambda) theta(t)
  double kappa = 0.05;              // temperature of the straight-through surrogate
  double band = 3.0;                // surrogate evaluated where |eps - tau| < band * kappa (<= 0: all rows)
  std::string normalisation = "linear";  // depth-benefit min-max: linear (paper) or log
  double theta_init = 0.0;          // initial a_s of theta (a_s = 0: theta(2) = 0.5)
  double dirgnn_alpha = 0.5;
  uint64_t seed = 0;
  std::string device = "cpu";       // where parameters live ("cpu", "cuda", "cuda:1")
  bool float64 = false;             // double-precision parameters (gradient checks, references)
  // Diagnostic: at layers >= 2, rows in the surrogate band use the soft mask sigmoid((eps -
  // tau) / kappa) in the forward pass too, so the surrogate path can be checked by finite
  // differences (its gradient is the straight-through one).
  bool soft_masks = false;
};

// What one forward pass computed, besides the logits.
struct ForwardStats {
  std::vector<int64_t> active_rows;     // per layer: rows fully updated (active)
  std::vector<int64_t> computed_rows;   // per layer: rows aggregated (active + surrogate band)
  std::vector<int64_t> edges_processed; // per layer: CSR entries read by those rows
};

struct ForwardOutput {
  at::Tensor logits;       // [num_dst, out_dim]
  at::Tensor depth;        // int64 [num_dst], T(v) (plain: layers)
  at::Tensor eps;          // float [num_dst], normalised depth benefit (plain: undefined)
  at::Tensor reg_loss;     // L_reg of the learned variant (0-dim; zero otherwise)
  std::vector<at::Tensor> layer_outputs;  // h^(t), t = 1..L, over the destination rows
  ForwardStats stats;
};

// Global reduction hook for the depth-benefit normalisation (min and max over all ranks); the
// one-process run passes nothing.
using MinMaxReduce = void (*)(double& lo, double& hi, void* ctx);

class Model {
 public:
  explicit Model(const ModelConfig& cfg);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  // training: dropout on, BatchNorm batch statistics; epoch keys the dropout masks.
  // label / train_mask (dst rows) feed L_reg of the learned variant; may be undefined.
  ForwardOutput forward(const MessageGraph& g, const at::Tensor& x, bool training, int64_t epoch,
                        const at::Tensor& labels = {}, const at::Tensor& train_mask = {},
                        MinMaxReduce reduce = nullptr, void* reduce_ctx = nullptr);

  const ModelConfig& config() const;
  // Named parameters in a fixed order; theta's are named "theta.*" (no weight decay).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  // Non-learned state saved in checkpoints (BatchNorm running statistics).
  std::vector<std::pair<std::string, at::Tensor>> named_buffers() const;
  int64_t num_parameters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Counter-based dropout: the mask entry (row, column) depends only on (seed, epoch, layer,
// global id of the row, column), never on the partition or thread count.
at::Tensor dropout_rows(const at::Tensor& h, const at::Tensor& global_id, double p, uint64_t seed,
                        int64_t epoch, int64_t layer);

}  // namespace adgnn
