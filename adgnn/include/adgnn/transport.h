// adgnn/transport: how the model reaches the other ranks of a distributed run without linking
// comm/ (the trainer implements it over a Communicator).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace adgnn {

// How a rank of a distributed run talks to the others: the distributed trainer implements it over
// comm/'s Communicator. Tensors live on the model's device; every rank calls every operation in
// the same order (also a rank with nothing to send).
class RankTransport {
 public:
  enum class Op { Sum, Min, Max };
  virtual ~RankTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce(at::Tensor& t, Op op) = 0;  // in place; t contiguous
  // Rows of `send` ([sum send_counts, F], packed by peer in rank order) go to the peers; returns
  // the received rows [sum recv_counts, F], packed by peer.
  virtual at::Tensor exchange(const at::Tensor& send, const std::vector<int64_t>& send_counts,
                              const std::vector<int64_t>& recv_counts) = 0;
};

}  // namespace adgnn
