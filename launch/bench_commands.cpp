// `adgnn bench`: full-batch training-step time, peak memory and edges processed per layer for a
// set of models and depths on one graph (one process, one device), printed as a table and
// written as JSON; `--kernels` adds the aggregation kernels against the device's measured memory
// bandwidth and matmul rate, and the byte and FLOP floors of a GCN training step.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "adgnn/model.h"
#include "adgnn/ops.h"
#include "adgnn/loaders.h"
#include "adgnn/profile.h"
#include "adgnn/trainer.h"
#include "bench.h"
#include "commands.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace adgnn::cli {

namespace {

using Clock = std::chrono::steady_clock;

void sync(const c10::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(pos), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}
// Median of `reps` timed calls of f after 3 untimed ones, device-synchronised.
template <typename F>
double median_ms(const c10::Device& d, int64_t reps, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int64_t i = 0; i < reps; ++i) {
    sync(d);
    const auto t0 = Clock::now();
    f();
    sync(d);
    t.push_back(ms_since(t0));
  }
  return quantile(t, 0.5);
}

// The graph's training nodes: its seeded random split when it has one (generated graphs), the
// first split of another stored family, else a seeded random 60%.
at::Tensor train_mask_of(const Graph& g, uint64_t seed) {
  const SplitSet* s = g.find_splits("random");
  if (!s && !g.splits.empty()) s = &g.splits.front();
  if (s) {
    std::vector<uint8_t> m(s->train.begin(), s->train.begin() + g.num_nodes);
    return torch::from_blob(m.data(), {g.num_nodes}, torch::kUInt8).clone().to(torch::kBool);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::rand({g.num_nodes}, gen) < 0.6;
}

struct BenchRow {
  std::string backbone, variant;
  int64_t depth = 0;
  std::vector<double> step_ms, forward_ms, backward_ms, optimizer_ms;
  // Without --breakdown: when the host had issued the whole step (optimizer call returned), before
  // the closing device wait. Close to step_ms: the host, not the device, bounds the step.
  std::vector<double> issue_ms;
  int64_t peak_bytes = 0, parameters = 0;
  // What holds the peak (CUDA; bytes allocated, measured in the last step): the graph and the
  // inputs, held before the model exists; the model's state and the caches the earlier steps
  // left allocated (parameters, gradients, Adam moments, CSR caches built on first use, the GEMM
  // library's workspace: the same in both precisions); what the forward leaves allocated for the
  // backward (activations, masks, index lists, the loss); and the backward's and optimizer's
  // transients above that (the rest of the peak).
  int64_t graph_bytes = 0, model_state_bytes = 0, forward_saved_bytes = 0, backward_transient_bytes = 0;
  std::vector<int64_t> edges, active_rows;
  // --profile: device time per kernel (CPU: per operator, inclusive) over the profiled steps,
  // largest first, and the device's busy time per step.
  std::vector<std::pair<std::string, double>> profile_ms;
  double busy_ms_per_step = 0;
};

BenchRow bench_model(const MessageGraph& mg, const at::Tensor& x_host, const at::Tensor& y,
                     const at::Tensor& train_idx, const BenchFlags& f, int64_t num_classes,
                     const std::string& backbone, const std::string& variant, int64_t depth,
                     const std::string& precision, const std::string& fdelta_precision) {
  const c10::Device dev(f.device);
  ModelConfig mc;
  mc.precision = precision;
  mc.backbone = parse_backbone(backbone, "--backbones");
  mc.variant = parse_variant(variant, "--variants");
  mc.in_dim = x_host.size(1);
  mc.hidden = f.hidden;
  mc.out_dim = num_classes;
  mc.layers = depth;
  mc.dropout = f.dropout;
  mc.lambda = f.lambda;
  mc.normalisation = f.normalisation;
  mc.compact_deep_layers = f.compact;
  mc.fdelta_precision = fdelta_precision;
  mc.seed = f.seed;
  mc.device = f.device;
  // No other row's caches (transposes, f_delta's pairs) in this row's peak; the input rows in the
  // activations' type, held only while this row runs (the graph and inputs of its breakdown).
  release_graph_caches();
  const at::Tensor x = x_host.to(dev, activation_type(mc));
  reset_peak_device_memory(dev);
  const int64_t held_before_model = current_device_memory(dev);
  Model model(mc);
  model.set_defer_stats(true);  // no device wait between forward and backward
  FlatAdam opt(adam_groups(model, f.weight_decay), f.lr);
  const at::Tensor labels = y;
  const at::Tensor mask = torch::zeros({mg.num_dst}, torch::dtype(torch::kBool).device(dev)).index_fill(0, train_idx, true);
  const at::Tensor y_train = y.index_select(0, train_idx);
  BenchRow row;
  row.backbone = backbone;
  row.variant = variant;
  row.depth = depth;
  row.parameters = model.num_parameters();
  const int64_t total = f.warmup + f.steps + f.profile;
  StepProfiler profiler(dev.is_cuda());
  for (int64_t step = 0; step < total; ++step) {
    const bool profiled = step >= f.warmup + f.steps;
    if (profiled) profiler.begin();
    sync(dev);
    const auto t0 = Clock::now();
    opt.zero_grad();
    const int64_t held_before_forward = current_device_memory(dev);
    ForwardOutput out = model.forward(mg, x, /*training=*/true, step, labels, mask);
    const at::Tensor loss = training_loss(out, train_idx, y_train, 1.0 / double(train_idx.numel()));
    if (step + 1 == total) {
      row.graph_bytes = held_before_model;
      row.model_state_bytes = held_before_forward - held_before_model;
      row.forward_saved_bytes = current_device_memory(dev) - held_before_forward;
    }
    if (f.breakdown) sync(dev);
    const auto t1 = Clock::now();
    loss.backward();
    if (f.breakdown) sync(dev);
    const auto t2 = Clock::now();
    opt.step();
    const auto t_issued = Clock::now();
    sync(dev);
    const auto t3 = Clock::now();
    using ms = std::chrono::duration<double, std::milli>;
    if (profiled) profiler.end(ms(t3 - t0).count());
    if (step >= f.warmup && step < f.warmup + f.steps) {
      row.step_ms.push_back(ms(t3 - t0).count());
      row.forward_ms.push_back(ms(t1 - t0).count());
      row.backward_ms.push_back(ms(t2 - t1).count());
      row.optimizer_ms.push_back(ms(t3 - t2).count());
      row.issue_ms.push_back(ms(t_issued - t0).count());
    }
    if (step + 1 == total) {
      out.stats.settle();
      row.edges = out.stats.edges_processed;
      row.active_rows = out.stats.active_rows;
    }
  }
  if (f.profile > 0) {
    row.profile_ms = profiler.largest_ms_per_step();
    row.busy_ms_per_step = profiler.busy_ms_per_step();
  }
  row.peak_bytes = peak_device_memory(dev);
  row.backward_transient_bytes =
      row.peak_bytes - row.graph_bytes - row.model_state_bytes - row.forward_saved_bytes;
  return row;
}

// Aggregation kernels against the device's own limits: a copy's bandwidth and a matmul's rate.
nlohmann::json bench_kernels(const MessageGraph& mg, const BenchFlags& f, int64_t in_features, int64_t classes) {
  const c10::Device dev(f.device);
  const int64_t n = mg.num_dst, F = f.hidden, E = mg.col.numel();
  const int64_t reps = std::max<int64_t>(f.steps, 10);
  nlohmann::json j;
  // Memory bandwidth: a copy of 1 GiB (read + write), or 128 MiB on the CPU.
  const int64_t copy_elems = (dev.is_cuda() ? (int64_t(1) << 30) : (int64_t(1) << 27)) / 4;
  at::Tensor a = torch::ones({copy_elems}, torch::dtype(torch::kFloat32).device(dev)), b = torch::empty_like(a);
  const double copy_ms = median_ms(dev, reps, [&] { b.copy_(a); });
  const double bw = 2.0 * double(copy_elems) * 4 / (copy_ms * 1e-3);  // bytes / s
  a = b = at::Tensor();
  // Matmul rate at the model's shape: [n, F] x [F, F].
  const at::Tensor h = torch::randn({n, F}, torch::dtype(torch::kFloat32).device(dev));
  const at::Tensor w = torch::randn({F, F}, torch::dtype(torch::kFloat32).device(dev));
  const double mm_ms = median_ms(dev, reps, [&] { (void)h.mm(w); });
  const double flops_rate = 2.0 * double(n) * F * F / (mm_ms * 1e-3);
  // SpMM forward over every row, its transposed backward, and over a 5% subset of rows.
  const double fwd_ms = median_ms(dev, reps, [&] { (void)csr_aggregate(mg.rowptr, mg.col, mg.gcn_weight, h); });
  at::Tensor hx = h.clone().requires_grad_(true);
  const at::Tensor out = csr_aggregate(mg.rowptr, mg.col, mg.gcn_weight, hx);
  const at::Tensor probe = torch::randn_like(out);
  const double bwd_ms = median_ms(dev, reps, [&] { (void)torch::autograd::grad({out}, {hx}, {probe}, /*retain_graph=*/true); });
  const at::Tensor some = std::get<0>(torch::randperm(n, torch::dtype(torch::kInt64).device(dev)).slice(0, 0, n / 20).sort());
  const double sub_ms = median_ms(dev, reps, [&] { (void)csr_aggregate(mg.rowptr, mg.col, mg.gcn_weight, h, some); });
  // Counter-based dropout (p 0.5): over layer 1's input, every row; over a hidden-width input
  // with 5% of the rows flagged (AD's deeper layers), forward and gradient (which zeroes the
  // unflagged rows). Bytes: the rows read and written, the gradient's zero rows written.
  const at::Tensor gid = torch::arange(n, torch::dtype(torch::kInt64).device(dev));
  const at::Tensor x_in = torch::randn({n, in_features}, torch::dtype(torch::kFloat32).device(dev));
  const double drop_in_ms = median_ms(dev, reps, [&] { (void)dropout_rows(x_in, gid, 0.5, 0, 1, 1); });
  const at::Tensor flags =
      torch::zeros({n}, torch::dtype(torch::kUInt8).device(dev)).index_fill_(0, some, 1);
  const double drop_some_ms = median_ms(dev, reps, [&] { (void)dropout_rows(h, gid, 0.5, 0, 1, 2, flags); });
  const at::Tensor hd = h.clone().requires_grad_(true);
  const at::Tensor dropped = dropout_rows(hd, gid, 0.5, 0, 1, 2, flags);
  const at::Tensor dprobe = torch::randn_like(dropped);
  const double drop_grad_ms = median_ms(dev, reps, [&] {
    (void)torch::autograd::grad({dropped}, {hd}, {dprobe}, /*retain_graph=*/true);
  });
  const double some_rows = double(some.numel());
  const double drop_in_bytes = 2.0 * double(n) * double(in_features) * 4;
  const double drop_some_bytes = 2.0 * some_rows * double(F) * 4;
  const double drop_grad_bytes = double(n) * double(F) * 4 + some_rows * double(F) * 4;
  // Compulsory traffic of one full SpMM: the CSR (rowptr, col, weight), each input row once and
  // each output row once; gathered traffic: one input row per entry.
  const double csr_bytes = double(n + 1) * 8 + double(E) * (4 + 4);
  const double min_bytes = csr_bytes + 2.0 * double(n) * F * 4;
  const double gathered_bytes = csr_bytes + double(E) * F * 4 + double(n) * F * 4;
  // Floors of a GCN training step at each depth: every layer's SpMM forward and backward at
  // compulsory traffic, and the matmuls (forward, and grad of input and weight) at the measured
  // rate; layer 1 reads the input features, the last writes the classes.
  nlohmann::json floors = nlohmann::json::array();
  for (int64_t d : f.depths) {
    double bytes = 0, flops = 0;
    for (int64_t t = 1; t <= d; ++t) {
      const double fin = t == 1 ? double(in_features) : double(F);
      const double fout = t == d ? double(classes) : double(F);
      bytes += 2 * (csr_bytes + 2.0 * double(n) * fin * 4);  // SpMM forward + backward
      flops += 3 * 2.0 * double(n) * fin * fout;            // x W, and its two gradients
    }
    floors.push_back({{"depth", d}, {"bytes", bytes}, {"bytes_floor_ms", bytes / bw * 1e3},
                      {"flops", flops}, {"flops_floor_ms", flops / flops_rate * 1e3}});
  }
  j = {{"copy_bandwidth_GBps", bw / 1e9},
       {"matmul_TFLOPs", flops_rate / 1e12},
       {"spmm_forward_ms", fwd_ms},
       {"spmm_backward_ms", bwd_ms},
       {"spmm_forward_5pct_rows_ms", sub_ms},
       {"spmm_min_bytes", min_bytes},
       {"spmm_gathered_bytes", gathered_bytes},
       {"spmm_forward_min_bytes_GBps", min_bytes / (fwd_ms * 1e-3) / 1e9},
       {"spmm_forward_gathered_GBps", gathered_bytes / (fwd_ms * 1e-3) / 1e9},
       {"spmm_backward_gathered_GBps", gathered_bytes / (bwd_ms * 1e-3) / 1e9},
       {"dropout_input_ms", drop_in_ms},
       {"dropout_input_bytes", drop_in_bytes},
       {"dropout_5pct_rows_ms", drop_some_ms},
       {"dropout_5pct_rows_bytes", drop_some_bytes},
       {"dropout_5pct_rows_gradient_ms", drop_grad_ms},
       {"dropout_5pct_rows_gradient_bytes", drop_grad_bytes},
       {"gcn_step_floors", floors}};
  return j;
}

}  // namespace

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  static const std::vector<std::pair<std::string, double>> units = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"TB", 1e12},
      {"GB", 1e9},  {"MB", 1e6},  {"KB", 1e3},  {"B", 1.0}};
  const auto bad = [&] { return InputError(flag + " " + text + ": expected a size such as 20GiB, 512MiB or 4e9"); };
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = unit.empty() ? 1.0 : 0.0;
  for (const auto& [name, s] : units)
    if (unit == name) scale = s;
  if (scale == 0.0 || !(v > 0) || !std::isfinite(v * scale) || v * scale > 9e18) throw bad();
  return int64_t(v * scale);
}

