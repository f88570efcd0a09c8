// adgnn/profile: where a training step's time goes. PyTorch's Kineto profiler (CUPTI on CUDA)
// over chosen steps, summed by name: our named scopes (RECORD_USER_SCOPE in the trainer and the
// model), device kernels and copies with the device's busy time, CUDA runtime calls, host ops.
// Used by `adgnn train --profile` (a Markdown summary per rank) and `adgnn bench --profile`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace adgnn {

class StepProfiler {
 public:
  explicit StepProfiler(bool cuda);
  ~StepProfiler();  // stops a step left running (an exception mid-step)
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void begin();                    // before a step (synchronises the device first)
  void end(double step_ms);        // after it, device synchronised; step_ms: its wall time
  int64_t steps() const;           // steps recorded
  double busy_ms_per_step() const; // union of kernel and copy intervals (0 on the CPU)
  // Device kernels and copies (CUDA) or host ops (CPU, inclusive), ms per step, largest first.
  std::vector<std::pair<std::string, double>> largest_ms_per_step() const;
  // Markdown: title line, `header` paragraph, per-step wall and busy time, then the tables.
  std::string markdown(const std::string& title, const std::string& header) const;
  // The last step's Chrome trace (about:tracing, Perfetto), written atomically.
  void save_last_trace(const std::string& path) const;

 private:
  struct Stats;
  bool cuda_, active_ = false;
  std::unique_ptr<Stats> stats_;
};

}  // namespace adgnn
