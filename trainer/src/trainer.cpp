// The training loop: Adam with weight decay (theta excluded), dropout keyed by epoch (so a
// resumed run recomputes exactly what the uninterrupted one would), best-validation selection,
// early stopping, HDF5 checkpoints and JSON-lines metrics.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "adgnn/ops.h"
#include "adgnn/trainer.h"
#include "nlohmann/json.hpp"
#include "adgnn/profile.h"
#include "adgnn/scores.h"
#include "adgnn/comm.h"
#include "adgnn/loaders.h"
#include "adgnn/mix64.h"
#include "checkpoint_arrays.h"

namespace adgnn {

namespace {

using detail::from_array;
using detail::load_model_state;
using detail::to_array;

struct Masks {
  at::Tensor train, val, test;  // bool [source rows]: owned rows first, then the halo
};

at::Tensor bool_tensor(const uint8_t* p, int64_t n) {
  return torch::from_blob(const_cast<uint8_t*>(p), {n}, torch::kUInt8).to(torch::kBool).clone();
}

// The seeded random split, computed from the node ids alone, so that any rank can compute its
// rows' share without an N-sized array: the labelled nodes in order of a keyed hash of their id
// are a random permutation, whose first round(train_fraction N) nodes train and next
// round(val_fraction N) validate (N: the labelled nodes; unlabelled ones are in no set). The two
// cut keys are found by bisection over the key range with the ranks' counts summed (64 rounds
// of one small all-reduce).
Masks random_split(const GraphPart& part, const TrainConfig& cfg, int64_t run, Communicator* comm) {
  const int64_t owned = part.num_owned, sources = int64_t(part.global_id.size());
  auto labelled = [&](int64_t i) { return part.labels[size_t(i)] != kUnlabelled; };
  const uint64_t salt = mix64(cfg.model.seed * 1000003ULL + uint64_t(run) + 17);
  std::vector<uint64_t> key(static_cast<size_t>(sources));
  for (int64_t i = 0; i < sources; ++i) key[size_t(i)] = mix64(uint64_t(part.global_id[size_t(i)]) ^ salt);
  std::vector<uint64_t> sorted;
  for (int64_t i = 0; i < owned; ++i)
    if (labelled(i)) sorted.push_back(key[size_t(i)]);
  std::sort(sorted.begin(), sorted.end());
  int64_t n = int64_t(sorted.size());
  if (comm) host_allreduce(*comm, &n, 1, DType::I64, ReduceOp::Sum);
  const int64_t n_train = int64_t(std::llround(cfg.train_fraction * double(n)));
  const int64_t n_val = int64_t(std::llround(cfg.val_fraction * double(n)));
  // cut[j]: the smallest key x with at least want[j] keys below or at x; a node belongs to the
  // first want[j] nodes exactly when its key <= cut[j] (want 0: none).
  const int64_t want[2] = {n_train, n_train + n_val};
  uint64_t lo[2] = {0, 0}, hi[2] = {~0ULL, ~0ULL};
  for (int round = 0; round < 64; ++round) {
    std::vector<int64_t> below(2);
    uint64_t mid[2];
    for (int j = 0; j < 2; ++j) {
      mid[j] = lo[j] + (hi[j] - lo[j]) / 2;
      below[size_t(j)] = int64_t(std::upper_bound(sorted.begin(), sorted.end(), mid[j]) - sorted.begin());
    }
    if (comm) host_allreduce(*comm, below.data(), 2, DType::I64, ReduceOp::Sum);
    for (int j = 0; j < 2; ++j) {
      if (below[size_t(j)] >= want[j]) hi[j] = mid[j];
      else lo[j] = mid[j] + 1;
    }
  }
  Masks m;
  m.train = torch::zeros({sources}, torch::kBool);
  m.val = torch::zeros({sources}, torch::kBool);
  m.test = torch::zeros({sources}, torch::kBool);
  bool* tr = m.train.data_ptr<bool>();
  bool* va = m.val.data_ptr<bool>();
  bool* te = m.test.data_ptr<bool>();
  for (int64_t i = 0; i < sources; ++i) {
    if (!labelled(i)) continue;
    const uint64_t k = key[size_t(i)];
    const bool in_train = want[0] > 0 && k <= hi[0];
    const bool in_first = want[1] > 0 && k <= hi[1];
    tr[i] = in_train;
    va[i] = in_first && !in_train;
    te[i] = !in_first;
  }
  return m;
}

// Run `run`'s split over the part's source rows: a stored family's split run mod count, or the
// seeded random split.
Masks choose_split(const GraphPart& part, const TrainConfig& cfg, int64_t run, Communicator* comm) {
  auto find = [&](const std::string& name) -> const SplitSet* {
    for (const SplitSet& s : part.splits)
      if (s.name == name) return &s;
    return nullptr;
  };
  std::string family = cfg.splits;
  if (family == "auto") family = find("platonov") ? "platonov" : "random";
  if (family == "random") return random_split(part, cfg, run, comm);
  const SplitSet* s = find(family);
  if (!s) {
    std::string have;
    for (const auto& x : part.splits) have += (have.empty() ? "" : ", ") + x.name;
    throw InputError("--splits " + family + ": " + part.graph_name + " has no such split family (it has: " +
                     (have.empty() ? "none" : have) + "; or use random)");
  }
  const int64_t sources = int64_t(part.global_id.size()), k = run % s->count;
  if (s->train.empty() || s->val.empty() || s->test.empty())
    throw InputError("--splits " + family + ": " + part.graph_name + " stores this family without all three masks");
  Masks m;
  m.train = bool_tensor(s->train.data() + k * sources, sources);
  m.val = bool_tensor(s->val.data() + k * sources, sources);
  m.test = bool_tensor(s->test.data() + k * sources, sources);
  return m;
}

std::string run_path(const std::string& path, int64_t run) {
  if (path.empty() || run == 0) return path;
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + "-run" + std::to_string(run);
  return path.substr(0, dot) + "-run" + std::to_string(run) + path.substr(dot);
}

struct Checkpoint {
  int64_t epoch = 0, best_epoch = 0;
  int64_t stopped = 0;  // early stopping ended the run (more --epochs on resume do not restart it)
  double best_val = -1, best_test = 0, best_train = 0;
};

// Besides the training state, what `adgnn predict` needs without the training graph: the
// settings (train_config, YAML), the widths, and the depth benefit's min and max over the
// training graph at these parameters (benefit_range: the epoch's evaluation pass's; AD under
// linear / log normalisation).
void save_checkpoint(const std::string& path, const Model& model, const FlatAdam& opt, const Checkpoint& c,
                     const std::string& fingerprint, const TrainConfig& cfg, const at::Tensor& benefit_range) {
  std::map<std::string, H5Array> arrays;
  for (const auto& [name, p] : model.named_parameters()) arrays["param/" + name] = to_array(p);
  for (const auto& [name, b] : model.named_buffers()) arrays["buffer/" + name] = to_array(b);
  for (const auto& [name, s] : opt.named_state()) arrays["adam/" + name] = to_array(s);
  if (benefit_range.defined()) arrays["benefit_range"] = to_array(benefit_range);
  std::map<std::string, std::string> attrs{
      {"format", "adgnn-checkpoint"},
      {"config", fingerprint},
      {"train_config", to_yaml(cfg)},
      {"in_dim", std::to_string(model.config().in_dim)},
      {"out_dim", std::to_string(model.config().out_dim)},
      {"float64", model.config().float64 ? "1" : "0"},
      {"epoch", std::to_string(c.epoch)},
      {"best_epoch", std::to_string(c.best_epoch)},
      {"stopped", std::to_string(c.stopped)},
      {"adam_steps", std::to_string(opt.steps())},
  };
  // Doubles travel as exact hex floats, so a resumed run compares against the same best value.
  char buf[64];
  for (auto [k, v] : {std::pair{"best_val", c.best_val}, {"best_test", c.best_test}, {"best_train", c.best_train}}) {
    std::snprintf(buf, sizeof(buf), "%a", v);
    attrs[k] = buf;
  }
  write_arrays_h5(path, arrays, attrs);
}

// Older checkpoints hold torch::optim::Adam's archive instead of FlatAdam's state: read it through
// a torch Adam over the same parameters, and copy its moments and step count.
void load_torch_adam_state(const std::string& path, const std::string& blob, Model& model, FlatAdam& opt) {
  // The same groups as FlatAdam's (their order decides how the archive's states map back).
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (const FlatAdam::Group& g : adam_groups(model, 0)) {
    if (g.params.empty() && !groups.empty()) continue;
    std::vector<at::Tensor> params;
    for (const auto& [name, p] : g.params) params.push_back(p);
    groups.emplace_back(params);
  }
  torch::optim::Adam legacy(groups, torch::optim::AdamOptions(1e-3));
  torch::serialize::InputArchive archive;
  std::istringstream is(blob);
  try {
    archive.load_from(is);
    legacy.load(archive);
  } catch (const c10::Error& e) {
    throw InputError(path + ": unreadable optimizer state (" + std::string(e.what_without_backtrace()) + ")");
  }
  std::map<std::string, at::Tensor> state;
  for (auto& [name, s] : opt.named_state()) state[name] = s;
  int64_t steps = 0;
  torch::NoGradGuard guard;
  for (const auto& [name, p] : model.named_parameters()) {
    auto it = legacy.state().find(p.unsafeGetTensorImpl());
    if (it == legacy.state().end()) continue;  // never stepped: zero moments
    auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
    state.at("exp_avg/" + name).copy_(s.exp_avg());
    state.at("exp_avg_sq/" + name).copy_(s.exp_avg_sq());
    steps = std::max<int64_t>(steps, s.step());
  }
  opt.set_steps(steps);
}

// A resumed run repeats the epochs after its checkpoint: the metrics lines they wrote before the
// run stopped (and a line cut by the stop) are dropped, so that every epoch has one line.
void keep_metrics_through(const std::string& path, int64_t epoch) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("epoch") && j["epoch"].is_number_integer() &&
        j["epoch"].get<int64_t>() <= epoch)
      kept += line + '\n';
    else
      dropped = true;
  }
  if (in.bad()) throw InputError("--metrics " + path + ": cannot read (" + os_error() + ")");
  if (dropped) write_file_atomic(path, kept);
}

