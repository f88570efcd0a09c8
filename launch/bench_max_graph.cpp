// `adgnn bench --max-graph`: the largest generated graph that trains on this device, found by
// doubling the node count until a probe fails and bisecting between the last size that trained
// and the first that did not. The graph keeps the preset's shape (average degree, feature width,
// classes) at every size. Each probe is a child `adgnn bench` of a few training steps: running out
// of memory there (exit 3, or the kernel's out-of-memory killer) ends the child, not the search,
// and leaves the device's allocator as fresh for the next probe as for a real run.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "adgnn/loaders.h"
#include "adgnn/model.h"
#include "bench.h"
#include "child_process.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace adgnn::cli {

namespace {

// Exit status of `adgnn` when the host or the device ran out of memory (launch/main.cpp).
constexpr int kOutOfMemoryExit = 3;

struct Probe {
  int64_t nodes = 0, undirected_edges = 0, peak_bytes = 0;
  bool fits = false;
  std::string result;
  double step_ms = 0;
};

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string number(double v) { return fmt::format("{}", v); }

// The undirected edges of a generated graph of these parameters (the generator draws exactly
// this many).
int64_t nominal_edges(const CsbmParams& p) {
  return p.undirected_edges >= 0 ? p.undirected_edges : std::llround(p.avg_degree * double(p.nodes) / 2);
}

Probe run_probe(const BenchFlags& f, const std::string& backbone, const std::string& variant, int64_t depth,
                const std::string& act_precision, const std::string& precision, int64_t nodes) {
  // The child's JSON in $TMPDIR (else /tmp), removed on every way out of this probe, a SIGINT or
  // SIGTERM included.
  std::string pattern;
  close(temporary_file("--max-graph", "adgnn-probe-", pattern));
  const TemporaryOutput output(pattern);
  const std::string& json = output.path();
  std::vector<std::string> argv = {self_executable(), "bench", "--dataset", f.dataset, "--nodes", std::to_string(nodes)};
  if (f.avg_degree > 0) argv.insert(argv.end(), {"--avg-degree", number(f.avg_degree)});
  if (f.features > 0) argv.insert(argv.end(), {"--features", std::to_string(f.features)});
  argv.insert(argv.end(), {"--backbones", backbone, "--variants", variant, "--depths", std::to_string(depth),
                           "--precision", act_precision, "--fdelta-precision", precision,
                           "--hidden", std::to_string(f.hidden),
                           "--steps", std::to_string(f.steps), "--warmup", std::to_string(f.warmup),
                           "--device", f.device, "--dropout", number(f.dropout), "--lr", number(f.lr),
                           "--weight-decay", number(f.weight_decay), "--lambda", number(f.lambda),
                           "--normalisation", f.normalisation, "--compact", f.compact,
                           "--seed", std::to_string(f.seed), "--json", json});
  const ChildResult r = run_child(argv);
  const bool cuda = f.device.rfind("cuda", 0) == 0;  // the peak: the child's device memory, else its resident memory
  BenchFlags sized = f;
  sized.nodes = nodes;
  Probe p;
  p.nodes = nodes;
  p.undirected_edges = nominal_edges(bench_graph_params(sized));
  if (r.exit_code == 0) {
    const nlohmann::json doc = nlohmann::json::parse(read_file(json));
    const auto& row = doc.at("rows").at(0);
    p.undirected_edges = doc.at("graph").at("edges").get<int64_t>() / 2;
    p.step_ms = row.at("step_ms_median").get<double>();
    p.peak_bytes = cuda ? row.at("peak_bytes").get<int64_t>() : r.peak_rss_bytes;
    p.fits = f.memory_limit == 0 || p.peak_bytes <= f.memory_limit;
    p.result = p.fits ? "trains" : "over --memory-limit";
    return p;
  }
  if (r.exit_code == kOutOfMemoryExit) {
    p.result = "out of memory";
  } else if (r.signal == SIGKILL) {
    p.result = "killed (host memory exhausted)";
  } else if (r.exit_code == 2) {  // bad input: the child's one line names the flag
    std::string msg = last_line(r.stderr_tail);
    if (const auto at = msg.find("error: "); at != std::string::npos) msg = msg.substr(at + 7);
    throw InputError(msg);
  } else {
    throw std::runtime_error(fmt::format("--max-graph: the probe at {} nodes failed ({}): {}", nodes,
                                         r.signal ? fmt::format("signal {}", r.signal)
                                                  : fmt::format("exit {}", r.exit_code),
                                         last_line(r.stderr_tail)));
  }
  p.peak_bytes = cuda ? 0 : r.peak_rss_bytes;
  return p;
}

double mib(int64_t b) { return double(b) / (1 << 20); }

}  // namespace

