// Rank, size and local rank from the launcher's environment or the command line.
#include "adgnn/launch.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fmt/format.h"

namespace adgnn {

namespace {

// A value with the words that name it in error messages: "SLURM_PROCID=3" or "--rank 3".
struct Value {
  int v = 0;
  std::string label;
};

[[noreturn]] void bad(const std::string& label, const std::string& problem) {
  throw std::invalid_argument(label + ": " + problem);
}

// Strict: optional '-', digits, nothing else (strtol alone accepts spaces, '+' and trailing junk).
std::optional<long long> parse_integer(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9') return std::nullopt;
  // On overflow strtoll saturates at LLONG_MIN/MAX, which every caller rejects as out of range.
  return std::strtoll(s.c_str(), nullptr, 10);
}

const char* env(const char* name) { return std::getenv(name); }

std::optional<Value> env_int(const char* name) {
  const char* raw = env(name);
  if (!raw) return std::nullopt;
  const std::string label = fmt::format("{}={}", name, raw);
  const auto v = parse_integer(raw);
  if (!v) bad(label, "not an integer");
  if (*v < INT_MIN || *v > INT_MAX) bad(label, "out of range");
  return Value{static_cast<int>(*v), label};
}

std::optional<Value> flag_int(const char* name, int v) {
  if (v == -1) return std::nullopt;  // not given
  const std::string label = fmt::format("{} {}", name, v);
  if (v < 0) bad(label, "must be non-negative");
  return Value{v, label};
}

// Slurm's tasks-per-node list, "4(x2),3" = 4, 4, 3: one count per node of the job or step.
std::vector<int> parse_tasks_per_node(const char* name, const std::string& s) {
  const std::string label = fmt::format("{}={}", name, s);
  const auto count = [&](const std::string& t) {
    const auto v = parse_integer(t);
    if (!v || *v < 1 || *v > INT_MAX) bad(label, "not a task count list like 4(x2),3");
    return static_cast<int>(*v);
  };
  std::vector<int> out;
  size_t pos = 0;
  while (true) {
    const size_t end = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, end - pos);
    const size_t paren = item.find("(x");
    if (paren == std::string::npos) {
      out.push_back(count(item));
    } else {
      if (item.back() != ')') bad(label, "not a task count list like 4(x2),3");
      const int tasks = count(item.substr(0, paren));
      const int repeat = count(item.substr(paren + 2, item.size() - paren - 3));
      if (repeat > 1 << 20) bad(label, "out of range");  // more nodes than any machine has
      out.insert(out.end(), static_cast<size_t>(repeat), tasks);
    }
    if (end == s.size()) break;
    pos = end + 1;
  }
  return out;
}

// Ranks on this node from one of Slurm's tasks-per-node lists, indexed by SLURM_NODEID (not
// needed when every node has the same count). nullopt when the list is unset or the node unknown.
std::optional<Value> slurm_tasks_on_this_node(const char* name) {
  const char* raw = env(name);
  if (!raw) return std::nullopt;
  const std::vector<int> per_node = parse_tasks_per_node(name, raw);
  const std::string label = fmt::format("{}={}", name, raw);
  bool uniform = true;
  for (int c : per_node) uniform = uniform && c == per_node[0];
  if (uniform) return Value{per_node[0], label};
  const auto node = env_int("SLURM_NODEID");
  if (!node) return std::nullopt;
  if (node->v < 0 || node->v >= static_cast<int>(per_node.size()))
    bad(node->label, fmt::format("must be below the {} nodes of {}", per_node.size(), label));
  return Value{per_node[node->v], label};
}

// What the launcher's environment says; all empty when no launcher is recognised.
struct EnvLaunch {
  std::string source;
  std::optional<Value> rank, size, local_rank, local_size;
  bool local_size_is_job_level = false;  // a job-wide Slurm count; capped at the step's size
  std::string store_host, store_prefix;   // torchrun's store (LaunchInfo)
  int store_port = 0;
  bool store_served_by_agent = false;
};

// Both of a launcher's rank and size variables, or neither.
bool read_pair(const char* rank_name, const char* size_name, EnvLaunch& e) {
  e.rank = env_int(rank_name);
  e.size = env_int(size_name);
  if (!e.rank && !e.size) return false;
  if (!e.rank) bad(rank_name, fmt::format("not set although {} is", e.size->label));
  if (!e.size) bad(size_name, fmt::format("not set although {} is", e.rank->label));
  return true;
}

// SLURM_LOCALID and the ranks on this node, for srun and for PMI under srun.
void read_slurm_local(EnvLaunch& e) {
  e.local_rank = env_int("SLURM_LOCALID");
  if (env("SLURM_STEP_TASKS_PER_NODE")) {  // srun's own count for this step: the job's may differ
    e.local_size = slurm_tasks_on_this_node("SLURM_STEP_TASKS_PER_NODE");
    return;
  }
  e.local_size = slurm_tasks_on_this_node("SLURM_TASKS_PER_NODE");
  if (!e.local_size) e.local_size = env_int("SLURM_NTASKS_PER_NODE");
  e.local_size_is_job_level = e.local_size.has_value();
}

// srun sets SLURM_PROCID and SLURM_NTASKS for its tasks. A batch script also has SLURM_PROCID
// (and SLURM_NTASKS only when tasks were requested), so both are required.
bool slurm_agrees(const EnvLaunch& e) {
  const char* procid = env("SLURM_PROCID");
  const char* ntasks = env("SLURM_NTASKS");
  if (!procid || !ntasks) return false;
  const auto r = parse_integer(procid), n = parse_integer(ntasks);
  return r && n && *r == e.rank->v && *n == e.size->v;
}

// torchrun's store address: MASTER_ADDR and MASTER_PORT, required for more than one rank.
void read_torchrun_store(EnvLaunch& e) {
  if (e.size->v <= 1) return;
  const std::string ranks = fmt::format("{} and {}", e.rank->label, e.size->label);
  const char* addr = env("MASTER_ADDR");
  if (!addr || !*addr) bad("MASTER_ADDR", "not set although " + ranks + " are (torchrun sets it)");
  const auto port = env_int("MASTER_PORT");
  if (!port) bad("MASTER_PORT", "not set although " + ranks + " are (torchrun sets it)");
  if (port->v < 1 || port->v > 65535) bad(port->label, "not a port number (1-65535)");
  e.store_host = addr;
  e.store_port = port->v;
  const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
  e.store_served_by_agent = agent && std::string(agent) == "True";
  // A restarted attempt (torchrun --max-restarts) meets under new keys in the same store.
  const char* run_id = env("TORCHELASTIC_RUN_ID");
  const auto restart = env_int("TORCHELASTIC_RESTART_COUNT");
  e.store_prefix = fmt::format("adgnn/{}/{}", run_id && *run_id ? run_id : "none", restart ? restart->v : 0);
}

EnvLaunch read_environment() {
  EnvLaunch e;
  // torchrun first: it is the innermost launcher whenever it is there.
  if (read_pair("RANK", "WORLD_SIZE", e)) {
    e.source = "torchrun";
    e.local_rank = env_int("LOCAL_RANK");
    e.local_size = env_int("LOCAL_WORLD_SIZE");
    read_torchrun_store(e);
    return e;
  }
  // MPI launchers first: under mpirun inside an allocation, SLURM_PROCID is the daemon's.
  if (read_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", e)) {
    e.source = "mpirun";
    e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
    e.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    return e;
  }
  if (read_pair("PMI_RANK", "PMI_SIZE", e)) {
    // Hydra (MPICH, Intel MPI) sets MPI_LOCALRANKID; srun's PMI plugins set PMI_* but not it.
    const bool under_srun = slurm_agrees(e);
    e.source = under_srun ? "srun" : "mpirun";
    e.local_rank = env_int("MPI_LOCALRANKID");
    e.local_size = env_int("MPI_LOCALNRANKS");
    if (!e.local_rank && under_srun) read_slurm_local(e);
    return e;
  }
  if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    read_pair("SLURM_PROCID", "SLURM_NTASKS", e);
    e.source = "srun";
    read_slurm_local(e);
    return e;
  }
  return e;  // no launcher
}

}  // namespace