// "key=value key=value ..." (describe()'s line) as a map.
std::map<std::string, std::string> config_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream is(line);
  std::string word;
  while (is >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

// The keys whose values differ between a stored and the current configuration line:
// "lr 0.01 in the checkpoint, 0.005 now; ...".
std::string config_differences(const std::string& stored, const std::string& now) {
  const auto a = config_fields(stored), b = config_fields(now);
  std::vector<std::string> diffs;
  for (const auto& [k, v] : b) {
    const auto it = a.find(k);
    if (it == a.end()) diffs.push_back(fmt::format("{} {} now, not in the checkpoint", k, v));
    else if (it->second != v) diffs.push_back(fmt::format("{} {} in the checkpoint, {} now", k, it->second, v));
  }
  for (const auto& [k, v] : a)
    if (b.count(k) == 0) diffs.push_back(fmt::format("{} {} in the checkpoint, not set now", k, v));
  return diffs.empty() ? "stored: " + stored : fmt::format("{}", fmt::join(diffs, "; "));
}

Checkpoint load_checkpoint(const std::string& path, Model& model, FlatAdam& opt, const std::string& fingerprint) {
  std::map<std::string, std::string> attrs;
  auto arrays = read_arrays_h5(path, &attrs);
  if (attrs["format"] != "adgnn-checkpoint")
    throw InputError(path + ": not an adgnn checkpoint");
  if (attrs["config"] != fingerprint)
    throw InputError(path + ": checkpoint was written by a different configuration (" +
                     config_differences(attrs["config"], fingerprint) + ")");
  load_model_state(path, arrays, model);
  if (auto legacy = arrays.find("optimizer"); legacy != arrays.end()) {
    load_torch_adam_state(path, legacy->second.bytes, model, opt);
  } else {
    for (auto& [name, s] : opt.named_state()) {
      auto it = arrays.find("adam/" + name);
      if (it == arrays.end()) throw InputError(path + ": missing optimizer state " + name);
      from_array(it->second, s, path + "[adam/" + name + "]");
    }
    if (attrs.count("adam_steps") == 0) throw InputError(path + ": missing optimizer step count");
    opt.set_steps(std::stoll(attrs["adam_steps"]));
  }
  Checkpoint c;
  c.epoch = std::stoll(attrs["epoch"]);
  c.best_epoch = std::stoll(attrs["best_epoch"]);
  c.stopped = std::stoll(attrs["stopped"]);
  c.best_val = std::strtod(attrs["best_val"].c_str(), nullptr);
  c.best_test = std::strtod(attrs["best_test"].c_str(), nullptr);
  c.best_train = std::strtod(attrs["best_train"].c_str(), nullptr);
  return c;
}

std::string eta(double seconds) {
  char buf[32];
  if (seconds >= 3600) std::snprintf(buf, sizeof(buf), "%.1fh", seconds / 3600);
  else if (seconds >= 60) std::snprintf(buf, sizeof(buf), "%.1fm", seconds / 60);
  else std::snprintf(buf, sizeof(buf), "%.0fs", seconds);
  return buf;
}

}  // namespace

