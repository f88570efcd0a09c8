// `adgnn partition`: partitions a dataset and writes a partition folder (docs/partition.md), then
// prints what the folder's manifest records (edge cut, balance, halo rows) with time and memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>

#include "CLI/CLI.hpp"
#include "adgnn/comm.h"
#include "adgnn/graph_file.h"
#include "adgnn/launch.h"
#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "commands.h"
#include "ranks.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace adgnn::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Peak resident memory (VmHWM) in GiB, and its reset (Linux clear_refs "5"), so that each step
// reports its own peak rather than the largest so far. Without the reset the peaks are cumulative.
double peak_rss_gib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

struct PartitionArgs {
  std::string positional, flag, data_dir, out, splits;
  int32_t parts = 0;
  int64_t coarse_nodes = 0;  // coarse-metis only
  PartitionOptions opt;
  bool json = false;
};

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.3f}", s.empty() ? "" : " ", x);
  return s;
}

// "512 MiB" below 1 GiB, else "3.25 GiB".
std::string memory(double gib) {
  return gib < 1 ? fmt::format("{:.0f} MiB", gib * 1024) : fmt::format("{:.2f} GiB", gib);
}

void print_table(const nlohmann::json& m, const nlohmann::json& run) {
  const int64_t parts = m["parts"];
  std::printf("%s: %lld nodes -> %lld parts (%s", m["graph_name"].get<std::string>().c_str(),
              static_cast<long long>(m["nodes"].get<int64_t>()), static_cast<long long>(parts),
              m["method"].get<std::string>().c_str());
  if (m.contains("strata"))
    std::printf(", %d %s strata", m["strata"].get<int>(), m["strata_spacing"].get<std::string>().c_str());
  std::printf(", objective %s, seed %llu) -> %s\n", m["objective"].get<std::string>().c_str(),
              static_cast<unsigned long long>(m["seed"].get<uint64_t>()),
              run["out"].get<std::string>().c_str());
  std::printf("edge cut %lld of %lld undirected edges (%.1f%%)\n",
              static_cast<long long>(m["edge_cut"].get<int64_t>()),
              static_cast<long long>(run["undirected_edges"].get<int64_t>()),
              run["undirected_edges"].get<int64_t>() > 0
                  ? 100.0 * m["edge_cut"].get<double>() / run["undirected_edges"].get<double>()
                  : 0.0);
  const nlohmann::json& b = m["balance"];
  std::printf("balance (max / mean): nodes %.3f, edges %.3f", b["nodes"].get<double>(),
              b["edges"].get<double>());
  if (b.contains("train")) std::printf(", train %.3f", b["train"].get<double>());
  if (b.contains("strata"))
    std::printf(", strata %s", join(b["strata"].get<std::vector<double>>()).c_str());
  std::printf("\n\n| part | nodes | edge endpoints |%s halo rows | send rows |",
              m.contains("part_train") ? " train |" : "");
  const int64_t strata = m.contains("part_strata") ? m["part_strata"][0].size() : 0;
  for (int64_t s = 0; s < strata; ++s) std::printf(" stratum %lld |", static_cast<long long>(s));
  const std::vector<double> top =
      m.contains("top_fractions") ? m["top_fractions"].get<std::vector<double>>() : std::vector<double>{};
  for (double f : top) std::printf(" top %g%% |", 100 * f);
  std::printf("\n|---:|---:|---:|%s---:|---:|", m.contains("part_train") ? "---:|" : "");
  for (int64_t s = 0; s < strata + static_cast<int64_t>(top.size()); ++s) std::printf("---:|");
  std::printf("\n");
  for (int64_t q = 0; q < parts; ++q) {
    std::printf("| %lld | %lld | %lld |", static_cast<long long>(q),
                static_cast<long long>(m["part_nodes"][q].get<int64_t>()),
                static_cast<long long>(m["part_edges"][q].get<int64_t>()));
    if (m.contains("part_train"))
      std::printf(" %lld |", static_cast<long long>(m["part_train"][q].get<int64_t>()));
    std::printf(" %lld | %lld |", static_cast<long long>(m["halo_rows"][q].get<int64_t>()),
                static_cast<long long>(m["send_rows"][q].get<int64_t>()));
    for (int64_t s = 0; s < strata; ++s)
      std::printf(" %lld |", static_cast<long long>(m["part_strata"][q][s].get<int64_t>()));
    for (size_t f = 0; f < top.size(); ++f)
      std::printf(" %lld |", static_cast<long long>(m["part_top"][q][f].get<int64_t>()));
    std::printf("\n");
  }
  const nlohmann::json& t = run["time_s"];
  const double graph_gib = run["graph_memory_gib"].get<double>();
  if (run.contains("peak_rss_gib_per_process")) {
    std::string peaks;
    for (const auto& x : run["peak_rss_gib_per_process"])
      peaks += fmt::format("{}{:.2f}", peaks.empty() ? "" : ", ", x.get<double>());
    std::printf("\ntime: read %.1f s, partition %.1f s, build and write %.1f s (%lld processes); "
                "peak memory per process: %s GiB; the whole graph in memory: %s; folder %.1f MiB\n",
                t["read"].get<double>(), t["partition"].get<double>(), t["write"].get<double>(),
                static_cast<long long>(run["processes"].get<int64_t>()), peaks.c_str(), memory(graph_gib).c_str(),
                run["folder_bytes"].get<double>() / (1024.0 * 1024.0));
    return;
  }
  const nlohmann::json& r = run["peak_rss_gib"];
  std::printf("\ntime: load %.1f s, partition %.1f s, write %.1f s; peak memory: load %.2f GiB, "
              "partition %.2f GiB, write %.2f GiB (%s; the whole graph in memory: %s); "
              "folder %.1f MiB\n",
              t["load"].get<double>(), t["partition"].get<double>(), t["write"].get<double>(),
              r["load"].get<double>(), r["partition"].get<double>(), r["write"].get<double>(),
              run["loaded"].get<std::string>().c_str(), memory(graph_gib).c_str(),
              run["folder_bytes"].get<double>() / (1024.0 * 1024.0));
}