LaunchInfo detect_launch(const LaunchOverrides& flags) {
  const auto f_rank = flag_int("--rank", flags.rank);
  const auto f_size = flag_int("--world-size", flags.world_size);
  const auto f_local = flag_int("--local-rank", flags.local_rank);
  // --rank with --world-size describe the whole launch: the environment is not read. One of them
  // alone replaces that value of the launcher's.
  const EnvLaunch e = f_rank && f_size ? EnvLaunch{} : read_environment();
  const bool have_env = !e.source.empty();
  if (!have_env) {
    if (f_rank && !f_size) bad(f_rank->label, "needs --world-size (no launcher variables found)");
    if (f_size && !f_rank) bad(f_size->label, "needs --rank (no launcher variables found)");
  }

  const Value size = f_size ? *f_size : have_env ? *e.size : Value{1, "the world size 1 (no launcher, no --world-size)"};
  const Value rank = f_rank ? *f_rank : have_env ? *e.rank : Value{0, "rank 0"};
  LaunchInfo info;
  info.source = f_rank || f_size ? "flags" : have_env ? e.source : "single";
  if (size.v < 1) bad(size.label, "must be at least 1");
  if (rank.v < 0) bad(rank.label, "must be non-negative");
  if (rank.v >= size.v) bad(rank.label, "must be below " + size.label);
  info.rank = rank.v;
  info.size = size.v;
  if (info.source == "torchrun") {
    info.store_host = e.store_host;
    info.store_port = e.store_port;
    info.store_served_by_agent = e.store_served_by_agent;
    info.store_prefix = e.store_prefix;
  }

  // Local size: the launcher's; without a launcher the ranks share one host unless --local-rank
  // says otherwise; 0 = unknown.
  std::optional<Value> local_size = e.local_size;
  if (local_size) {
    if (local_size->v < 1) bad(local_size->label, "must be at least 1");
    if (e.local_size_is_job_level && local_size->v > size.v)  // a smaller step in the job
      local_size = Value{size.v, local_size->label + " capped at " + size.label};
    if (local_size->v > size.v) bad(local_size->label, "must not exceed " + size.label);
    info.local_size = local_size->v;
  } else {
    info.local_size = !have_env && !f_local ? size.v : 0;
  }

  // Local rank: flag, launcher, else derived from the rank as under block placement (rank mod
  // GPUs is then the local rank either way).
  const std::optional<Value> local = f_local ? f_local : e.local_rank;
  if (local) {
    if (local->v < 0) bad(local->label, "must be non-negative");
    if (local->v >= size.v) bad(local->label, "must be below " + size.label);
    info.local_rank = local->v;
  } else {
    info.local_rank = local_size ? rank.v % local_size->v : rank.v;
  }
  if (local_size && info.local_rank >= local_size->v)
    bad(local->label, "must be below " + local_size->label + " (ranks on this host)");
  return info;
}

