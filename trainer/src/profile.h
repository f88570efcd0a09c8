// Step profiler of the training loop (`adgnn train --profile DIR`): PyTorch's Kineto profiler
// (CUPTI on CUDA) over the last few training steps of a run, summarised per rank into a Markdown
// table (where the step's time goes: our named scopes, device kernels, host ops and CUDA runtime
// calls) beside a Chrome trace of the last profiled step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace adgnn::detail {

class StepProfiler {
 public:
  // dir: output folder (created); stem: file-name stem (model-variant); header: one line of what
  // ran; steps: how many training steps (the last ones of `epochs`) are profiled.
  StepProfiler(std::string dir, std::string stem, std::string header, int rank, int ranks, bool cuda,
               int64_t steps, int64_t epochs);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  bool profiles(int64_t epoch) const { return epoch > epochs_ - steps_; }
  void begin(int64_t epoch);                       // before the step's forward
  void end(int64_t epoch, double step_ms);         // after the step (device synchronised)
  // Writes <dir>/<stem>-rank<r>.md (and .trace.json); returns the summary's path ("" if no step
  // was profiled). Called once the run ends (early stopping may end it before the last epochs).
  std::string finish();

 private:
  struct Stats;
  std::string dir_, stem_, header_;
  int rank_, ranks_;
  bool cuda_, active_ = false;
  int64_t steps_, epochs_;
  std::unique_ptr<Stats> stats_;
};

}  // namespace adgnn::detail