namespace detail {

H5Array to_array(const at::Tensor& t) {
  // (bfloat16 embeddings are stored as float32, which holds them exactly.)
  const at::Tensor c =
      t.detach().to(torch::kCPU, t.scalar_type() == torch::kBFloat16 ? torch::kFloat32 : t.scalar_type()).contiguous();
  H5Array a;
  a.shape.assign(c.sizes().begin(), c.sizes().end());
  if (c.scalar_type() == torch::kFloat32) a.dtype = "f32";
  else if (c.scalar_type() == torch::kFloat64) a.dtype = "f64";
  else if (c.scalar_type() == torch::kInt64) a.dtype = "i64";
  else if (c.scalar_type() == torch::kUInt8) a.dtype = "u8";
  else throw std::runtime_error("checkpoint: unsupported tensor type");
  a.bytes.assign(static_cast<const char*>(c.data_ptr()), size_t(c.nbytes()));
  return a;
}

void from_array(const H5Array& a, at::Tensor& t, const std::string& where) {
  const auto want = to_array(t.detach().slice(0, 0, 0).reshape({0}));  // dtype only
  if (a.dtype != want.dtype || std::vector<int64_t>(t.sizes().begin(), t.sizes().end()) != a.shape)
    throw InputError(where + ": stored tensor does not match the model (dtype or shape)");
  torch::NoGradGuard guard;
  const at::Tensor src = torch::from_blob(const_cast<char*>(a.bytes.data()), t.sizes(),
                                          t.options().device(torch::kCPU));
  t.copy_(src);
}

void load_model_state(const std::string& path, const std::map<std::string, H5Array>& arrays, Model& model) {
  for (auto& [name, p] : model.named_parameters()) {
    auto it = arrays.find("param/" + name);
    if (it == arrays.end()) throw InputError(path + ": missing parameter " + name);
    from_array(it->second, p, path + "[" + name + "]");
  }
  for (auto& [name, b] : model.named_buffers()) {
    auto it = arrays.find("buffer/" + name);
    if (it == arrays.end()) throw InputError(path + ": missing buffer " + name);
    from_array(it->second, b, path + "[" + name + "]");
  }
}

}  // namespace detail