double folder_bytes(const std::string& dir) {
  double bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) bytes += static_cast<double>(e.file_size());
  return bytes;
}

void print_result(const PartitionArgs& a, nlohmann::json run) {
  nlohmann::json m = nlohmann::json::parse(read_file((std::filesystem::path(a.out) / "manifest.json").string()));
  run["out"] = a.out;
  run["undirected_edges"] =
      std::accumulate(m["part_edges"].begin(), m["part_edges"].end(), int64_t{0},
                      [](int64_t s, const nlohmann::json& x) { return s + x.get<int64_t>(); }) / 2;
  run["folder_bytes"] = folder_bytes(a.out);
  if (a.json) {
    m.erase("files");
    for (auto it = run.begin(); it != run.end(); ++it) m[it.key()] = it.value();
    std::printf("%s\n", m.dump(2).c_str());
  } else {
    print_table(m, run);
  }
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Across processes (mpirun -n P, or --partition ptscotch in one): every process reads its slice
// of the graph file; rank 0 prints.
int run_partition_distributed(const PartitionArgs& a, const std::string& path, const LaunchInfo& li) {
  std::unique_ptr<Communicator> comm = start_mpi_ranks(li, "adgnn partition");
  DistributedPartitionOptions o;
  o.method = a.opt.method;
  o.seed = a.opt.seed;
  if (a.opt.imbalance > 0) o.imbalance = a.opt.imbalance;
  o.coarse_nodes = a.coarse_nodes;
  const DistributedPartitionReport rep = partition_distributed(*comm, path, a.parts, a.out, o);
  if (comm->rank() != 0) return 0;
  nlohmann::json run;
  run["processes"] = comm->size();
  run["time_s"] = {{"read", rep.read_s}, {"partition", rep.partition_s}, {"write", rep.write_s}};
  if (o.method == "coarse-metis") run["cluster_graph"] = {{"clusters", rep.clusters}, {"edges", rep.cluster_edges}};
  std::vector<double> peaks;
  for (int64_t b : rep.peak_rss_bytes) peaks.push_back(static_cast<double>(b) / kGiB);
  run["peak_rss_gib_per_process"] = peaks;
  run["graph_memory_gib"] = static_cast<double>(GraphFileReader(path).info().memory_bytes()) / kGiB;
  print_result(a, run);
  return 0;
}

// The bytes a Graph holds (adjacency, features, labels, masks): the whole graph in memory.
double graph_memory_gib(const Graph& g) {
  double b = static_cast<double>(g.adj.indptr.size()) * 8 + static_cast<double>(g.adj.indices.size()) * 4 +
             static_cast<double>(g.features.dense.size()) * 4 + static_cast<double>(g.labels.size()) * 8;
  if (g.features.sparse)
    b += static_cast<double>(g.features.csr.indptr.size()) * 8 + static_cast<double>(g.features.csr.nnz()) * 8;
  for (const SplitSet& s : g.splits) b += static_cast<double>(s.train.size() + s.val.size() + s.test.size());
  return b / kGiB;
}

int run_partition(const PartitionArgs& a) {
  namespace fs = std::filesystem;
  // Cheap checks first: loading a big graph takes a while.
  if (!a.positional.empty() && !a.flag.empty() && a.positional != a.flag)
    throw InputError(fmt::format("--dataset {}: conflicts with the positional dataset {}", a.flag,
                                 a.positional));
  const std::string dataset = a.flag.empty() ? a.positional : a.flag;
  if (dataset.empty())
    throw InputError("--dataset: required (a name under --data-dir/ADGNN_DATA, or a path)");
  if (a.parts < 1) throw InputError(fmt::format("--parts {}: must be >= 1", a.parts));
  if (a.opt.strata < 1) throw InputError(fmt::format("--strata {}: must be >= 1", a.opt.strata));
  {
    const fs::path out(a.out);
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(parent, ec))
      throw InputError(fmt::format("--out {}: folder {} does not exist", a.out, parent.string()));
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
      throw InputError(fmt::format("--out {}: exists and is not a folder", a.out));
  }

  // Our HDF5 files are read without their features (each part reads its rows of them), and
  // are what the partitioner across processes reads.
  const bool generated = dataset.rfind("csbm:", 0) == 0;
  const std::string path = generated ? dataset : resolve_dataset(dataset, a.data_dir);
  const bool ours = !generated && !stored_graph_hash(path).empty();
  LaunchInfo li;
  try {
    li = detect_launch({});
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  const bool across = a.opt.method == "ptscotch" || a.opt.method == "coarse-metis";
  if (across || launched_multi(li)) {
    if (!across)
      throw InputError(fmt::format("--partition {}: runs in one process; across processes use "
                                   "--partition ptscotch or coarse-metis",
                                   a.opt.method));
    if (!ours)
      throw InputError(fmt::format("--dataset {}: {} reads our HDF5 graph files (with their "
                                   "graph_hash); convert it first with `adgnn data convert`",
                                   dataset, a.opt.method));
    if (a.opt.balance_train || a.opt.balance_edges || a.opt.objective != "cut")
      throw InputError(fmt::format("--partition {}: balances nodes and minimises the edge cut only "
                                   "(no --balance-train, --balance-edges, --objective vol)", a.opt.method));
    return run_partition_distributed(a, path, li);
  }

  reset_peak_rss();
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<GraphFileReader> rows;
  Graph g;
  double graph_gib = 0;
  if (ours) {
    rows = std::make_unique<GraphFileReader>(path);
    g = rows->read_structure();
    graph_gib = static_cast<double>(rows->info().memory_bytes()) / kGiB;
  } else {
    g = load_dataset(dataset, a.data_dir);
    graph_gib = graph_memory_gib(g);
  }
  const double t_load = seconds_since(t0), rss_load = peak_rss_gib();

  // The training mask of split 0 of the chosen family: balanced on request, reported always.
  std::vector<uint8_t> train;
  const SplitSet* splits = nullptr;
  if (!a.splits.empty()) {
    splits = g.find_splits(a.splits);
    if (!splits) throw InputError(fmt::format("--splits {}: {} has no such split family", a.splits, g.name));
  } else if (!g.splits.empty()) {
    splits = &g.splits.front();
  }
  if (splits && splits->count > 0 && static_cast<int64_t>(splits->train.size()) >= g.num_nodes)
    train.assign(splits->train.begin(), splits->train.begin() + g.num_nodes);
  if (a.opt.balance_train && train.empty())
    throw InputError(fmt::format("--balance-train: {} has no stored training split", g.name));

  reset_peak_rss();
  const auto t1 = std::chrono::steady_clock::now();
  const Partition p = partition_graph(g, a.parts, a.opt, train.empty() ? nullptr : &train);
  const double t_part = seconds_since(t1), rss_part = peak_rss_gib();

  reset_peak_rss();
  const auto t2 = std::chrono::steady_clock::now();
  write_partition(g, p, a.out, a.opt.method, &a.opt, rows.get());
  const double t_write = seconds_since(t2), rss_write = peak_rss_gib();

  nlohmann::json run;
  run["loaded"] = ours ? "structure only: features read per part" : "whole graph";
  run["graph_memory_gib"] = graph_gib;
  run["time_s"] = {{"load", t_load}, {"partition", t_part}, {"write", t_write}};
  run["peak_rss_gib"] = {{"load", rss_load}, {"partition", rss_part}, {"write", rss_write}};
  print_result(a, run);
  return 0;
}

}  // namespace

