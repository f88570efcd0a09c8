// A ProcessGroup (what the loaders' multi-process work needs) over a host-memory Communicator.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "adgnn/comm.h"
#include "adgnn/first_error.h"
#include "adgnn/process_group.h"

namespace adgnn {

class CommProcessGroup final : public ProcessGroup {
 public:
  explicit CommProcessGroup(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  std::vector<uint64_t> all_to_all(const std::vector<uint64_t>& send,
                                   const std::vector<int64_t>& counts) override {
    const size_t P = static_cast<size_t>(comm_.size());
    std::vector<int64_t> recv_counts(P);
    const std::vector<int64_t> ones(P, 1);
    comm_.exchange(counts.data(), ones, recv_counts.data(), ones, sizeof(int64_t));
    std::vector<uint64_t> got(
        static_cast<size_t>(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})));
    comm_.exchange(send.data(), counts, got.data(), recv_counts, sizeof(uint64_t));
    return got;
  }
  void sum(std::vector<int64_t>& values) override {
    if (!values.empty())
      comm_.allreduce(values.data(), static_cast<int64_t>(values.size()), DType::I64, ReduceOp::Sum);
  }
  std::string first_error(const std::string& local_error) override {
    return adgnn::first_error(comm_, local_error);
  }

 private:
  Communicator& comm_;
};

}  // namespace adgnn
