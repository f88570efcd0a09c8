// adgnn/trainer: full-graph training of one model on one graph, on one process or on the P ranks
// of a communicator (one process is the P = 1 case of the same loop: each rank trains its part of
// the graph, and the ranks compute exactly the one-process function), the paper's protocol
// (splits, runs, best-validation selection), checkpoints and metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/comm.h"
#include "adgnn/model.h"
#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "adgnn/scores.h"

namespace adgnn {

struct TrainConfig {
  ModelConfig model;               // in_dim / out_dim are taken from the graph
  std::string dataset, data_dir;   // as for `adgnn data` (name, or path)
  // "auto": the dataset's Platonov splits when it has them, else seeded random 60/20/20;
  // "random"; or a split family stored with the dataset ("geom-gcn", "platonov", "public", ...).
  std::string splits = "auto";
  double train_fraction = 0.6, val_fraction = 0.2;
  int64_t epochs = 200;
  double lr = 0.01, weight_decay = 5e-4;
  int64_t patience = 0;            // early stopping after this many epochs without a better val; 0: off
  // What selects the best epoch (and a sweep's best point) and what the summary reports: "auto"
  // (resolve_metric in adgnn/scores.h), "accuracy", "roc_auc" or "macro_f1".
  std::string metric = "auto";
  int64_t runs = 1;                // run r: seed + r, split r (of a stored family) or a new random split
  std::string checkpoint;          // HDF5 file (run r > 0 appends "-run<r>"); empty: none
  int64_t checkpoint_every = 20;
  bool resume = false;             // continue from the checkpoint where it stopped
  std::string metrics;             // JSON-lines file, one line per epoch; empty: none
  std::string predictions;         // HDF5 file with final logits, depths, embeddings; empty: none
  bool layer_embeddings = false;   // predictions also hold every layer's output h^(t) ("layer_<t>")
  // Folder for a step profile of run 0's last profile_steps training steps (Kineto; per rank a
  // Markdown summary <backbone>-<variant>-rank<r>.md and a Chrome trace); empty: none.
  std::string profile;
  int64_t profile_steps = 3;
  bool progress = true;            // a progress line on a terminal
  int64_t threads = 0;             // intra-op threads (0: all cores)
  // Runs trained concurrently, each on one intra-op thread (one process only): the same numbers
  // as sequential runs with threads = 1, in a fraction of the time on a many-core machine (or
  // one GPU: one CUDA context). Each run's peak memory is then the process's, shared by the runs.
  int64_t run_workers = 1;
  // More than one rank: how rank 0 splits the graph, or a folder made by `adgnn partition`.
  PartitionOptions partition;
  std::string partition_dir;
  // Asked after every epoch whether to stop (the command sets it from SIGTERM / SIGUSR1: a batch
  // system's time limit). The ranks stop together after the first epoch at which any rank was
  // asked; the run saves its checkpoint (with `checkpoint`) and train_run throws Interrupted.
  // Empty: never.
  std::function<bool()> stop_requested;
};

// A run stopped between two epochs by TrainConfig::stop_requested, on every rank alike.
struct Interrupted : std::runtime_error {
  Interrupted(int64_t run, int64_t epoch, std::string checkpoint);
  int64_t run, epoch;      // the run, and the last epoch it completed
  std::string checkpoint;  // the checkpoint written at that epoch; empty: none (no --checkpoint)
};

struct RunResult {
  int64_t run = 0, best_epoch = 0, epochs_run = 0;
  std::string metric;  // what the scores are: "accuracy", "roc_auc" or "macro_f1" (auto resolved)
  double best_val = 0, test_at_best = 0, train_at_best = 0;
  double seconds = 0, ms_per_epoch = 0;
  std::vector<int64_t> depth_histogram;  // nodes with T(v) = 0..L at the best epoch
  std::vector<int64_t> edges_per_layer;  // CSR entries read per layer (last training epoch)
  // Summed over the ranks, per layer, in the last training epoch: halo rows and bytes sent, and
  // what a full halo exchange would have sent.
  std::vector<int64_t> halo_rows, halo_rows_full, halo_bytes, halo_bytes_full;
  int ranks = 1;
  double peak_memory_bytes = 0;  // max over ranks: CUDA allocator peak, or peak RSS on the CPU
  std::vector<double> peak_memory_per_rank;  // the same, per rank
};

struct TrainSummary {
  std::vector<RunResult> runs;
  std::string metric;  // the runs' metric
  double test_mean = 0, test_std = 0, val_mean = 0, val_std = 0;
  int64_t parameters = 0;
};

// Limits a configuration is checked against (the error states them): far beyond any model
// this system trains, low enough that a typo fails at once instead of asking for terabytes.
constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxEpochs = 100000000;  // a mistyped count would otherwise run for ever
// Checks the configuration against the graph (flags named in the errors).
void validate_train_config(const TrainConfig& cfg);
// The metric cfg.metric stands for on the graph `part` belongs to (the same on every rank).
Metric run_metric(const TrainConfig& cfg, const GraphPart& part);
// comm: the ranks of a distributed run (every rank calls with the same arguments); null or of
// size 1: one process. Rank 0 writes metrics and checkpoints, every rank its rows' predictions;
// every rank returns the same (globally reduced) result.
// On a part: `part` is this rank's share (read_part of a partition folder: no rank ever holds
// the whole graph; or rank_part of a graph in memory), part.parts == comm's size.
RunResult train_run(const GraphPart& part, const TrainConfig& cfg, int64_t run, Communicator* comm = nullptr);
TrainSummary train(const GraphPart& part, const TrainConfig& cfg, Communicator* comm = nullptr);
// On a graph every rank holds: its part by rank_part, then the above.
RunResult train_run(const Graph& g, const TrainConfig& cfg, int64_t run, Communicator* comm = nullptr);
TrainSummary train(const Graph& g, const TrainConfig& cfg, Communicator* comm = nullptr);

// --predictions: `arrays` hold this rank's owned rows (global ids `node_id`, ascending). One rank:
// `path` holds every row in node order. P ranks: rank r writes <path>.part-<r>.h5 with its rows
// and their node_id, and rank 0 then writes `path` as the index of the P files (attributes
// format "adgnn-predictions-index", parts, nodes), written atomically after every part.
void write_predictions(const std::string& path, std::map<std::string, H5Array> arrays, const at::Tensor& node_id,
                       const GraphPart& part, const std::string& config, Communicator* comm);
// Every row of a predictions file in node order: the file itself, or the part files of an index
// assembled (node ids checked: each node exactly once). Bad or missing files throw InputError.
std::map<std::string, H5Array> read_predictions(const std::string& path, std::map<std::string, std::string>* attrs);

// The transport of a rank's forward pass over a communicator. Tensors on another device than
// the communicator takes (host memory for MPI, CUDA memory for NCCL) are staged through it.
std::shared_ptr<RankTransport> make_rank_transport(Communicator& comm, bool device_memory);
// Rank `rank`'s part of g, P = comm's size: rank 0 partitions (cfg.partition) and broadcasts the
// owners, or every rank reads its file of cfg.partition_dir (checked against g's fingerprint).
// comm null: the whole graph.
GraphPart rank_part(const Graph& g, const TrainConfig& cfg, Communicator* comm);
// Collectives on host memory over any communicator: staged through the current CUDA device
// when the communicator takes device memory only (NCCL).
void host_allreduce(Communicator& comm, void* data, int64_t count, DType dt, ReduceOp op);
void host_broadcast(Communicator& comm, void* data, int64_t bytes, int root);
// Adam with L2 weight decay per group, torch::optim::Adam's update operation for operation
// (equal results), over one flat buffer per group: the parameters become views of it (values
// kept), so a step, zero_grad and the gradient allreduce are a few kernels each, not a few per
// parameter. zero_grad unsets the gradients; backward sets them; gradient_buffers and step first
// copy them into one gradient buffer per group (one launch) and make them views of it again.
// Every parameter steps every time (a gradient backward did not reach counts as zero).
class FlatAdam {
 public:
  struct Group {
    std::vector<std::pair<std::string, at::Tensor>> params;  // name, parameter (same dtype, device)
    double weight_decay = 0;
  };
  explicit FlatAdam(std::vector<Group> groups, double lr, double beta1 = 0.9, double beta2 = 0.999,
                    double eps = 1e-8);
  void zero_grad();
  void step();
  std::vector<at::Tensor> gradient_buffers();  // one per non-empty group, the gradients packed
  // What the gradient all-reduce sums: one buffer holding every group's (slices of it) when the
  // groups share a dtype and device, else gradient_buffers(); the gradients packed.
  std::vector<at::Tensor> reduction_buffers();
  // Checkpoints: views of the moments per parameter ("exp_avg/<name>", "exp_avg_sq/<name>"),
  // writable, and the step count (bias correction).
  std::vector<std::pair<std::string, at::Tensor>> named_state() const;
  int64_t steps() const { return step_; }
  void set_steps(int64_t steps);