void add_partition_commands(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "partition", "Partition a dataset for distributed training and write a partition folder");
  auto a = std::make_shared<PartitionArgs>();
  cmd->add_option("dataset", a->positional, "Dataset name (under --data-dir or $ADGNN_DATA), csbm:<preset>, or path");
  cmd->add_option("--dataset,-d", a->flag, "Same as the positional argument");
  cmd->add_option("--data-dir", a->data_dir, "Folder holding the datasets (default: $ADGNN_DATA)");
  cmd->add_option("--parts,-p", a->parts, "Number of parts (= ranks of the training run)")->required();
  cmd->add_option("--out,-o", a->out, "Output folder: part-<r>.h5 per rank and manifest.json")->required();
  cmd->add_option("--partition,--method", a->opt.method,
                  "metis, stratified, random, contiguous (one process); across any number of processes "
                  "under mpirun, for graphs no one host holds (our HDF5 files only): ptscotch, or "
                  "coarse-metis where PT-Scotch's memory or time is too much (clusters per process, "
                  "METIS on process 0)")
      ->check(CLI::IsMember({"metis", "stratified", "random", "contiguous", "ptscotch", "coarse-metis"}));
  cmd->add_option("--coarse-nodes", a->coarse_nodes,
                  "coarse-metis: about how many clusters process 0 partitions with METIS (default 1024 "
                  "per part; more: a better cut, more memory on process 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--objective", a->opt.objective, "METIS objective: cut (edge cut) or vol (communication volume)")
      ->check(CLI::IsMember({"cut", "vol"}));
  cmd->add_flag("--balance-train", a->opt.balance_train, "Also balance the training nodes (split 0)");
  cmd->add_flag("--balance-edges", a->opt.balance_edges, "Also balance the degree sum per part");
  cmd->add_option("--imbalance", a->opt.imbalance,
                  "Tolerance: the largest part may weigh this times the mean, per constraint, in (1, 2] "
                  "(default 1.03)");
  cmd->add_option("--strata", a->opt.strata,
                  "Depth-benefit quantile bins: balanced by stratified, reported for every method");
  cmd->add_option("--strata-spacing", a->opt.strata_spacing,
                  "equal (quantile bins) or log (decades from the top: 0.1%, 0.9%, 9%, 90% for 4)")
      ->check(CLI::IsMember({"equal", "log"}));
  cmd->add_option("--splits", a->splits, "Split family whose split 0 gives the training nodes (default: the first stored)");
  cmd->add_option("--seed", a->opt.seed, "Seed of METIS, PT-Scotch or the random partitioner");
  cmd->add_flag("--json", a->json, "Print the manifest and the run's time and memory as JSON");
  cmd->callback([&run, a] { run = [a] { return run_partition(*a); }; });
}

}  // namespace adgnn::cli
