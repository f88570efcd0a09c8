// `adgnn train`: a YAML config plus command-line overrides; --model and --variant accept
// comma-separated lists and then print one row per combination.
#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <sstream>
#include <type_traits>

#include <torch/cuda.h>

#include "CLI/CLI.hpp"
#include "adgnn/launch.h"
#include "adgnn/settings.h"
#include "adgnn/trainer.h"
#include "commands.h"
#include "ranks.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace adgnn::cli {

namespace {

// SIGTERM / SIGUSR1 (a batch system's warning before its time limit, e.g. Slurm's
// --signal=B:USR1@120): the signal that asked `adgnn train` to stop, 0 for none. A signal handler
// can only set such a flag; the trainer reads it between epochs (TrainConfig::stop_requested).
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// The handlers reset themselves (SA_RESETHAND): a second signal ends the process at once.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

struct TrainArgs {
  std::string config, positional;
  TrainConfig flags;  // values of the flags; applied over the YAML only when given
  std::string models = "gcn", variants = "plain";
  bool json = false, no_progress = false;
  std::string summary;  // --summary: the JSON summary written to a file
  std::string backend = "auto";
  LaunchOverrides launch;
};

std::string label(const ModelConfig& m) { return model_name(m.backbone, m.variant); }


// Refuses what is not a whole number of T's range as written: CLI11 would otherwise saturate a
// number beyond it (99999999999999999999 became INT64_MAX), and the later range check would
// name a value the user never typed.
template <class T>
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        T v{};
        const char* end = in.data() + in.size();
        const auto [p, ec] = std::from_chars(in.data(), end, v);
        if (ec == std::errc() && p == end) return {};
        return fmt::format("{} is not a whole number in [{}, {}]", in, std::numeric_limits<T>::min(),
                           std::numeric_limits<T>::max());
      },
      "INT");
}

// The first name of a CLI11 option string ("--dataset,-d" -> "--dataset").
std::string primary_flag(const char* flags) {
  const std::string f(flags);
  return f.substr(0, f.find(','));
}

void register_train_flags(CLI::App* cmd, const std::shared_ptr<TrainArgs>& a) {
  cmd->add_option("dataset", a->positional, "Dataset name or path, or csbm:<preset>[:seed] for a generated graph");
  cmd->add_option("--config,-c", a->config, "YAML config (keys: the flags without dashes); flags override it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--model,-m", a->models, "Backbone(s): gcn, gat, sage, mixhop, gatv2, dirgnn (comma-separated)");
  cmd->add_option("--variant,-v", a->variants, "plain, ad, ad_fast, ad_sharp (AD#) (comma-separated)");
  for_each_setting(
      [&](const Setting& s, auto& field) {
        if (s.source == Setting::Source::Option) {
          CLI::Option* o = cmd->add_option(s.flag, field, s.help);
          using T = std::decay_t<decltype(field)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) o->check(whole_number<T>());
        }
        if (s.source == Setting::Source::Switch) cmd->add_flag(s.flag, field, s.help);
      },
      a->flags);
  cmd->get_option("--seed")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", a->json, "Print the summary as JSON");
  cmd->add_option("--summary", a->summary,
                  "Also write the JSON summary to this file (rank 0, atomically, once every model has trained): "
                  "for scripts, instead of reading stdout");
  cmd->add_option("--backend", a->backend, "Several ranks: auto (NCCL for CUDA when built, else MPI; under torchrun NCCL only), mpi, nccl");
  cmd->add_option("--rank", a->launch.rank, "This process's rank (default: from mpirun / srun / torchrun)");
  cmd->add_option("--world-size", a->launch.world_size, "Number of ranks (default: from mpirun / srun / torchrun)");
  cmd->add_option("--local-rank", a->launch.local_rank, "Rank on this host; picks the GPU (default: from mpirun / srun / torchrun)");
  cmd->add_flag("--no-progress", a->no_progress, "No progress line");
}

