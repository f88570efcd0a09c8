// Hyperparameter sweeps: a grid of configurations trained concurrently (one intra-op thread per
// worker), selected by the mean validation score (--metric); finished points are appended to a JSON-lines
// file and skipped when the sweep is run again, so an interrupted sweep resumes.
#include <ATen/Parallel.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "adgnn/loaders.h"
#include "adgnn/settings.h"
#include "adgnn/trainer.h"
#include "nlohmann/json.hpp"
#include "yaml_config.h"

namespace adgnn {

namespace {

const char* kPaperGrid =
    "layers: [2, 3, 4]\n"
    "dropout: [0.1, 0.5, 0.6]\n"
    "lr: [0.001, 0.005, 0.01]\n"
    "hidden: [128, 256]\n"
    "weight_decay: [0.0001, 0.0005, 0.1]\n"
    "epochs: [200, 500, 1000]\n"
    "lambda: [0.0, 0.1, 0.8, 0.9]\n";
// The subset used where the full grid is too slow: the paper's values for the settings that
// matter most here (depth, learning rate, lambda), typical ones for the rest.
const char* kPaperSmallGrid =
    "layers: [2, 3]\n"
    "dropout: [0.5]\n"
    "lr: [0.005, 0.01]\n"
    "hidden: [128]\n"
    "weight_decay: [0.0005]\n"
    "epochs: [200]\n"
    "lambda: [0.0, 0.1, 0.8, 0.9]\n";

std::string key_of(const TrainConfig& c) { return describe(c) + " epochs=" + std::to_string(c.epochs) + " runs=" + std::to_string(c.runs); }

}  // namespace

std::vector<TrainConfig> expand_grid(const TrainConfig& base, const std::string& grid) {
  YAML::Node root;
  std::string where = grid;
  if (grid == "paper") root = YAML::Load(kPaperGrid), where = "--grid paper";
  else if (grid == "paper-small") root = YAML::Load(kPaperSmallGrid), where = "--grid paper-small";
  else root = load_yaml(grid);
  if (!root.IsMap() || root.size() == 0)
    throw InputError(where + ": expected a mapping of setting -> list of values");
  std::vector<TrainConfig> out{base};
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    std::vector<YAML::Node> values;
    if (kv.second.IsSequence()) {
      for (size_t k = 0; k < kv.second.size(); ++k) values.push_back(kv.second[k]);
    } else {
      values.push_back(kv.second);
    }
    if (values.empty()) throw InputError(where + ": '" + key + "' has no values");
    std::vector<TrainConfig> next;
    for (const auto& c : out)
      for (const auto& v : values) {
        YAML::Node one;
        one[key] = v;
        TrainConfig d = c;
        apply_yaml(one, d, where);
        next.push_back(d);
      }
    out.swap(next);
  }
  return out;
}

std::string to_yaml(const TrainConfig& c) {
  YAML::Emitter e;
  e.SetDoublePrecision(10);  // 0.8, not 0.80000000000000004
  e << YAML::BeginMap;
  for_each_setting(
      [&](const Setting& s, const auto& field) {
        if (s.source != Setting::Source::TestsOnly) e << YAML::Key << s.key << YAML::Value << field;
      },
      c);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

SweepResult sweep(const Graph& g, const TrainConfig& base, const SweepOptions& opt) {
  if (opt.workers < 1) throw InputError("--workers: must be >= 1");
  if (opt.out.empty()) throw InputError("--out: a results file is required (it makes the sweep resumable)");
  const std::vector<TrainConfig> grid = expand_grid(base, opt.grid);
  for (const auto& c : grid) validate_train_config(c);
  SweepResult res;
  res.points.resize(grid.size());
  // Points finished by an earlier, interrupted sweep.
  std::map<std::string, nlohmann::json> done;
  {
    std::ifstream in(opt.out);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("key") && j.contains("graph") && j["graph"] == g.source_sha256)
        done[j["key"].get<std::string>()] = j;  // a torn last line fails to parse and is redone
    }
  }
  std::ofstream out(opt.out, std::ios::app);
  if (!out) throw InputError("--out " + opt.out + ": cannot open for appending");
  std::mutex mu;
  std::atomic<size_t> next{0};
  size_t finished = 0;
  std::string first_error;
  at::set_num_threads(1);  // parallelism comes from the workers
  const GraphPart whole = rank_part(g, base, nullptr);  // shared by every point
  auto worker = [&] {
    for (size_t i = next++; i < grid.size(); i = next++) {
      SweepPoint p;
      p.cfg = grid[i];
      p.cfg.progress = false;
      p.cfg.threads = 0;
      p.cfg.run_workers = 1;  // the points are the parallelism
      const std::string key = key_of(p.cfg);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.empty()) return;
        auto it = done.find(key);
        // A line scored by another metric (one written before --metric existed is accuracy's)
        // is trained again.
        if (it != done.end() && it->second.value("metric", "accuracy") == to_string(run_metric(p.cfg, whole))) {
          const auto& j = it->second;
          p.val_mean = j["val_mean"], p.val_std = j["val_std"], p.test_mean = j["test_mean"],
          p.test_std = j["test_std"], p.seconds = j["seconds"];
          p.metric = j.value("metric", "accuracy");
          res.points[i] = p;
          ++finished;
          continue;
        }
      }
      try {
        const auto t0 = std::chrono::steady_clock::now();
        const TrainSummary s = train(whole, p.cfg);
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        p.val_mean = s.val_mean, p.val_std = s.val_std, p.test_mean = s.test_mean, p.test_std = s.test_std;
        p.metric = s.metric;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty()) first_error = e.what();
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      nlohmann::json j{{"key", key}, {"graph", g.source_sha256}, {"dataset", g.name},
                       {"metric", p.metric}, {"val_mean", p.val_mean}, {"val_std", p.val_std}, {"test_mean", p.test_mean},
                       {"test_std", p.test_std}, {"seconds", p.seconds}};
      errno = 0;
      out << j.dump() << '\n';
      out.flush();
      if (!out) {  // a worker thread: the error is thrown after the join
        if (first_error.empty()) first_error = "--out " + opt.out + ": write failed (" + os_error() + ")";
        return;
      }
      res.points[i] = p;
      ++finished;
      if (opt.progress && ::isatty(STDERR_FILENO))
        std::fprintf(stderr, "\r[sweep %s] %zu/%zu points   ", g.name.c_str(), finished, grid.size());
    }
  };
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < std::min<int64_t>(opt.workers, int64_t(grid.size())); ++w) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (opt.progress && ::isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  if (!first_error.empty()) throw InputError(first_error);
  for (size_t i = 1; i < res.points.size(); ++i)
    if (res.points[i].val_mean > res.points[res.best].val_mean) res.best = i;
  return res;
}

}  // namespace adgnn
