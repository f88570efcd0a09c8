// `adgnn predict`: per-node predictions of a trained model (a checkpoint of `adgnn train`) on a
// graph: the training graph or an updated one, one process or the ranks of mpirun / srun.
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <memory>

#include "CLI/CLI.hpp"
#include "adgnn/predict.h"
#include "commands.h"
#include "nlohmann/json.hpp"
#include "ranks.h"

namespace adgnn::cli {

namespace {

struct PredictArgs {
  std::string positional, dataset, data_dir, partition_dir, partition = "metis", backend = "auto";
  PredictOptions opt;
  int64_t threads = 0;
  bool json = false;
  LaunchOverrides launch;
};

void check_output_folder(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(dir))
    throw InputError(flag + " " + path + ": folder " + dir.string() + " does not exist");
}

}  // namespace

void add_predict_commands(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "predict", "Per-node predictions (class, probabilities, depth) of a trained model on a graph, in node order");
  auto a = std::make_shared<PredictArgs>();
  cmd->add_option("dataset", a->positional,
                  "The graph: the training graph, or an updated one with the model's feature width");
  cmd->add_option("--dataset,-d", a->dataset, "Same as the positional argument");
  cmd->add_option("--data-dir", a->data_dir, "Folder holding the datasets (default: $ADGNN_DATA)");
  cmd->add_option("--checkpoint", a->opt.checkpoint, "A checkpoint of adgnn train (--checkpoint)")->required();
  cmd->add_option("--out,-o", a->opt.out,
                  "HDF5 predictions (prediction, probabilities, depth, logits); under mpirun one file per rank "
                  "and this file as their index (adgnn predictions gather joins them)")
      ->required();
  cmd->add_option("--csv", a->opt.csv, "Also a CSV: node, prediction, depth, p_0, p_1, ... (rank 0 writes every row)");
  cmd->add_option("--device", a->opt.device, "cpu, cuda or cuda:N");
  cmd->add_option("--precision", a->opt.precision,
                  "Activations' storage: fp32 or bf16 (bfloat16 rows, float32 sums: half the GPU memory; default: the "
                  "trained model's)");
  cmd->add_option("--threads", a->threads, "Intra-op threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--partition-dir", a->partition_dir,
                  "Several ranks: each reads its part of a folder made by adgnn partition, never the whole graph");
  cmd->add_option("--partition", a->partition,
                  "Several ranks without --partition-dir: how rank 0 splits the graph (metis, random, contiguous)");
  cmd->add_option("--backend", a->backend, "Several ranks: auto (NCCL for CUDA when built, else MPI; under torchrun NCCL only), mpi, nccl");
  cmd->add_flag("--json", a->json, "Print the summary as JSON");
  cmd->footer("The model is rebuilt from the settings the checkpoint stores; a graph with another feature width or "
              "class count is refused. AD models normalise the depth benefit with the training graph's min and max "
              "(linear, log) or by the graph's own quantiles (rank).");
  cmd->callback([&run, a] {
    run = [a] {
      TrainConfig c;
      c.dataset = !a->dataset.empty() ? a->dataset : a->positional;
      c.data_dir = a->data_dir;
      c.partition_dir = a->partition_dir;
      c.partition.method = a->partition;
      if (c.dataset.empty() && c.partition_dir.empty())
        throw InputError("--dataset: give the graph (or --partition-dir under mpirun)");
      check_output_folder("--out", a->opt.out);
      check_output_folder("--csv", a->opt.csv);
      const StoredModel stored = read_stored_model(a->opt.checkpoint);  // a bad file fails before any rank starts
      if (a->threads > 0) at::set_num_threads(int(a->threads));
      c.model.device = a->opt.device;
      Ranks ranks = start_ranks(a->backend, a->launch, c.model.device);
      a->opt.device = c.model.device;
      const RunGraph rg = load_run_graph(c, ranks.comm);
      const PredictSummary s = predict(rg.part, a->opt, ranks.comm);
      if (ranks.rank != 0) return 0;
      const std::string model = model_name(stored.config.model.backbone, stored.config.model.variant);
      if (a->json) {
        nlohmann::ordered_json j{{"model", model},
                                 {"checkpoint", a->opt.checkpoint},
                                 {"epoch", stored.epoch},
                                 {"dataset", rg.part.graph_name},
                                 {"nodes", s.nodes},
                                 {"ranks", rg.part.parts},
                                 {"out", a->opt.out},
                                 {"depth_histogram", s.depth_histogram}};
        if (!a->opt.csv.empty()) j["csv"] = a->opt.csv;
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        std::string hist;
        for (size_t t = 0; t < s.depth_histogram.size(); ++t)
          hist += fmt::format("{}{:.1f}%", t ? " / " : "", 100.0 * double(s.depth_histogram[t]) / double(s.nodes));
        std::printf("%s (epoch %lld of %s) on %s: %lld nodes -> %s%s; depth T = 0..%zu: %s\n", model.c_str(),
                    (long long)stored.epoch, a->opt.checkpoint.c_str(), rg.part.graph_name.c_str(), (long long)s.nodes,
                    a->opt.out.c_str(), a->opt.csv.empty() ? "" : (" and " + a->opt.csv).c_str(),
                    s.depth_histogram.size() - 1, hist.c_str());
      }
      return 0;
    };
  });
}

}  // namespace adgnn::cli
