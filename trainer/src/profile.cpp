#include "adgnn/profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "adgnn/loaders.h"

namespace adgnn {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

namespace {

// libkineto::ActivityType values (kineto/ActivityType.h) of the events summarised here.
constexpr uint8_t kCpuOp = 0, kUserAnnotation = 1, kGpuMemcpy = 3, kGpuMemset = 4, kKernel = 5,
                  kCudaRuntime = 7, kCudaDriver = 8;

struct Total {
  double ns = 0;
  int64_t calls = 0;
};
using Totals = std::map<std::string, Total>;

std::string cell(std::string s) {  // one Markdown table cell: no pipes, bounded length
  std::replace(s.begin(), s.end(), '|', '/');
  if (s.size() > 110) s = s.substr(0, 107) + "...";
  return s;
}

std::vector<std::pair<std::string, Total>> largest_first(const Totals& m) {
  std::vector<std::pair<std::string, Total>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  return v;
}

}  // namespace

struct StepProfiler::Stats {
  Totals scopes, ops, runtime, device;
  double wall_ms = 0, busy_ms = 0;
  int64_t steps = 0;
  std::unique_ptr<prof::ProfilerResult> last;
};

StepProfiler::StepProfiler(bool cuda) : cuda_(cuda), stats_(std::make_unique<Stats>()) {}

StepProfiler::~StepProfiler() {
  if (!active_) return;
  try {
    prof::disableProfiler();
  } catch (...) {  // never throw from a destructor; the step is failing already
  }
}

void StepProfiler::begin() {
  if (active_) return;
  if (cuda_) torch::cuda::synchronize();  // earlier work must not land in this step's kernels
  std::set<impl::ActivityType> acts{impl::ActivityType::CPU};
  if (cuda_) acts.insert(impl::ActivityType::CUDA);
  // Input shapes recorded: the kept trace then tells same-named operations apart
  // (scripts/trace_by_op.py --shapes); the device's times are unaffected.
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO, /*report_input_shapes=*/true);
  prof::prepareProfiler(config, acts);  // Kineto's trace must be set up before it starts
  prof::enableProfiler(config, acts);
  active_ = true;
}

void StepProfiler::end(double step_ms) {
  if (!active_) return;
  active_ = false;
  Stats& s = *stats_;
  s.last = prof::disableProfiler();
  s.steps += 1;
  s.wall_ms += step_ms;
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // device intervals, for the busy time
  for (const prof::KinetoEvent& e : s.last->events()) {
    const uint8_t type = e.activityType();
    Total* t = nullptr;
    if (type == kKernel || type == kGpuMemcpy || type == kGpuMemset) {
      t = &s.device[e.name()];
      spans.emplace_back(e.startNs(), e.endNs());
    } else if (type == kCudaRuntime || type == kCudaDriver) {
      t = &s.runtime[e.name()];
    } else if (type == kUserAnnotation || (type == kCpuOp && e.scope() == uint8_t(at::RecordScope::USER_SCOPE))) {
      t = &s.scopes[e.name()];
    } else if (type == kCpuOp) {
      t = &s.ops[e.name()];
    }
    if (t) {
      t->ns += double(e.durationNs());
      t->calls += 1;
    }
  }
  // Busy = the union of the device intervals (kernels on several streams may overlap).
  std::sort(spans.begin(), spans.end());
  uint64_t busy = 0, b0 = 0, e0 = 0;
  for (const auto& [b, e] : spans) {
    if (b > e0) {
      busy += e0 - b0;
      b0 = b;
      e0 = e;
    } else {
      e0 = std::max(e0, e);
    }
  }
  busy += e0 - b0;
  s.busy_ms += double(busy) * 1e-6;
}

int64_t StepProfiler::steps() const { return stats_->steps; }

double StepProfiler::busy_ms_per_step() const {
  return stats_->steps > 0 ? stats_->busy_ms / double(stats_->steps) : 0.0;
}

std::vector<std::pair<std::string, double>> StepProfiler::largest_ms_per_step() const {
  std::vector<std::pair<std::string, double>> out;
  const double k = double(std::max<int64_t>(1, stats_->steps));
  for (const auto& [name, t] : largest_first(cuda_ ? stats_->device : stats_->ops))
    out.emplace_back(name, t.ns * 1e-6 / k);
  return out;
}

std::string StepProfiler::markdown(const std::string& title, const std::string& header) const {
  const Stats& s = *stats_;
  const double k = double(std::max<int64_t>(1, s.steps));
  const double wall = s.wall_ms / k, busy = s.busy_ms / k;
  std::string md = fmt::format("# {}\n\n{}\n\n", title, header);
  md += fmt::format("Profiled steps: {}. Per step: {:.2f} ms wall (with the profiler's own overhead on the host){}\n",
                    s.steps, wall,
                    cuda_ ? fmt::format(", device busy {:.2f} ms ({:.0f}% of wall; the union of kernel and "
                                        "copy intervals)",
                                        busy, wall > 0 ? 100.0 * busy / wall : 0.0)
                          : "");
  auto table = [&](const Totals& m, const std::string& what, const std::string& col, size_t top, double of) {
    if (m.empty()) return;
    const auto v = largest_first(m);
    md += fmt::format("\n## {}\n\n| {} | calls per step | ms per step | % |\n|---|---:|---:|---:|\n", what, col);
    double rest = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double ms = v[i].second.ns * 1e-6 / k;
      if (i >= top) {
        rest += ms;
        continue;
      }
      md += fmt::format("| {} | {:.1f} | {:.3f} | {:.1f} |\n", cell(v[i].first), double(v[i].second.calls) / k, ms,
                        of > 0 ? 100.0 * ms / of : 0.0);
    }
    if (v.size() > top) md += fmt::format("| ({} more) | | {:.3f} | |\n", v.size() - top, rest);
  };
  table(s.scopes, "Scopes (host time, inclusive: nested scopes count in their parents too; % of wall)", "scope", 60,
        wall);
  if (cuda_) table(s.device, "Device kernels and copies (device time; % of busy)", "kernel", 40, busy);
  table(s.runtime, "CUDA runtime and driver calls (host time; synchronising calls wait here; % of wall)", "call", 15,
        wall);
  table(s.ops, "Host ops (inclusive: an op's time includes the ops it calls; % of wall)", "op", 40, wall);
  return md;
}

void StepProfiler::save_last_trace(const std::string& path) const {
  if (!stats_->last) return;
  const std::string tmp = path + ".tmp";
  stats_->last->save(tmp);
  commit_file(tmp, path);
}

}  // namespace adgnn