bool bench_resizes_graph(const BenchFlags& f) { return f.nodes > 0 || f.features > 0 || f.avg_degree > 0; }

CsbmParams bench_graph_params(const BenchFlags& f) {
  CsbmParams p = csbm_params_of(f.dataset, "--dataset");
  if (f.nodes > 0) {
    p = csbm_at_nodes(p, f.nodes);
    p.name += fmt::format("-{}nodes", f.nodes);
  }
  if (f.avg_degree > 0) {
    p.avg_degree = f.avg_degree;
    p.undirected_edges = -1;
  }
  if (f.features > 0) p.features = f.features;
  return p;
}

void check_precisions(const BenchFlags& f) {
  for (const auto& p : f.precisions)
    if (p != "fp32" && p != "bf16") throw InputError("--precision: " + p + " is not one of fp32, bf16");
}

std::string bench_label(const std::string& backbone, const std::string& variant, const std::string& precision,
                        const std::string& fdelta_precision) {
  return model_name(parse_backbone(backbone), parse_variant(variant)) + (precision == "fp32" ? "" : " " + precision) +
         (fdelta_precision == "fp32" ? "" : " (f_delta " + fdelta_precision + ")");
}

int run_bench(const BenchFlags& f) {
  if (bench_resizes_graph(f) && f.dataset.rfind("csbm:", 0) != 0)
    throw InputError("--nodes / --avg-degree / --features: resize a generated graph only (--dataset csbm:<preset>, not " +
                     f.dataset + ")");
  if (f.memory_limit) throw InputError("--memory-limit: only with --max-graph");
  if (f.max_nodes) throw InputError("--max-nodes: only with --max-graph");
  if (f.steps < 1) throw InputError("--steps: must be at least 1");
  if (f.warmup < 0) throw InputError("--warmup: must be non-negative");
  if (f.hidden < 1) throw InputError("--hidden: must be at least 1");
  for (int64_t d : f.depths)
    if (d < 1 || d > 64) throw InputError("--depths: " + std::to_string(d) + " is not in 1..64");
  for (const auto& v : f.variants) parse_variant(v, "--variants");
  for (const auto& p : f.fdelta_precisions)
    if (p != "fp32" && p != "tf32" && p != "bf16")
      throw InputError("--fdelta-precision: " + p + " is not one of fp32, tf32, bf16");
  for (const auto& b : f.backbones) parse_backbone(b, "--backbones");
  check_precisions(f);
  c10::Device dev = c10::kCPU;
  try {
    dev = c10::Device(f.device);
  } catch (const std::exception&) {
    throw InputError("--device " + f.device + ": not a device (cpu, cuda, cuda:N)");
  }
  if (dev.is_cuda() && (!cuda_kernels_built() || torch::cuda::device_count() == 0))
    throw InputError("--device " + f.device + ": " +
                     (cuda_kernels_built() ? "no CUDA device here" : "this build has no CUDA kernels (-DADGNN_CUDA=ON)"));
  if (dev.is_cuda() && !dev.has_index()) dev = c10::Device(c10::kCUDA, 0);
  // A row labelled tf32 or bf16 must have run so: off CUDA f_delta computes in float32.
  const bool learned = std::find(f.variants.begin(), f.variants.end(), "ad") != f.variants.end();
  for (const auto& p : f.fdelta_precisions)
    if (learned && p != "fp32" && !dev.is_cuda())
      throw InputError("--fdelta-precision " + p + ": CUDA only (this bench runs on " + dev.str() + ")");
  BenchFlags fl = f;
  fl.device = dev.str();

  const auto t_load = Clock::now();
  const Graph g = bench_resizes_graph(f) ? generate_csbm(bench_graph_params(f)) : load_dataset(f.dataset, f.data_dir);
  const double load_s = ms_since(t_load) / 1e3;
  GraphTensors gt = to_tensors(g, dev);
  // The input rows wait on the host: each row copies them to the device in its type.
  const at::Tensor x_host = gt.x.to(torch::kCPU);
  gt.x = at::Tensor();
  const at::Tensor train_idx = train_mask_of(g, f.seed).nonzero().squeeze(1).to(dev);
  const int64_t entries = gt.col.numel();
  fmt::print("graph {}: {} nodes, {} symmetric CSR entries, {} features, {} classes (loaded in {:.1f} s)\n",
             g.name, g.num_nodes, entries, gt.num_features, g.num_classes, load_s);
  fmt::print("device {}; hidden {}, dropout {}, Adam lr {} wd {}; median of {} steps after {} warm-up\n\n",
             fl.device, f.hidden, f.dropout, f.lr, f.weight_decay, f.steps, f.warmup);

  nlohmann::json doc;
  doc["device"] = fl.device;
  doc["graph"] = {{"name", g.name}, {"nodes", g.num_nodes}, {"edges", entries},
                  {"features", gt.num_features}, {"classes", g.num_classes}};
  doc["settings"] = {{"hidden", f.hidden}, {"dropout", f.dropout}, {"lr", f.lr},
                     {"weight_decay", f.weight_decay}, {"lambda", f.lambda},
                     {"normalisation", f.normalisation}, {"steps", f.steps}, {"warmup", f.warmup},
                     {"breakdown", f.breakdown}};
  doc["rows"] = nlohmann::json::array();
  // "host ms": the host's issue time of a step (median), only without --breakdown (whose waits it would hold).
  fmt::print("| model | depth | step ms (median) | p10-p90 | {}peak MiB | edges per layer (% of all entries) |\n",
             f.breakdown ? "fwd / bwd / opt ms | " : "host ms | ");
  fmt::print("|---|---:|---:|---:|---:|---:|---|\n");
  std::string profiles, memory;
  for (const auto& act : f.precisions) {
  // The edge weights in the precision's type (the CSR shared), held only while its rows run.
  const MessageGraph mg = message_graph(gt, act == "bf16" ? torch::kBFloat16 : torch::kFloat32);
  for (int64_t d : f.depths) {
    for (const auto& b : f.backbones) {
      for (const auto& v : f.variants) for (const auto& prec : v == "ad" ? f.fdelta_precisions : std::vector<std::string>{"fp32"}) {
        const BenchRow r = bench_model(mg, x_host, gt.y, train_idx, fl, g.num_classes, b, v, d, act, prec);
        const std::string label = bench_label(b, v, act, prec);
        std::vector<double> frac;
        std::string per_layer;
        for (int64_t e : r.edges) {
          frac.push_back(entries ? double(e) / double(entries) : 0.0);
          per_layer += fmt::format("{}{:.1f}", per_layer.empty() ? "" : " / ", 100.0 * frac.back());
        }
        const double med = quantile(r.step_ms, 0.5);
        fmt::print("| {} | {} | {:.2f} | {:.2f}-{:.2f} | {}{} | {} |\n", label, d, med,
                   quantile(r.step_ms, 0.1), quantile(r.step_ms, 0.9),
                   f.breakdown ? fmt::format("{:.2f} / {:.2f} / {:.2f} | ", quantile(r.forward_ms, 0.5),
                                             quantile(r.backward_ms, 0.5), quantile(r.optimizer_ms, 0.5))
                               : fmt::format("{:.2f} | ", quantile(r.issue_ms, 0.5)),
                   dev.is_cuda() ? fmt::format("{:.0f}", double(r.peak_bytes) / (1 << 20)) : std::string("n/a"),
                   per_layer);
        std::fflush(stdout);
        nlohmann::json row = {{"model", label}, {"backbone", b}, {"variant", v}, {"precision", act},
                              {"fdelta_precision", prec},
                              {"depth", d}, {"hidden", f.hidden},
                              {"step_ms_median", med},
                              {"step_ms_p10", quantile(r.step_ms, 0.1)},
                              {"step_ms_p90", quantile(r.step_ms, 0.9)},
                              {"step_ms", r.step_ms},
                              {"peak_bytes", r.peak_bytes}, {"parameters", r.parameters},
                              {"edges_per_layer", r.edges}, {"active_rows_per_layer", r.active_rows},
                              {"active_edge_fraction", frac}};
        if (f.breakdown)
          row["breakdown_ms"] = {{"forward", quantile(r.forward_ms, 0.5)},
                                 {"backward", quantile(r.backward_ms, 0.5)},
                                 {"optimizer", quantile(r.optimizer_ms, 0.5)}};
        else  // the host's issue times (the forward's includes its wait for the layers' row counts)
          row["host_issue_ms"] = {{"step", quantile(r.issue_ms, 0.5)},
                                  {"forward", quantile(r.forward_ms, 0.5)},
                                  {"backward", quantile(r.backward_ms, 0.5)}};
        if (f.profile > 0) {
          nlohmann::json prof = nlohmann::json::array();
          for (const auto& [name, ms] : r.profile_ms) prof.push_back({{"name", name}, {"ms_per_step", ms}});
          row["profile"] = {{"busy_ms_per_step", r.busy_ms_per_step}, {"by_name", prof}};
          profiles += fmt::format("\n{} depth {}: {} {:.2f} ms per step (wall {:.2f} ms); largest:\n", label, d,
                                  dev.is_cuda() ? "device busy" : "operators (inclusive)", r.busy_ms_per_step, med);
          for (size_t i = 0; i < std::min<size_t>(r.profile_ms.size(), 14); ++i)
            profiles += fmt::format("  {:8.3f}  {}\n", r.profile_ms[i].second, r.profile_ms[i].first.substr(0, 150));
        }
        if (dev.is_cuda())
          row["peak_held_by_bytes"] = {{"graph_and_inputs", r.graph_bytes},
                                       {"model_state_and_caches", r.model_state_bytes},
                                       {"saved_by_forward", r.forward_saved_bytes},
                                       {"backward_and_optimizer", r.backward_transient_bytes}};
        doc["rows"].push_back(row);
        const auto mib = [](int64_t b) { return double(b) / (1 << 20); };
        memory += fmt::format("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} |\n", label, d, mib(r.peak_bytes),
                              mib(r.graph_bytes), mib(r.model_state_bytes), mib(r.forward_saved_bytes),
                              mib(r.backward_transient_bytes));
      }
    }
  }
  }
  if (dev.is_cuda())
    fmt::print("\nwhat holds the peak (MiB allocated; graph: before the model exists; model state and caches: "
               "parameters, gradients, Adam and what the earlier steps left allocated (CSR caches, GEMM workspace); "
               "saved: left by the forward for the backward; transients: the rest of the peak)\n"
               "| model | depth | peak | graph and inputs | model state and caches | saved by the forward | "
               "backward and optimizer transients |\n|---|---:|---:|---:|---:|---:|---:|\n{}",
               memory);
  if (!profiles.empty()) fmt::print("\nprofile (Kineto, {} steps){}", f.profile, profiles);
  if (f.kernels) {
    const MessageGraph mg = message_graph(gt);
    const nlohmann::json k = bench_kernels(mg, fl, gt.num_features, g.num_classes);
    doc["kernels"] = k;
    fmt::print("\nkernels (hidden {}): copy bandwidth {:.0f} GB/s, matmul {:.1f} TFLOP/s\n", f.hidden,
               k["copy_bandwidth_GBps"].get<double>(), k["matmul_TFLOPs"].get<double>());
    fmt::print("| kernel | ms | GB/s (compulsory bytes) | GB/s (gathered bytes) | % of copy bandwidth (SpMM: gathered bytes) |\n|---|---:|---:|---:|---:|\n");
    const double bw = k["copy_bandwidth_GBps"].get<double>();
    const double minb = k["spmm_min_bytes"].get<double>(), gath = k["spmm_gathered_bytes"].get<double>();
    for (const auto& [name, key] : std::vector<std::pair<std::string, std::string>>{
             {"SpMM forward, all rows", "spmm_forward_ms"}, {"SpMM backward (transpose), all rows", "spmm_backward_ms"}}) {
      const double ms = k[key].get<double>();
      fmt::print("| {} | {:.3f} | {:.0f} | {:.0f} | {:.0f}% |\n", name, ms, minb / ms / 1e6, gath / ms / 1e6,
                 100.0 * gath / ms / 1e6 / bw);
    }
    fmt::print("| SpMM forward, 5% of rows | {:.3f} | | | |\n", k["spmm_forward_5pct_rows_ms"].get<double>());
    for (const auto& [name, key] : std::vector<std::pair<std::string, std::string>>{
             {fmt::format("dropout, input [{}, {}]", mg.num_dst, gt.num_features), "dropout_input"},
             {fmt::format("dropout, [{}, {}], 5% of rows flagged", mg.num_dst, f.hidden), "dropout_5pct_rows"},
             {"its gradient (unflagged rows zeroed)", "dropout_5pct_rows_gradient"}}) {
      const double ms = k[key + "_ms"].get<double>(), bytes = k[key + "_bytes"].get<double>();
      fmt::print("| {} | {:.3f} | {:.0f} | | {:.0f}% |\n", name, ms, bytes / ms / 1e6,
                 100.0 * bytes / ms / 1e6 / bw);
    }
    fmt::print("\nGCN training-step floors: | depth | bytes floor ms | FLOP floor ms |\n");
    for (const auto& fl2 : k["gcn_step_floors"])
      fmt::print("| {} | {:.3f} | {:.3f} |\n", fl2["depth"].get<int64_t>(), fl2["bytes_floor_ms"].get<double>(),
                 fl2["flops_floor_ms"].get<double>());
  }
  if (!f.json.empty()) write_file_atomic(f.json, doc.dump(1) + "\n");
  return 0;
}

