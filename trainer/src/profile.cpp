#include "profile.h"

#include "adgnn/loaders.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

namespace adgnn::detail {

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

std::string cell(std::string s) {  // one Markdown table cell: no pipes, bounded length
  std::replace(s.begin(), s.end(), '|', '/');
  if (s.size() > 110) s = s.substr(0, 107) + "...";
  return s;
}

std::string host_name() {
  char h[256] = {0};
  ::gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

struct StepProfiler::Stats {
  std::map<std::string, Total> scopes, ops, runtime, device;
  std::vector<double> wall_ms, busy_ms;
  int64_t first = 0, last = 0;
};

StepProfiler::StepProfiler(std::string dir, std::string stem, std::string header, int rank, int ranks,
                           bool cuda, int64_t steps, int64_t epochs)
    : dir_(std::move(dir)), stem_(std::move(stem)), header_(std::move(header)), rank_(rank), ranks_(ranks),
      cuda_(cuda), steps_(std::max<int64_t>(1, steps)), epochs_(epochs), stats_(std::make_unique<Stats>()) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw InputError("--profile " + dir_ + ": cannot create the folder (" + ec.message() + ")");
}

StepProfiler::~StepProfiler() {
  if (active_) {
    try {
      prof::disableProfiler();
    } catch (...) {  // never throw from a destructor; the run is failing already
    }
  }
}

void StepProfiler::begin(int64_t epoch) {
  if (!profiles(epoch) || active_) return;
  if (cuda_) torch::cuda::synchronize();  // earlier work must not land in this step's kernels
  std::set<impl::ActivityType> acts{impl::ActivityType::CPU};
  if (cuda_) acts.insert(impl::ActivityType::CUDA);
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  prof::prepareProfiler(config, acts);  // Kineto's trace must be set up before it starts
  prof::enableProfiler(config, acts);
  active_ = true;
  if (stats_->first == 0) stats_->first = epoch;
}

void StepProfiler::end(int64_t epoch, double step_ms) {
  if (!active_) return;
  active_ = false;
  std::unique_ptr<prof::ProfilerResult> r = prof::disableProfiler();
  Stats& s = *stats_;
  s.last = epoch;
  s.wall_ms.push_back(step_ms);
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // device intervals, for the busy time
  for (const prof::KinetoEvent& e : r->events()) {
    const uint8_t type = e.activityType();
    const double ns = double(e.durationNs());
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
      t->ns += ns;
      t->calls += 1;
    }
  }
  // Busy = the union of the device intervals (kernels on several streams may overlap).
  std::sort(spans.begin(), spans.end());
  uint64_t busy = 0, cur_b = 0, cur_e = 0;
  for (const auto& [b, e] : spans) {
    if (b > cur_e) {
      busy += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  busy += cur_e - cur_b;
  s.busy_ms.push_back(double(busy) * 1e-6);
  if (s.wall_ms.size() == size_t(steps_) || epoch == epochs_) {
    // The trace of the last profiled step (Chrome's about:tracing or Perfetto open it).
    const std::string trace = fmt::format("{}/{}-rank{}.trace.json", dir_, stem_, rank_);
    r->save(trace + ".tmp");
    std::filesystem::rename(trace + ".tmp", trace);
  }
}

std::string StepProfiler::finish() {
  Stats& s = *stats_;
  if (s.wall_ms.empty()) return "";
  const double k = double(s.wall_ms.size());
  auto mean = [](const std::vector<double>& v) {
    double a = 0;
    for (double x : v) a += x;
    return v.empty() ? 0.0 : a / double(v.size());
  };
  const double wall = mean(s.wall_ms), busy = mean(s.busy_ms);
  std::string md = fmt::format("# Step profile: {} (rank {} of {}, host {})\n\n{}\n\n", stem_, rank_, ranks_,
                               host_name(), header_);
  md += fmt::format(
      "Profiled training steps: {} (epochs {}-{}). Per step: {:.2f} ms wall (with the profiler's own "
      "overhead on the host){}\n",
      s.wall_ms.size(), s.first, s.last, wall,
      cuda_ ? fmt::format(", device busy {:.2f} ms ({:.0f}% of wall; the union of kernel and copy intervals)",
                          busy, wall > 0 ? 100.0 * busy / wall : 0.0)
            : "");
  auto table = [&](const std::map<std::string, Total>& m, const std::string& title, const std::string& what,
                   size_t top, double pct_of) {
    if (m.empty()) return;
    std::vector<std::pair<std::string, Total>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    md += fmt::format("\n## {}\n\n| {} | calls per step | ms per step |{}\n|---|---:|---:|{}\n", title, what,
                      pct_of > 0 ? " % |" : "", pct_of > 0 ? "---:|" : "");
    for (size_t i = 0; i < std::min(top, v.size()); ++i) {
      const double ms = v[i].second.ns * 1e-6 / k;
      md += fmt::format("| {} | {:.1f} | {:.3f} |{}\n", cell(v[i].first), double(v[i].second.calls) / k, ms,
                        pct_of > 0 ? fmt::format(" {:.1f} |", 100.0 * ms / pct_of) : "");
    }
    if (v.size() > top) md += fmt::format("| ({} more, {:.3f} ms in all) | | |{}\n", v.size() - top, [&] {
      double rest = 0;
      for (size_t i = top; i < v.size(); ++i) rest += v[i].second.ns;
      return rest * 1e-6 / k;
    }(), pct_of > 0 ? " |" : "");
  };
  table(s.scopes, "Scopes (host time, inclusive: nested scopes count in their parents too)", "scope", 60, wall);
  if (cuda_) table(s.device, "Device kernels and copies (device time)", "kernel", 40, busy);
  table(s.runtime, "CUDA runtime and driver calls (host time; synchronising calls wait here)", "call", 15, wall);
  table(s.ops, "Host ops (inclusive: an op's time includes the ops it calls)", "op", 40, wall);
  const std::string path = fmt::format("{}/{}-rank{}.md", dir_, stem_, rank_);
  write_file_atomic(path, md);
  return path;
}

}  // namespace adgnn::detail