// The configuration: YAML first, then every flag given on the command line.
TrainConfig resolve(CLI::App* cmd, const TrainArgs& args, std::vector<std::string>& models,
                    std::vector<std::string>& variants) {
  const TrainArgs* a = &args;
  TrainConfig c;
  if (!a->config.empty()) load_train_config(a->config, c);
  const TrainConfig& f = a->flags;
  auto given = [&](const char* name) { return cmd->count(name) > 0; };
  for_each_setting(
      [&](const Setting& s, auto& to, const auto& from) {
        if (*s.flag && given(primary_flag(s.flag).c_str())) to = from;
      },
      c, f);
  if (!a->positional.empty()) {
    if (given("--dataset") && f.dataset != a->positional)
      throw InputError("--dataset " + f.dataset + ": conflicts with the positional dataset " + a->positional);
    c.dataset = a->positional;
  }
  c.progress = !a->no_progress;
  if (c.dataset.empty() && c.partition_dir.empty())
    throw InputError("--dataset: required (a name, a path, or csbm:<preset>), or --partition-dir");
  models = given("--model") || a->config.empty()
                                        ? split_list(a->models) : std::vector<std::string>{to_string(c.model.backbone)};
  variants = given("--variant") || a->config.empty()
                                          ? split_list(a->variants) : std::vector<std::string>{to_string(c.model.variant)};
  if (models.empty()) throw InputError("--model: empty list");
  if (variants.empty()) throw InputError("--variant: empty list");
  for (const auto& m : models) parse_backbone(m, "--model");  // every name checked before any run
  for (const auto& v : variants) parse_variant(v, "--variant");
  return c;
}

}  // namespace

void add_train_commands(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("train", "Train a model (full graph) and report the test score at the best validation epoch");
  auto a = std::make_shared<TrainArgs>();
  register_train_flags(cmd, a);
  cmd->footer("SIGTERM or SIGUSR1 (Slurm: --signal=B:USR1@120) stops training after the current epoch on every "
              "rank, writes --checkpoint and exits with code 75: rerun with --resume to continue.");
  cmd->callback([&run, cmd, a] {
    run = [cmd, a] {
      std::vector<std::string> models, variants;
      TrainConfig c = resolve(cmd, *a, models, variants);
      const bool several = models.size() > 1 || variants.size() > 1;
      if (several && (!c.checkpoint.empty() || !c.predictions.empty()))
        throw InputError("--checkpoint/--predictions: give one --model and one --variant");
      validate_train_config(c);
      if (!a->summary.empty()) {
        const std::filesystem::path dir = std::filesystem::absolute(a->summary).parent_path();
        if (!std::filesystem::is_directory(dir))
          throw InputError("--summary " + a->summary + ": folder " + dir.string() + " does not exist");
      }
      Ranks ranks = start_ranks(a->backend, a->launch, c.model.device);
      const bool lead = ranks.rank == 0;
      install_stop_handlers();
      c.stop_requested = [] { return g_stop_signal != 0; };
      // Off CUDA f_delta computes in float32: say so, and record what ran (metrics, JSON).
      const bool learned = std::find(variants.begin(), variants.end(), "ad") != variants.end();
      const bool reduced = c.model.fdelta_precision == "tf32" || c.model.fdelta_precision == "bf16";
      if (learned && reduced && c.model.device.rfind("cuda", 0) != 0) {
        if (lead)
          std::fprintf(stderr, "adgnn: warning: --fdelta-precision %s: CUDA only; f_delta computes in float32 on %s\n",
                       c.model.fdelta_precision.c_str(), c.model.device.c_str());
        c.model.fdelta_precision = "fp32";
      }
      const RunGraph rg = load_run_graph(c, ranks.comm);
      const GraphPart& part = rg.part;
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      if (!lead) c.progress = false;
      if (!a->json && lead) std::printf("graph: %s\n", rg.loading.c_str());
      const std::string title = metric_title(run_metric(c, part));
      if (!a->json && lead)
        std::printf("%-16s %-10s %8s %18s %18s %9s %10s\n", "model", "dataset", "params",
                    ("test " + title + " (%)").c_str(), ("val " + title + " (%)").c_str(), "runs", "ms/epoch");
      for (const auto& m : models)
        for (const auto& v : variants) {
          TrainConfig rc = c;
          rc.model.backbone = parse_backbone(m, "--model");
          rc.model.variant = parse_variant(v, "--variant");
          // Several models: one metrics file each, <stem>-<model>-<variant><ext>.
          if (several && !c.metrics.empty()) {
            const auto dot = c.metrics.rfind('.'), slash = c.metrics.rfind('/');
            const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
            rc.metrics = (ext ? c.metrics.substr(0, dot) : c.metrics) + "-" + m + "-" + v +
                         (ext ? c.metrics.substr(dot) : "");
          }
          TrainSummary s;
          try {
            s = train(part, rc, ranks.comm);
          } catch (const Interrupted& e) {
            if (lead)
              std::fprintf(stderr, "adgnn: %s: %s%s\n", g_stop_signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM", e.what(),
                           e.checkpoint.empty() ? "" : "; rerun with --resume to continue");
            return kInterruptedExit;
          }
          if (!lead) continue;
          double ms = 0;
          for (const auto& r : s.runs) ms += r.ms_per_epoch;
          ms /= double(s.runs.size());
          if (a->json || !a->summary.empty()) {
            nlohmann::ordered_json runs = nlohmann::ordered_json::array();
            for (const auto& r : s.runs)
              runs.push_back({{"run", r.run}, {"best_epoch", r.best_epoch}, {"best_val", r.best_val},
                              {"test", r.test_at_best}, {"ms_per_epoch", r.ms_per_epoch},
                              {"depth_histogram", r.depth_histogram}, {"edges_per_layer", r.edges_per_layer},
                              {"halo_rows_per_layer", r.halo_rows}, {"halo_rows_full_per_layer", r.halo_rows_full},
                              {"halo_bytes_per_layer", r.halo_bytes}, {"halo_bytes_full_per_layer", r.halo_bytes_full},
                              {"peak_memory_bytes", r.peak_memory_bytes},
                              {"peak_memory_bytes_per_rank", r.peak_memory_per_rank}});
            out.push_back({{"model", label(rc.model)}, {"backbone", to_string(rc.model.backbone)},
                           {"variant", to_string(rc.model.variant)}, {"layers", rc.model.layers},
                           {"dataset", part.graph_name}, {"config", describe(rc)},
                           {"ranks", s.runs.front().ranks},
                           {"partition", s.runs.front().ranks > 1 ? (rc.partition_dir.empty() ? rc.partition.method : part.method) : "none"},
                           {"graph_loading", rg.loading}, {"nodes", part.global_nodes},
                           {"parameters", s.parameters}, {"metric", s.metric}, {"test_mean", s.test_mean}, {"test_std", s.test_std},
                           {"val_mean", s.val_mean}, {"val_std", s.val_std}, {"ms_per_epoch", ms},
                           {"runs", runs}});
          }
          if (!a->json) {
            std::printf("%-16s %-10s %8lld %11.2f +- %-5.2f %11.2f +- %-5.2f %9zu %10.1f\n",
                        label(rc.model).c_str(), part.graph_name.c_str(), (long long)s.parameters,
                        100 * s.test_mean, 100 * s.test_std, 100 * s.val_mean, 100 * s.val_std,
                        s.runs.size(), ms);
            std::fflush(stdout);
          }
        }
      if (a->json && lead) std::printf("%s\n", out.dump(2).c_str());
      if (!a->summary.empty() && lead) write_file_atomic(a->summary, out.dump(2) + "\n");
      return 0;
    };
  });
}