void validate_train_config(const TrainConfig& cfg) {
  auto bad = [](const std::string& flag, const std::string& why) { throw InputError(flag + ": " + why); };
  if (cfg.epochs < 1 || cfg.epochs > kMaxEpochs)
    bad("--epochs " + std::to_string(cfg.epochs), fmt::format("must be in [1, {}]", kMaxEpochs));
  if (!(cfg.lr > 0) || !std::isfinite(cfg.lr)) bad("--lr", "must be positive");
  if (cfg.weight_decay < 0) bad("--weight-decay", "must be >= 0");
  if (cfg.runs < 1) bad("--runs " + std::to_string(cfg.runs), "must be >= 1");
  if (cfg.run_workers < 1) bad("--run-workers " + std::to_string(cfg.run_workers), "must be >= 1");
  if (cfg.patience < 0) bad("--patience", "must be >= 0");
  if (cfg.metric != "auto") (void)parse_metric(cfg.metric, "--metric");
  if (cfg.checkpoint_every < 1) bad("--checkpoint-every", "must be >= 1");
  if (cfg.resume && cfg.checkpoint.empty()) bad("--resume", "needs --checkpoint");
  // Run 0's checkpoint exists once any run has saved one; a later run's may not yet.
  if (cfg.resume && !std::filesystem::exists(cfg.checkpoint))
    bad("--resume", fmt::format("checkpoint {} does not exist (leave out --resume to start afresh)", cfg.checkpoint));
  if (cfg.layer_embeddings && cfg.predictions.empty()) bad("--layer-embeddings", "needs --predictions");
  if (cfg.profile_steps < 1) bad("--profile-steps " + std::to_string(cfg.profile_steps), "must be >= 1");
  // The profiler is per process and records every thread: concurrent runs would mix their steps.
  if (!cfg.profile.empty() && cfg.run_workers > 1 && cfg.runs > 1)
    bad("--profile", "profiles one run at a time: give --run-workers 1");
  if (cfg.train_fraction <= 0 || cfg.val_fraction < 0 || cfg.train_fraction + cfg.val_fraction >= 1)
    bad("--splits random", "train and validation fractions must leave a test set");
  const ModelConfig& m = cfg.model;
  if (!(m.dropout >= 0 && m.dropout < 1)) bad(fmt::format("--dropout {}", m.dropout), "must be in [0, 1)");
  if (m.hidden < 1 || m.hidden > kMaxHidden)
    bad(fmt::format("--hidden {}", m.hidden), fmt::format("must be in [1, {}]", kMaxHidden));
  if (m.layers < 1 || m.layers > kMaxLayers)
    bad(fmt::format("--layers {}", m.layers), fmt::format("must be in [1, {}]", kMaxLayers));
  if (cfg.threads < 0) bad(fmt::format("--threads {}", cfg.threads), "must be >= 0 (0: all cores)");
  if (m.device != "cpu") {
    std::optional<c10::Device> d;
    try {
      d = c10::Device(m.device);
    } catch (const std::exception&) {
    }
    if (!d || !(d->is_cpu() || d->is_cuda())) bad("--device " + m.device, "expected cpu, cuda or cuda:N");
    if (d->is_cuda() && !torch::cuda::is_available())
      bad("--device " + m.device, "no CUDA device here (a build without CUDA, or no GPU visible)");
    if (d->is_cuda() && d->has_index() && d->index() >= static_cast<int>(torch::cuda::device_count()))
      bad("--device " + m.device, fmt::format("this machine has {} CUDA device(s)", torch::cuda::device_count()));
  }
  try {
    (void)default_comm_timeout();
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

Metric run_metric(const TrainConfig& cfg, const GraphPart& part) {
  const bool platonov =
      std::any_of(part.splits.begin(), part.splits.end(), [](const SplitSet& s) { return s.name == "platonov"; });
  return resolve_metric(cfg.metric, part.num_classes, platonov);
}

namespace {

double peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) * 1024.0;  // KiB on Linux
}

// {"forward": {"min": ms, "max": ms}, ...}: per phase the fastest and slowest rank, from the
// reduced maxima of the times (the first n) and of their negations (no entry where no rank had
// phase times).
nlohmann::json phases_json(const std::vector<double>& reduced, size_t n) {
  static const char* const kNames[] = {"forward", "backward", "allreduce", "optimizer"};
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < n && k < std::size(kNames); ++k)
    if (std::isfinite(reduced[k])) j[kNames[k]] = {{"min", -reduced[n + k]}, {"max", reduced[k]}};
  return j;
}

// The time of a training step's phases as the device sees it, without a profiler: on a GPU,
// timing events recorded on the compute stream between the phases and read after the step's own
// synchronisation (no wait of their own), so a phase includes the device's idle time and its
// waits for peers (where train_issue_ms says what the host did meanwhile); on the CPU, where
// operations run as they are issued, the host's clock.
class PhaseClock {
 public:
  explicit PhaseClock(const c10::Device& device) : device_(device) { events_.reserve(8); }
  void mark() {  // a phase's end (the first mark: the step's start)
    if (off_) return;
    if (device_.is_cuda()) {
      try {  // the events of the first step, recorded again in every later one
        const c10::impl::VirtualGuardImpl impl(device_.type());
        if (marks_ == events_.size()) events_.emplace_back(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
        events_[marks_].record(impl.getStream(device_));
      } catch (const c10::Error& e) {
        turn_off(e);
        return;
      }
    } else {
      host_.push_back(std::chrono::steady_clock::now());
    }
    ++marks_;
  }
  // Milliseconds between consecutive marks; call after the device finished the step.
  // A device that cannot time its events turns the clock off (a warning, no phases) rather than
  // failing the training run.
  std::vector<double> phases_ms() {
    std::vector<double> out;
    try {
      for (size_t k = 1; k < marks_; ++k)
        out.push_back(device_.is_cuda() ? events_[k - 1].elapsedTime(events_[k])
                                        : std::chrono::duration<double, std::milli>(host_[k] - host_[k - 1]).count());
    } catch (const c10::Error& e) {
      turn_off(e);
    }
    return off_ ? std::vector<double>{} : out;
  }
  void clear() {
    marks_ = 0;
    host_.clear();
  }

 private:
  void turn_off(const c10::Error& e) {
    fmt::print(stderr, "adgnn train: step phase times are off ({})\n", e.what_without_backtrace());
    off_ = true;
    marks_ = 0;
  }

  c10::Device device_;
  std::vector<c10::Event> events_;
  std::vector<std::chrono::steady_clock::time_point> host_;
  size_t marks_ = 0;  // this step's
  bool off_ = false;
};

}  // namespace

