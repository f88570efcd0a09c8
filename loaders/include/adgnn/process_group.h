// adgnn/process_group: the few collectives that loaders' multi-process work (the generator and
// the shared graph-file writer) needs from the processes sharing it. The launcher wraps its
// Communicator in one (loaders link no communicator, as the model reaches other ranks through
// RankTransport); one process is LocalProcessGroup, so every path is the same for P = 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace adgnn {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // `send` holds what goes to process 0, then to process 1, ...: counts[p] values for process p.
  // Returns what every process sent here, concatenated in rank order.
  virtual std::vector<uint64_t> all_to_all(const std::vector<uint64_t>& send,
                                           const std::vector<int64_t>& counts) = 0;
  // Elementwise sum over the processes, in place (the same length everywhere).
  virtual void sum(std::vector<int64_t>& values) = 0;
  // Every process passes its error message, empty for none. Returns "" when no process failed,
  // else the lowest-ranked failure's message naming its process, the same on every process.
  virtual std::string first_error(const std::string& local_error) = 0;
};

// One process: all_to_all hands `send` back, sums are the values themselves.
class LocalProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<uint64_t> all_to_all(const std::vector<uint64_t>& send,
                                   const std::vector<int64_t>&) override {
    return send;
  }
  void sum(std::vector<int64_t>&) override {}
  std::string first_error(const std::string& local_error) override { return local_error; }
};

}  // namespace adgnn
