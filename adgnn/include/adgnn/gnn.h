// adgnn/gnn: graphs as tensors and the sparse aggregation every backbone is built on. The
// aggregation takes the rows to compute explicitly ("which rows are active at layer t"), so an
// inactive row costs nothing. Models and the AD mechanism build on this (models issue).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/loaders.h"
#include "adgnn/partition.h"

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

// out[i] = sum over k in row r = rows[i] of weight[k] * x[col[k]], plus self_weight[i] * x[r]
// when self_weight (one constant per output row: GCN's self-loop) is given, or self_weight[r] when
// it has one per CSR row instead (rows listed, fewer than the CSR's rows; no gather of the listed
// rows' own; a list of every row takes one per output row); all rows when `rows` is undefined.
// weight (one value per CSR entry) may be undefined (all ones). Differentiable in x and weight;
// CPU and CUDA kernels are deterministic (no atomics), float32 and float64. The backward reads
// the CSR's transpose, built on first use and cached per CSR.
// rows_entries: the number of CSR entries in `rows`, when the caller knows it on the host (AD's
// model does, from its one host copy per pass): the backward of a few rows then regroups their
// entries without waiting for the device; -1: unknown (the GPU then scans the transpose).
// rows_pos: int32, one per CSR row, its position in `rows` (-1 for the others), when the caller
// has it (AD's model builds every layer's at once); the GPU backward otherwise builds it per call
// where it needs it (three launches).
at::Tensor csr_aggregate(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight,
                         const at::Tensor& x, const at::Tensor& rows = {},
                         const at::Tensor& self_weight = {}, int64_t rows_entries = -1,
                         const at::Tensor& rows_pos = {});

// The training loss summed over `rows`, times `scale`: scale times the sum of -log
// softmax(logits[r])[labels[r]] (labels: one per row of `rows`). On the GPU one kernel per pass (a
// warp per row, each row's term scaled there; its backward writes the listed rows' scaled softmax
// - one-hot directly) instead of a gather, log_softmax, gather, sum and division and their
// backward nodes (torch's nll_loss reduction runs in one CUDA block).
at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& rows, const at::Tensor& labels,
                             double scale = 1.0);

// Whether this build has the CUDA kernels (ADGNN_CUDA=ON).
bool cuda_kernels_built();
// Peak bytes allocated by PyTorch's CUDA allocator on `device` since the last reset (0 for the
// CPU or a build without CUDA), and its reset.
int64_t peak_device_memory(c10::Device device);
void reset_peak_device_memory(c10::Device device);

// ---- message passing with per-node depth ------------------------------------------------------

// How a rank of a distributed run talks to the others: the distributed trainer implements it over
// comm/'s Communicator. Tensors live on the model's device; every rank calls every operation in
// the same order (also a rank with nothing to send).
class RankTransport {
 public:
  enum class Op { Sum, Min, Max };
  virtual ~RankTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce(at::Tensor& t, Op op) = 0;  // in place; t contiguous
  // Rows of `send` ([sum send_counts, F], packed by peer in rank order) go to the peers; returns
  // the received rows [sum recv_counts, F], packed by peer.
  virtual at::Tensor exchange(const at::Tensor& send, const std::vector<int64_t>& send_counts,
                              const std::vector<int64_t>& recv_counts) = 0;
};

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
  at::Tensor gcn_self_weight;        // per source row v: 1 / (d_v + 1), GCN's self-loop weight
  at::Tensor in_weight, out_weight;  // DirGNN's GCN normalisation per in- / out-CSR entry
  at::Tensor global_id;              // int64 [num_src], node ids for partition-invariant dropout
  at::Tensor max_degree_product;     // float scalar: max over edges of d_u d_v (global)

  // A rank of a distributed run (transport set): halo rows num_dst.. are owned by other ranks.
  std::shared_ptr<RankTransport> transport;
  std::vector<at::Tensor> send_rows;  // per peer: owned rows (int64) it holds as halo, in its halo order
  std::vector<int64_t> recv_offset;   // per peer + 1: its rows are halo rows [recv_offset[p], recv_offset[p+1])
  at::Tensor halo_owner;              // int64 [num_src - num_dst]
  // The symmetric CSR entries with a halo column: owned row and halo index (source row - num_dst).
  at::Tensor boundary_row, boundary_halo;
  int64_t num_halo() const { return num_src - num_dst; }
  bool distributed() const { return transport != nullptr; }
};
// Edge normalisations in `dtype` (the model's precision), computed in float64.
MessageGraph message_graph(const GraphTensors& t, c10::ScalarType dtype = c10::ScalarType::Float);

// A rank's share of a partitioned graph as tensors on `device`: the message graph (without its
// transport, which the trainer sets), the input rows x [num_src, F] (float32) and the owned
// nodes' labels [num_dst].
struct PartTensors {
  MessageGraph graph;
  at::Tensor x, y;
};
PartTensors part_tensors(const GraphPart& part, c10::Device device,
                         c10::ScalarType dtype = c10::ScalarType::Float);

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
  // Diagnostic: at layers >= 2, rows in the surrogate band use the soft mask sigmoid((eps -
  // tau) / kappa) in the forward pass too, so the surrogate path can be checked by finite
  // differences (its gradient is the straight-through one).
  bool soft_masks = false;
  // Diagnostic: fixed min and max of the log depth benefit instead of the computed ones (the
  // min-max constants are not differentiated; finite differences must hold them fixed too).
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
  // h^(t), t = 1..L, over the destination rows; empty after a rank's training pass (other than
  // AD#'s), whose halo exchanges update the layers' inputs in place.
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
// training nodes of every rank), plus L_reg where the pass computed one. The zero that stands
// for L_reg otherwise carries no gradient and is not added (no launch).
at::Tensor training_loss(const ForwardOutput& out, const at::Tensor& rows, const at::Tensor& labels, double scale);

// Counter-based dropout: the mask entry (row, column) depends only on (seed, epoch, layer,
// global id of the row, column), never on the partition or thread count. row_flags (uint8, one
// per row, on h's device): only rows flagged nonzero are computed; the others must not be read
// (their values are unset: NaN on the CPU) and get a zero gradient.
at::Tensor dropout_rows(const at::Tensor& h, const at::Tensor& global_id, double p, uint64_t seed,
                        int64_t epoch, int64_t layer, const at::Tensor& row_flags = {});
// {dropout_rows(h, ...), h}: for an input that is both dropped out and used as it is (AD's
// frozen rows). Same values and gradient; the backward adds the dropped rows' gradient into the
// second output's in place, over the flagged rows only, instead of two passes over every row.
std::pair<at::Tensor, at::Tensor> dropout_rows_and_input(const at::Tensor& h, const at::Tensor& global_id, double p,
                                                         uint64_t seed, int64_t epoch, int64_t layer,
                                                         const at::Tensor& row_flags = {});

}  // namespace adgnn