RunResult train_run(const GraphPart& part, const TrainConfig& cfg_in, int64_t run, Communicator* comm) {
  validate_train_config(cfg_in);
  TrainConfig cfg = cfg_in;
  cfg.model.in_dim = part.features.cols;
  cfg.model.out_dim = part.num_classes;
  cfg.model.seed = cfg_in.model.seed + uint64_t(run);
  if (cfg.threads > 0) at::set_num_threads(int(cfg.threads));
  if (comm && comm->size() == 1) comm = nullptr;  // one rank: the one-process run
  const int P = comm ? comm->size() : 1;
  const bool lead = !comm || comm->rank() == 0;

  Model model(cfg.model);
  model.set_defer_stats(true);  // settled after the step (its device wait is there anyway)
  const c10::Device device(cfg.model.device);
  const c10::ScalarType dtype = activation_type(cfg.model);
  if ((comm ? comm->size() : 1) != part.parts)
    throw InputError("--partition-dir: a part of " + std::to_string(part.parts) + " for a run of " +
                     std::to_string(comm ? comm->size() : 1) + " ranks");
  if (int64_t(part.labels.size()) != int64_t(part.global_id.size()))
    throw InputError(part.graph_name + ": the graph has no labels to train on");
  // This rank's nodes (P = 1: all of them) and the transport to the others.
  PartTensors pt = part_tensors(part, device, dtype);
  MessageGraph& mg = pt.graph;
  std::shared_ptr<RankTransport> transport;
  if (comm) mg.transport = transport = make_rank_transport(*comm, comm->device_memory());
  // NCCL: the halo exchanges and allreduces are stream-ordered, the host does not wait for them
  // (a watchdog enforces the timeout); the host waits once per step, for the metrics.
  if (comm && comm->device_memory()) comm->set_deferred(true);
  const at::Tensor x = pt.x;
  const int64_t n = mg.num_dst;

  // The split over this rank's source rows: owned rows for the loss and accuracies, all source
  // rows for L_reg's training edges. Set sizes are the ranks' counts summed.
  const Masks split = choose_split(part, cfg, run, comm);
  const at::Tensor gid = mg.global_id.to(torch::kCPU), owned_gid = gid.slice(0, 0, n);
  const Masks masks{split.train.slice(0, 0, n).to(device), split.val.slice(0, 0, n).to(device),
                    split.test.slice(0, 0, n).to(device)};
  const at::Tensor train_src = split.train.to(device);
  const at::Tensor y_src = pt.y.to(device);
  const at::Tensor y = y_src.slice(0, 0, n);
  std::vector<int64_t> set_sizes{masks.train.sum().item<int64_t>(), masks.val.sum().item<int64_t>(),
                                 masks.test.sum().item<int64_t>()};
  if (comm) host_allreduce(*comm, set_sizes.data(), 3, DType::I64, ReduceOp::Sum);
  const int64_t n_train = set_sizes[0];
  if (n_train == 0)
    throw InputError("--splits " + cfg.splits + ": run " + std::to_string(run) + " has no training nodes");
  const at::Tensor train_idx = masks.train.nonzero().squeeze(1);
  const at::Tensor y_train = y.index_select(0, train_idx);

  // Sums over the ranks (small host vectors: metrics, accuracies, histograms).
  auto sum_ranks = [&](std::vector<double> v) {
    if (comm && !v.empty()) host_allreduce(*comm, v.data(), int64_t(v.size()), DType::F64, ReduceOp::Sum);
    return v;
  };
  auto sum_ranks_i = [&](std::vector<int64_t> v) {
    if (comm && !v.empty()) host_allreduce(*comm, v.data(), int64_t(v.size()), DType::I64, ReduceOp::Sum);
    return v;
  };
  // --metric: "auto" resolved on this graph; the same on every rank (the graph's, not the part's).
  const Metric metric = run_metric(cfg, part);
  const std::vector<at::Tensor> split_masks{masks.train, masks.val, masks.test};
  if (metric == Metric::RocAuc && part.num_classes == 2) {
    // Undefined on a split of one class: refused before training, not reported as NaN after it.
    const at::Tensor pos = y.eq(1);
    std::vector<int64_t> c;
    for (const auto& m : split_masks)
      for (const auto& t : {(m & pos).sum(), (m & ~pos).sum()}) c.push_back(t.item<int64_t>());
    c = sum_ranks_i(c);
    static const char* const kSplit[] = {"training", "validation", "test"};
    for (size_t k = 0; k < 3; ++k)
      if (c[2 * k] == 0 || c[2 * k + 1] == 0)
        throw InputError(fmt::format("--metric roc_auc: the {} nodes of run {} are all of one class", kSplit[k], run));
  }
  auto scores = [&](Metric m, const at::Tensor& logits) { return score_splits(m, logits, y, split_masks, comm); };

  FlatAdam opt(adam_groups(model, cfg.weight_decay), cfg.lr);

  const std::string ckpt = run_path(cfg.checkpoint, run);
  // Everything that changes the trajectory, except --epochs: a finished run can be extended.
  // Not the rank count: P ranks compute the one-process function, so a run may resume on others.
  const std::string fingerprint = describe(cfg) + " run=" + std::to_string(run) + " graph=" + part.graph_source_sha256;
  Checkpoint state;
  if (cfg.resume && !ckpt.empty() && std::filesystem::exists(ckpt))
    state = load_checkpoint(ckpt, model, opt, fingerprint);

  RunResult res;
  res.run = run;
  res.ranks = P;
  res.metric = to_string(metric);
  std::ofstream metrics;
  if (lead && !cfg.metrics.empty()) {
    if (cfg.resume) keep_metrics_through(run_path(cfg.metrics, run), state.epoch);
    errno = 0;
    metrics.open(run_path(cfg.metrics, run), cfg.resume ? std::ios::app : std::ios::trunc);
    if (!metrics) throw InputError("--metrics " + cfg.metrics + ": cannot open for writing (" + os_error() + ")");
  }
  const bool tty = lead && cfg.progress && ::isatty(STDERR_FILENO);
  // --profile: run 0's last profile_steps training steps.
  std::unique_ptr<StepProfiler> profiler;
  std::string profile_stem;
  if (!cfg.profile.empty() && run == 0) {
    std::error_code ec;
    std::filesystem::create_directories(cfg.profile, ec);
    if (ec) throw InputError("--profile " + cfg.profile + ": cannot create the folder (" + ec.message() + ")");
    profiler = std::make_unique<StepProfiler>(device.is_cuda());
    profile_stem = cfg.profile + "/" + to_string(cfg.model.backbone) + "-" + to_string(cfg.model.variant) + "-rank" +
                   std::to_string(comm ? comm->rank() : 0);
  }
  const int64_t first_profiled = std::max<int64_t>(1, cfg.epochs - cfg.profile_steps + 1);
  PhaseClock clock(device);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t since_best = state.epoch - state.best_epoch;
  int64_t epoch = state.epoch;
  int64_t done_here = 0;  // epochs trained in this process (resume starts later)
  ForwardStats last_stats;
  while (!state.stopped && epoch < cfg.epochs) {
    ++epoch;
    ++done_here;
    if (profiler && epoch >= first_profiled) profiler->begin();
    const auto te = std::chrono::steady_clock::now();
    clock.clear();
    clock.mark();
    ForwardOutput fw = [&] {
      RECORD_USER_SCOPE("forward");
      return model.forward(mg, x, true, epoch, y_src, train_src);
    }();
    at::Tensor loss;
    {
      RECORD_USER_SCOPE("loss");
      // The mean over every rank's training nodes: each rank's sum over the global count.
      loss = training_loss(fw, train_idx, y_train, 1.0 / double(n_train));
    }
    clock.mark();
    opt.zero_grad();
    {
      RECORD_USER_SCOPE("backward");
      loss.backward();
    }
    clock.mark();
    if (transport) {
      RECORD_USER_SCOPE("allreduce gradients");
      allreduce_gradients(opt, *transport);
    }
    clock.mark();
    {
      RECORD_USER_SCOPE("optimizer");
      opt.step();
    }
    clock.mark();
    // The host's time to issue the step (its own waits for the device included): near the step's
    // time, the host bounds the step; well below it, the device does (it finishes after the host).
    const auto issued = std::chrono::steady_clock::now();
    if (device.is_cuda()) torch::cuda::synchronize();
    const auto synced = std::chrono::steady_clock::now();
    const double train_ms = std::chrono::duration<double, std::milli>(synced - te).count();
    const double issue_ms = std::chrono::duration<double, std::milli>(issued - te).count();
    // Per phase, the fastest and the slowest rank's time, in one reduction of the same size on
    // every rank: a rank without phase times (its clock off) takes no part in either extreme.
    constexpr size_t n_phases = 4;
    std::vector<double> phase_ms = clock.phases_ms();
    if (phase_ms.size() != n_phases) phase_ms.assign(n_phases, -std::numeric_limits<double>::infinity());
    for (size_t k = 0; k < n_phases; ++k) phase_ms.push_back(-phase_ms[k]);
    for (size_t k = n_phases; k < 2 * n_phases; ++k)
      if (std::isinf(phase_ms[k])) phase_ms[k] = -std::numeric_limits<double>::infinity();
    // Whether any rank was asked to stop, in the same reduction: every rank stops after this epoch.
    phase_ms.push_back(cfg.stop_requested && cfg.stop_requested() ? 1.0 : 0.0);
    if (comm) host_allreduce(*comm, phase_ms.data(), int64_t(phase_ms.size()), DType::F64, ReduceOp::Max);
    const bool interrupted = phase_ms.back() > 0;
    phase_ms.pop_back();
    if (profiler && epoch >= first_profiled) profiler->end(train_ms);
    fw.stats.settle();
    const std::vector<double> losses = sum_ranks({loss.item<double>(), fw.reg_loss.item<double>(),
                                                  fw.depth_loss.defined() ? fw.depth_loss.item<double>() : 0.0});
    // Per-layer counts summed over the ranks, in one reduction.
    {
      ForwardStats& st = fw.stats;
      const size_t L = size_t(cfg.model.layers);
      for (auto* v : {&st.halo_rows, &st.halo_rows_full, &st.halo_bytes, &st.halo_bytes_full}) v->resize(L, 0);
      std::vector<int64_t> flat;
      for (auto* v : {&st.active_rows, &st.computed_rows, &st.edges_processed, &st.halo_rows,
                      &st.halo_rows_full, &st.halo_bytes, &st.halo_bytes_full})
        flat.insert(flat.end(), v->begin(), v->end());
      // Halo rows held by layers >= 2 (every halo row where they were not compacted).
      flat.push_back(st.deep_halo_rows >= 0 ? st.deep_halo_rows : mg.num_halo());
      flat = sum_ranks_i(flat);
      size_t k = 0;
      for (auto* v : {&st.active_rows, &st.computed_rows, &st.edges_processed, &st.halo_rows,
                      &st.halo_rows_full, &st.halo_bytes, &st.halo_bytes_full})
        for (auto& e : *v) e = flat[k++];
      st.deep_halo_rows = flat[k];
      last_stats = st;
    }

    torch::NoGradGuard no_grad;
    const ForwardOutput ev = model.forward(mg, x, false, epoch);
    const std::vector<double> acc = scores(Metric::Accuracy, ev.logits);
    const std::vector<double> score = metric == Metric::Accuracy ? acc : scores(metric, ev.logits);
    const std::vector<int64_t> eval_active = sum_ranks_i(ev.stats.active_rows);
    const double va = score[1];
    if (va > state.best_val) {
      state.best_val = va;
      state.best_test = score[2];
      state.best_train = score[0];
      state.best_epoch = epoch;
      since_best = 0;
      const at::Tensor hist = torch::bincount(ev.depth.to(torch::kCPU), {}, cfg.model.layers + 1);
      res.depth_histogram = sum_ranks_i(std::vector<int64_t>(hist.data_ptr<int64_t>(), hist.data_ptr<int64_t>() + hist.numel()));
    } else {
      ++since_best;
    }
    if (metrics.is_open()) {
      nlohmann::json j{{"run", run},
                       {"epoch", epoch},
                       {"loss", losses[0]},
                       {"reg_loss", losses[1]},
                       {"train_acc", acc[0]},
                       {"val_acc", acc[1]},
                       {"test_acc", acc[2]},
                       {"metric", to_string(metric)},
                       {"best_val", state.best_val},
                       {"best_epoch", state.best_epoch},
                       {"train_step_ms", train_ms},
                       {"train_issue_ms", issue_ms},
                       {"train_phase_ms", phases_json(phase_ms, n_phases)},
                       {"ranks", P},
                       {"active_rows", last_stats.active_rows},
                       {"computed_rows", last_stats.computed_rows},
                       {"edges_processed", last_stats.edges_processed},
                       {"eval_active_rows", eval_active}};
      if (fw.depth_loss.defined()) j["depth_loss"] = losses[2];
      static const char* const kSplitKey[] = {"train", "val", "test"};
      if (metric != Metric::Accuracy)
        for (size_t k = 0; k < 3; ++k) j[std::string(kSplitKey[k]) + "_" + to_string(metric)] = score[k];
      if (P > 1) {
        j["halo_rows"] = last_stats.halo_rows;
        j["halo_rows_full"] = last_stats.halo_rows_full;
        j["halo_bytes"] = last_stats.halo_bytes;
        j["halo_bytes_full"] = last_stats.halo_bytes_full;
        j["deep_halo_rows"] = last_stats.deep_halo_rows;  // summed over ranks
      }
      errno = 0;
      metrics << j.dump() << '\n';
      metrics.flush();
      if (!metrics) throw InputError("--metrics " + run_path(cfg.metrics, run) + ": write failed (" + os_error() + ")");
    }
    const bool stop = cfg.patience > 0 && since_best >= cfg.patience;
    state.epoch = epoch;
    state.stopped = stop;
    const bool finished = stop || epoch == cfg.epochs;
    if (lead && !ckpt.empty() && (epoch % cfg.checkpoint_every == 0 || finished || interrupted))
      save_checkpoint(ckpt, model, opt, state, fingerprint, cfg, ev.benefit_range);
    if (interrupted && !finished) {
      if (tty) std::fprintf(stderr, "\n");
      if (comm) comm->set_deferred(false);  // the step's operations done before the ranks leave
      throw Interrupted(run, epoch, ckpt);
    }
    if (tty) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double per = el / double(done_here);
      std::fprintf(stderr, "\r[run %lld] epoch %lld/%lld  loss %.4f  val %.2f  best %.2f@%lld (test %.2f)  ETA %s   ",
                   (long long)run, (long long)epoch, (long long)cfg.epochs, losses[0], 100 * va,
                   100 * state.best_val, (long long)state.best_epoch, 100 * state.best_test,
                   eta(per * double(cfg.epochs - epoch)).c_str());
    }
    if (stop) break;
  }
  if (tty) std::fprintf(stderr, "\n");
  if (profiler && profiler->steps() > 0) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    write_file_atomic(profile_stem + ".md",
                      profiler->markdown(fmt::format("Step profile: {}-{}, rank {} of {} (host {}), epochs {}-{}",
                                                     to_string(cfg.model.backbone), to_string(cfg.model.variant), comm ? comm->rank() : 0,
                                                     P, host, first_profiled, epoch),
                                         describe(cfg)));
    profiler->save_last_trace(profile_stem + ".trace.json");
    if (lead) std::fprintf(stderr, "profile: %s.md%s\n", profile_stem.c_str(), P > 1 ? " (and one per rank)" : "");
  } else if (profiler && lead) {
    std::fprintf(stderr, "--profile %s: early stopping ended run 0 before its last %lld epochs; nothing profiled\n",
                 cfg.profile.c_str(), (long long)cfg.profile_steps);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.epochs_run = epoch;
  res.ms_per_epoch = done_here > 0 ? 1e3 * res.seconds / double(done_here) : 0;
  res.best_epoch = state.best_epoch;
  res.best_val = state.best_val;
  res.test_at_best = state.best_test;
  res.train_at_best = state.best_train;
  res.edges_per_layer = last_stats.edges_processed;
  res.halo_rows = last_stats.halo_rows;
  res.halo_rows_full = last_stats.halo_rows_full;
  res.halo_bytes = last_stats.halo_bytes;
  res.halo_bytes_full = last_stats.halo_bytes_full;
  // Every rank's peak, in one sum of a vector with one slot per rank.
  res.peak_memory_per_rank.assign(size_t(P), 0.0);
  res.peak_memory_per_rank[size_t(comm ? comm->rank() : 0)] =
      device.is_cuda() ? double(peak_device_memory(device)) : peak_rss_bytes();
  if (comm) host_allreduce(*comm, res.peak_memory_per_rank.data(), P, DType::F64, ReduceOp::Sum);
  res.peak_memory_bytes = *std::max_element(res.peak_memory_per_rank.begin(), res.peak_memory_per_rank.end());

  if (!cfg.predictions.empty()) {
    torch::NoGradGuard no_grad;
    const ForwardOutput ev = model.forward(mg, x, false, epoch);
    // This rank's owned rows only: one file of every row (P = 1), or one file per rank plus an
    // index that read_predictions assembles (no rank ever holds every row).
    std::map<std::string, H5Array> arrays{{"logits", to_array(ev.logits)},
                                          {"prediction", to_array(ev.logits.argmax(1))},
                                          {"depth", to_array(ev.depth)},
                                          {"labels", to_array(y)}};
    if (ev.eps.defined()) arrays["eps"] = to_array(ev.eps.slice(0, 0, n));
    if (ev.layer_outputs.size() >= 2)
      arrays["embedding"] = to_array(ev.layer_outputs[ev.layer_outputs.size() - 2].slice(0, 0, n));
    if (cfg.layer_embeddings)  // per-layer cluster quality (the appendix's silhouette / CH scores)
      for (size_t t = 0; t < ev.layer_outputs.size(); ++t)
        arrays["layer_" + std::to_string(t + 1)] = to_array(ev.layer_outputs[t].slice(0, 0, n));
    arrays["degree"] = to_array(mg.degree.slice(0, 0, n).to(torch::kInt64));
    write_predictions(run_path(cfg.predictions, run), std::move(arrays), owned_gid, part, fingerprint, comm);
  }
  if (comm) comm->set_deferred(false);  // waits for the last operations; throws a failure among them
  return res;
}