int run_max_graph(const BenchFlags& f) {
  if (f.dataset.rfind("csbm:", 0) != 0)
    throw InputError("--max-graph: searches generated graphs; --dataset must be csbm:<preset> (got " + f.dataset + ")");
  if (f.kernels || f.profile > 0) throw InputError("--max-graph: times no kernels and profiles nothing (drop --kernels / --profile)");
  if (!(f.resolution > 0 && f.resolution < 1)) throw InputError("--resolution " + number(f.resolution) + ": must be in (0, 1)");
  check_precisions(f);
  const bool cuda = f.device.rfind("cuda", 0) == 0;
  if (!cuda && f.memory_limit == 0)
    throw InputError("--max-graph on the CPU: give --memory-limit (a probe fits when its peak resident memory stays below it)");
  const CsbmParams shape = bench_graph_params(f);  // checks the dataset name
  const int64_t min_nodes = std::max<int64_t>(64, 2 * shape.classes);
  const int64_t max_nodes = f.max_nodes ? std::min<int64_t>(f.max_nodes, INT32_MAX) : INT32_MAX;
  if (max_nodes < min_nodes)
    throw InputError(fmt::format("--max-nodes {}: below the smallest probe ({} nodes)", f.max_nodes, min_nodes));
  const double degree = 2.0 * double(nominal_edges(shape)) / double(shape.nodes);

  fmt::print("largest graph that trains: csbm:{} shape (average degree {:.1f}, {} features, {} classes), hidden {}, "
             "{} step(s) after {} warm-up, device {}; a probe fits when its steps run{}; search to {:.0f}%\n\n",
             csbm_params_of(f.dataset).name, degree, shape.features, shape.classes, f.hidden, f.steps, f.warmup,
             f.device,
             f.memory_limit ? fmt::format(" and its peak ({}) stays within {:.0f} MiB",
                                          cuda ? "device memory allocated" : "resident memory", mib(f.memory_limit))
                            : " (out of memory: it does not)",
             100 * f.resolution);
  fmt::print("| model | depth | nodes | undirected edges | result | peak MiB | step ms |\n");
  fmt::print("|---|---:|---:|---:|---|---:|---:|\n");
  std::fflush(stdout);

  nlohmann::json doc;
  doc["device"] = f.device;
  doc["shape"] = {{"dataset", f.dataset}, {"average_degree", degree}, {"features", shape.features},
                  {"classes", shape.classes}, {"hidden", f.hidden}};
  doc["memory_limit_bytes"] = f.memory_limit;
  doc["resolution"] = f.resolution;
  doc["max_nodes"] = max_nodes;
  doc["searches"] = nlohmann::json::array();
  std::string summary;
  for (int64_t d : f.depths) {
    for (const auto& b : f.backbones) {
      for (const auto& v : f.variants) {
        for (const auto& act : f.precisions)
        for (const auto& prec : v == "ad" ? f.fdelta_precisions : std::vector<std::string>{"fp32"}) {
          const std::string label = bench_label(b, v, act, prec);
          Probe best, failed;
          nlohmann::json probes = nlohmann::json::array();
          int64_t n = std::clamp<int64_t>(shape.nodes, min_nodes, max_nodes);
          for (;;) {
            const Probe p = run_probe(f, b, v, d, act, prec, n);
            fmt::print("| {} | {} | {} | {} | {} | {} | {} |\n", label, d, p.nodes, p.undirected_edges, p.result,
                       p.peak_bytes ? fmt::format("{:.0f}", mib(p.peak_bytes)) : "", p.fits || p.step_ms > 0 ? fmt::format("{:.1f}", p.step_ms) : "");
            std::fflush(stdout);
            probes.push_back({{"nodes", p.nodes}, {"undirected_edges", p.undirected_edges}, {"result", p.result},
                              {"fits", p.fits}, {"peak_bytes", p.peak_bytes}, {"step_ms", p.step_ms}});
            (p.fits ? best : failed) = p;
            if (best.nodes == 0) {  // nothing fits yet: halve
              if (n == min_nodes) break;
              n = std::max(min_nodes, n / 2);
            } else if (failed.nodes == 0) {  // nothing failed yet: double, up to the largest size
              if (n == max_nodes) break;
              n = std::min<int64_t>(max_nodes, 2 * n);
            } else {
              if (double(failed.nodes - best.nodes) <= std::max(1.0, f.resolution * double(best.nodes))) break;
              n = best.nodes + (failed.nodes - best.nodes) / 2;
            }
          }
          std::string line;
          if (best.nodes == 0)
            line = fmt::format("{} depth {}: does not train even at {} nodes", label, d, min_nodes);
          else
            line = fmt::format("{} depth {}: the largest graph that trains has {} nodes and {} undirected edges "
                               "(peak {:.0f} MiB){}",
                               label, d, best.nodes, best.undirected_edges, mib(best.peak_bytes),
                               failed.nodes ? fmt::format("; {} nodes: {}", failed.nodes, failed.result)
                               : f.max_nodes && max_nodes == f.max_nodes ? std::string("; --max-nodes is the limit")
                                                                          : std::string("; the 32-bit node index is the limit"));
          summary += line + "\n";
          doc["searches"].push_back({{"model", label}, {"backbone", b}, {"variant", v}, {"precision", act},
                                     {"fdelta_precision", prec},
                                     {"depth", d}, {"largest_nodes", best.nodes},
                                     {"largest_undirected_edges", best.undirected_edges},
                                     {"peak_bytes", best.peak_bytes}, {"step_ms", best.step_ms},
                                     {"smallest_failing_nodes", failed.nodes}, {"probes", probes}});
        }
      }
    }
  }
  fmt::print("\n{}", summary);
  if (!f.json.empty()) write_file_atomic(f.json, doc.dump(1) + "\n");
  return 0;
}

}  // namespace adgnn::cli
