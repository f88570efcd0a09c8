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
#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "commands.h"
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
  PartitionOptions opt;
  bool json = false;
};

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.3f}", s.empty() ? "" : " ", x);
  return s;
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
  const nlohmann::json& r = run["peak_rss_gib"];
  std::printf("\ntime: load %.1f s, partition %.1f s, write %.1f s; peak memory: load %.2f GiB, "
              "partition %.2f GiB, write %.2f GiB; folder %.1f MiB\n",
              t["load"].get<double>(), t["partition"].get<double>(), t["write"].get<double>(),
              r["load"].get<double>(), r["partition"].get<double>(), r["write"].get<double>(),
              run["folder_bytes"].get<double>() / (1024.0 * 1024.0));
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

  reset_peak_rss();
  const auto t0 = std::chrono::steady_clock::now();
  const Graph g = load_dataset(dataset, a.data_dir);
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
  write_partition(g, p, a.out, a.opt.method, &a.opt);
  const double t_write = seconds_since(t2), rss_write = peak_rss_gib();

  const nlohmann::json m =
      nlohmann::json::parse(read_file((fs::path(a.out) / "manifest.json").string()));
  double folder_bytes = 0;
  for (const auto& e : fs::directory_iterator(a.out))
    if (e.is_regular_file()) folder_bytes += static_cast<double>(e.file_size());
  nlohmann::json run;
  run["out"] = a.out;
  run["undirected_edges"] = std::accumulate(p.part_edges.begin(), p.part_edges.end(), int64_t{0}) / 2;
  run["time_s"] = {{"load", t_load}, {"partition", t_part}, {"write", t_write}};
  run["peak_rss_gib"] = {{"load", rss_load}, {"partition", rss_part}, {"write", rss_write}};
  run["folder_bytes"] = folder_bytes;
  if (a.json) {
    nlohmann::json out = m;
    out.erase("files");
    for (auto it = run.begin(); it != run.end(); ++it) out[it.key()] = it.value();
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_table(m, run);
  }
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
  cmd->add_option("--partition", a->opt.method, "metis, stratified, random or contiguous")
      ->check(CLI::IsMember({"metis", "stratified", "random", "contiguous"}));
  cmd->add_option("--objective", a->opt.objective, "METIS objective: cut (edge cut) or vol (communication volume)")
      ->check(CLI::IsMember({"cut", "vol"}));
  cmd->add_flag("--balance-train", a->opt.balance_train, "Also balance the training nodes (split 0)");
  cmd->add_flag("--balance-edges", a->opt.balance_edges, "Also balance the degree sum per part");
  cmd->add_option("--imbalance", a->opt.imbalance,
                  "METIS's tolerance: the largest part may weigh this times the mean, per constraint, in (1, 2] "
                  "(default: METIS's 1.03)");
  cmd->add_option("--strata", a->opt.strata,
                  "Depth-benefit quantile bins: balanced by stratified, reported for every method");
  cmd->add_option("--strata-spacing", a->opt.strata_spacing,
                  "equal (quantile bins) or log (decades from the top: 0.1%, 0.9%, 9%, 90% for 4)")
      ->check(CLI::IsMember({"equal", "log"}));
  cmd->add_option("--splits", a->splits, "Split family whose split 0 gives the training nodes (default: the first stored)");
  cmd->add_option("--seed", a->opt.seed, "Seed of METIS / the random partitioner");
  cmd->add_flag("--json", a->json, "Print the manifest and the run's time and memory as JSON");
  cmd->callback([&run, a] { run = [a] { return run_partition(*a); }; });
}

}  // namespace adgnn::cli