void add_bench_commands(CLI::App& app, std::function<int()>& run) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Training-step time, peak memory and edges per layer of models on one graph (table + JSON)");
  cmd->add_option("--dataset", f->dataset, "Graph: a dataset name, a file, or csbm:<preset>")->capture_default_str();
  cmd->add_option("--data-dir", f->data_dir, "Folder holding the datasets (default: $ADGNN_DATA)");
  cmd->add_option("--backbones", f->backbones, "Backbones (gcn gat sage mixhop gatv2 dirgnn)")->delimiter(',')->capture_default_str();
  cmd->add_option("--variants", f->variants, "Variants (plain ad ad_fast ad_sharp)")->delimiter(',')->capture_default_str();
  cmd->add_option("--depths", f->depths, "Depths (layers)")->delimiter(',')->capture_default_str();
  cmd->add_option("--hidden", f->hidden, "Hidden width")->capture_default_str();
  cmd->add_option("--steps", f->steps, "Timed training steps (median reported)")->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "Untimed steps first")->capture_default_str();
  cmd->add_option("--device", f->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dropout", f->dropout, "Dropout")->capture_default_str();
  cmd->add_option("--lr", f->lr, "Adam learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", f->weight_decay, "Adam weight decay")->capture_default_str();
  cmd->add_option("--lambda", f->lambda, "AD: lambda of tau(t)")->capture_default_str();
  cmd->add_option("--compact", f->compact,
                  "AD: deeper layers read a compact input: auto (CPU only), on, off (fewer passes, more device waits)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--fdelta-precision", f->fdelta_precisions,
                  "AD (learned): f_delta's precision, one row per entry (fp32, tf32, bf16; tf32 and bf16 on CUDA only)")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--precision", f->precisions,
                  "Activations' storage, one row per entry: fp32, bf16 (bfloat16 rows, float32 sums; for GPUs)")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--normalisation", f->normalisation, "AD: depth-benefit normalisation (linear, log, rank)")
      ->check(CLI::IsMember({"linear", "log"}))->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed")->capture_default_str();
  cmd->add_flag("--breakdown", f->breakdown, "Also time forward, backward and optimizer (synchronises between them)");
  cmd->add_flag("--kernels", f->kernels, "Also time the aggregation kernels against the device's bandwidth and matmul rate");
  cmd->add_option("--profile", f->profile, "Profile this many more steps per model (Kineto) and print the largest kernels")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--nodes", f->nodes, "Resize the generated graph (csbm:<preset>) to this many nodes, at the preset's average degree")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--avg-degree", f->avg_degree, "Generated graph: average degree (2 x undirected edges / nodes)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--features", f->features, "Generated graph: feature width")->check(CLI::PositiveNumber);
  cmd->add_flag("--max-graph", f->max_graph,
                "Find the largest generated graph (nodes at the dataset's degree and width) that trains: doubling, then "
                "bisection, one child process per probe (--steps 2 --warmup 1 unless given)");
  auto* limit = cmd->add_option("--memory-limit", "--max-graph: a probe fits only if its peak stays within this (e.g. "
                                "20GiB; CUDA: device memory allocated, CPU: resident memory; required on the CPU)")
                    ->type_name("SIZE");
  cmd->add_option("--resolution", f->resolution, "--max-graph: stop when the failing size is within this share of the fitting one")
      ->capture_default_str();
  cmd->add_option("--max-nodes", f->max_nodes,
                  "--max-graph: probe no more nodes than this (a known upper bound saves the probes of larger graphs)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", f->json, "Write the results as JSON (atomically)");
  cmd->callback([f, cmd, limit, &run] {
    if (limit->count()) f->memory_limit = parse_byte_size(limit->as<std::string>(), "--memory-limit");
    if (f->max_graph) {  // a probe needs the peak, not a steady timing
      if (!cmd->count("--steps")) f->steps = 2;
      if (!cmd->count("--warmup")) f->warmup = 1;
    }
    run = [f] { return f->max_graph ? run_max_graph(*f) : run_bench(*f); };
  });
}

}  // namespace adgnn::cli
