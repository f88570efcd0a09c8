#include "adgnn/first_error.h"

#include <cstdint>
#include <vector>

namespace adgnn {

std::string first_error(Communicator& comm, const std::string& local_error) {
  if (comm.device_memory())
    throw CommError(comm.rank(), comm.host(), "first_error: needs a host-memory communicator");
  // The lowest failing rank, as the largest of (size - rank).
  int64_t mark = local_error.empty() ? 0 : comm.size() - comm.rank();
  comm.allreduce(&mark, 1, DType::I64, ReduceOp::Max);
  if (mark == 0) return "";
  const int root = comm.size() - static_cast<int>(mark);
  std::string msg = comm.rank() == root ? local_error + " (rank " + std::to_string(root) + " on host " +
                                              comm.host() + ")"
                                        : std::string();
  int64_t len = static_cast<int64_t>(msg.size());
  comm.broadcast(&len, sizeof len, root);
  msg.resize(static_cast<size_t>(len));
  comm.broadcast(msg.data(), len, root);
  return msg;
}

}  // namespace adgnn