 private:
  struct Packed {
    at::Tensor param, grad, exp_avg, exp_avg_sq;
    double weight_decay = 0;
  };
  struct View {
    size_t group;
    int64_t offset;
    std::vector<int64_t> sizes;
    at::Tensor param;  // the parameter (a view of its group's buffer)
  };
  void pack_gradients();  // the parameters' gradients into the buffers, then views of them
  std::vector<Packed> groups_;
  std::vector<std::string> names_;
  std::vector<View> views_;
  double lr_, beta1_, beta2_, eps_;
  int64_t step_ = 0;
  at::Tensor step_count_;  // step_ on the device, for the fused CUDA update (filled by step())
  bool packed_ = true;     // every gradient a view of its buffer (until zero_grad)
  at::Tensor grad_all_;    // every group's gradient buffer as a slice (same dtype and device)
};
// The model's parameters as FlatAdam's groups (training and `adgnn bench` alike): weight decay on
// every parameter but theta (the stopping thresholds); parameters in the model's order.
std::vector<FlatAdam::Group> adam_groups(const Model& model, double weight_decay);
// Sums the optimizer's gradient buffers over the ranks (one reduction per group).
void allreduce_gradients(FlatAdam& opt, RankTransport& transport);

// ---- hyperparameter sweeps ------------------------------------------------------------------------

struct SweepOptions {
  // A YAML mapping of setting -> list of values (keys as in configs), or a built-in grid:
  // "paper" (the appendix grid, 1,944 points) or "paper-small" (a 16-point subset of it).
  std::string grid = "paper-small";
  std::string out;      // JSON-lines results; points already in it are skipped (resume)
  int64_t workers = 2;  // points trained concurrently, one intra-op thread each
  bool progress = true;
};
struct SweepPoint {
  TrainConfig cfg;
  std::string metric;  // what the scores are (auto resolved)
  double val_mean = 0, val_std = 0, test_mean = 0, test_std = 0, seconds = 0;
};
struct SweepResult {
  std::vector<SweepPoint> points;  // every grid point, in grid order
  size_t best = 0;                 // highest mean validation score (first on ties)
};
std::vector<TrainConfig> expand_grid(const TrainConfig& base, const std::string& grid);
SweepResult sweep(const Graph& g, const TrainConfig& base, const SweepOptions& opt);
// The settings of a configuration as YAML (what configs/ holds).
std::string to_yaml(const TrainConfig& cfg);

// Reads a YAML config (keys as the `adgnn train` flags, without dashes; see configs/) into `cfg`.
void load_train_config(const std::string& path, TrainConfig& cfg);
std::string describe(const TrainConfig& cfg);  // one line, every setting (for logs and checkpoints)

}  // namespace adgnn