RunResult train_run(const Graph& g, const TrainConfig& cfg, int64_t run, Communicator* comm) {
  validate_train_config(cfg);
  return train_run(rank_part(g, cfg, comm), cfg, run, comm);
}

TrainSummary train(const Graph& g, const TrainConfig& cfg, Communicator* comm) {
  validate_train_config(cfg);
  return train(rank_part(g, cfg, comm), cfg, comm);
}

Interrupted::Interrupted(int64_t run_, int64_t epoch_, std::string checkpoint_)
    : std::runtime_error(fmt::format("run {} stopped after epoch {}{}", run_, epoch_,
                                     checkpoint_.empty() ? " (no --checkpoint: nothing to resume from)"
                                                         : "; checkpoint " + checkpoint_ + " written")),
      run(run_),
      epoch(epoch_),
      checkpoint(std::move(checkpoint_)) {}

TrainSummary train(const GraphPart& part, const TrainConfig& cfg, Communicator* comm) {
  validate_train_config(cfg);
  TrainSummary s;
  const int64_t workers = std::min(cfg.run_workers, cfg.runs);
  if (workers <= 1) {
    for (int64_t r = 0; r < cfg.runs; ++r) s.runs.push_back(train_run(part, cfg, r, comm));
  } else {
    // The ranks of a distributed job run their collectives in one order: runs stay sequential.
    if (comm && comm->size() > 1)
      throw InputError("--run-workers " + std::to_string(cfg.run_workers) +
                       ": concurrent runs need one process (this job has " + std::to_string(comm->size()) +
                       " ranks)");
    // Each run on one intra-op thread, as `adgnn sweep` does with its points: set once here,
    // because at::set_num_threads is process-wide. The progress line would interleave: off.
    at::set_num_threads(1);
    TrainConfig c = cfg;
    c.threads = 0;
    c.progress = false;
    s.runs.resize(size_t(cfg.runs));
    std::atomic<int64_t> next{0};
    std::mutex mu;
    std::exception_ptr first_error;
    auto worker = [&] {
      for (int64_t r = next++; r < cfg.runs; r = next++) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error) return;
        }
        try {
          s.runs[size_t(r)] = train_run(part, c, r, nullptr);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!first_error) first_error = std::current_exception();
          return;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < workers; ++w) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    if (first_error) std::rethrow_exception(first_error);
  }
  auto mean_std = [&](auto get, double& mean, double& sd) {
    mean = 0;
    for (const auto& r : s.runs) mean += get(r);
    mean /= double(s.runs.size());
    sd = 0;
    for (const auto& r : s.runs) sd += (get(r) - mean) * (get(r) - mean);
    sd = s.runs.size() > 1 ? std::sqrt(sd / double(s.runs.size() - 1)) : 0.0;
  };
  s.metric = s.runs.front().metric;
  mean_std([](const RunResult& r) { return r.test_at_best; }, s.test_mean, s.test_std);
  mean_std([](const RunResult& r) { return r.best_val; }, s.val_mean, s.val_std);
  ModelConfig mc = cfg.model;
  mc.in_dim = part.features.cols;
  mc.out_dim = part.num_classes;
  s.parameters = Model(mc).num_parameters();
  return s;
}

}  // namespace adgnn