void add_sweep_commands(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "sweep", "Train a grid of settings, pick the best by validation score (--metric); resumable");
  auto a = std::make_shared<TrainArgs>();
  register_train_flags(cmd, a);
  auto opt = std::make_shared<SweepOptions>();
  auto best_out = std::make_shared<std::string>();
  cmd->add_option("--grid", opt->grid, "YAML grid (setting: [values]) or paper / paper-small");
  cmd->add_option("--out,-o", opt->out, "JSON-lines results; finished points are skipped on rerun")->required();
  cmd->add_option("--workers", opt->workers, "Points trained concurrently (default 2: both cores)");
  cmd->add_option("--best-config", *best_out, "Write the best setting as a YAML config (atomically)");
  cmd->callback([&run, cmd, a, opt, best_out] {
    run = [cmd, a, opt, best_out] {
      std::vector<std::string> models, variants;
      TrainConfig c = resolve(cmd, *a, models, variants);
      if (models.size() != 1 || variants.size() != 1)
        throw InputError("--model/--variant: a sweep takes one backbone and one variant");
      c.model.backbone = parse_backbone(models[0], "--model");
      c.model.variant = parse_variant(variants[0], "--variant");
      if (!c.profile.empty()) throw InputError("--profile: not for sweeps (profile one setting with `adgnn train`)");
      opt->progress = !a->no_progress;
      const Graph g = load_dataset(c.dataset, c.data_dir);
      const SweepResult r = sweep(g, c, *opt);
      const SweepPoint& b = r.points[r.best];
      std::printf("%zu points; best by validation %s: val %.2f +- %.2f, test %.2f +- %.2f\n%s",
                  r.points.size(), b.metric.c_str(), 100 * b.val_mean, 100 * b.val_std, 100 * b.test_mean,
                  100 * b.test_std, to_yaml(b.cfg).c_str());
      if (!best_out->empty()) write_file_atomic(*best_out, to_yaml(b.cfg));
      return 0;
    };
  });
}

}  // namespace adgnn::cli
