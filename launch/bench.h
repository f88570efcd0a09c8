// `adgnn bench`'s settings, shared by the step benchmark (bench_commands.cpp) and the search for
// the largest graph that trains (bench_max_graph.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace adgnn {
struct CsbmParams;
}
namespace adgnn::cli {

struct BenchFlags {
  std::string dataset = "csbm:arxiv-scale", data_dir, device = "cuda", json;
  std::vector<std::string> backbones{"gcn"}, variants{"plain", "ad_fast", "ad"};
  std::vector<int64_t> depths{2, 4, 8};
  std::vector<std::string> fdelta_precisions{"fp32"};  // one row of the learned variant per entry
  std::vector<std::string> precisions{"fp32"};         // the activations' storage: one row per entry
  int64_t hidden = 128, steps = 30, warmup = 5;
  double dropout = 0.5, lr = 0.01, weight_decay = 5e-4, lambda = 0.0;
  std::string normalisation = "linear", compact = "auto";
  uint64_t seed = 0;
  bool breakdown = false, kernels = false;
  int64_t profile = 0;  // profiled steps per model after the timed ones (0: none)
  // A generated graph (csbm:<preset>) resized: nodes, average degree (2 x undirected edges /
  // nodes) and feature width; 0 keeps the preset's.
  int64_t nodes = 0, features = 0;
  double avg_degree = 0;
  // --max-graph: search the largest node count that trains instead of timing one graph.
  bool max_graph = false;
  int64_t memory_limit = 0;  // bytes a probe may peak at (0: the device's memory)
  double resolution = 0.05;  // the search stops when the fitting and failing sizes are this close
  int64_t max_nodes = 0;     // the largest size probed (0: the 32-bit node index's limit)
};

// The parameters of the generated graph the flags describe (the csbm preset of --dataset,
// resized by --nodes / --avg-degree / --features); InputError for another dataset.
CsbmParams bench_graph_params(const BenchFlags& f);
// InputError unless every --precision entry is fp32 or bf16.
void check_precisions(const BenchFlags& f);
// A row's label: the model's name, " bf16" for bfloat16 activations, " (f_delta P)" for f_delta's
// precision P other than fp32.
std::string bench_label(const std::string& backbone, const std::string& variant, const std::string& precision,
                        const std::string& fdelta_precision);
// "20GiB", "512MiB", "1.5GB", "4e9" (bytes) as bytes; InputError naming `flag` otherwise.
int64_t parse_byte_size(const std::string& text, const std::string& flag);
// Whether --nodes, --avg-degree or --features resize the graph.
bool bench_resizes_graph(const BenchFlags& f);

int run_bench(const BenchFlags& f);
int run_max_graph(const BenchFlags& f);

}  // namespace adgnn::cli