int pick_cuda_device(const LaunchInfo& info, int device_count) {
  if (device_count < 0)
    throw std::invalid_argument(fmt::format("pick_cuda_device: device count {} is negative", device_count));
  if (device_count == 0)
    throw std::runtime_error(fmt::format(
        "rank {} (local rank {}): no CUDA device visible (check CUDA_VISIBLE_DEVICES and the "
        "GPUs requested per node)",
        info.rank, info.local_rank));
  return info.local_rank % device_count;
}

bool launched_multi(const LaunchInfo& info) { return info.size > 1; }

void check_launch_matches(const LaunchInfo& info, int mpi_rank, int mpi_size) {
  if (info.source == "single" || (info.rank == mpi_rank && info.size == mpi_size)) return;
  const std::string from = info.source == "flags" ? "--rank/--world-size say" : info.source + " says";
  std::string hint;
  if (info.source == "srun" && mpi_size == 1)
    hint = ": start it with srun --mpi=pmix (or pmi2) and an MPI built with Slurm support, or "
           "run it under srun rather than directly in the batch script";
  else if (info.source == "flags")
    hint = ": give --rank/--world-size only when they match the launcher's";
  throw std::runtime_error(fmt::format("{} rank {} of {}, but MPI sees rank {} of {}{}", from,
                                       info.rank, info.size, mpi_rank, mpi_size, hint));
}

}  // namespace adgnn
