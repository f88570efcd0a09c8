// The rank transport of the distributed forward pass over comm/'s Communicator, and the parts of
// a run's graph.
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

#include <vector>

#include "adgnn/trainer.h"

namespace adgnn {

namespace {

DType comm_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return DType::F32;
    case torch::kFloat64: return DType::F64;
    case torch::kInt64: return DType::I64;
    default: TORCH_CHECK(false, "allreduce: unsupported tensor type ", t.scalar_type());
  }
}

class CommTransport : public RankTransport {
 public:
  CommTransport(Communicator& comm, bool device_memory) : comm_(comm), device_memory_(device_memory) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }

  void allreduce(at::Tensor& t, Op op) override {
    at::Tensor buf = staged(t).contiguous();
    const ReduceOp r = op == Op::Sum ? ReduceOp::Sum : op == Op::Min ? ReduceOp::Min : ReduceOp::Max;
    const OnCurrentStream on(comm_, buf);
    comm_.allreduce(buf.data_ptr(), buf.numel(), comm_dtype(buf), r);
    if (!buf.is_same(t)) t.copy_(buf);
  }

  at::Tensor exchange(const at::Tensor& send, const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& recv_counts) override {
    TORCH_CHECK(send.dim() == 2, "exchange: rows must be [rows, width]");
    const at::Tensor s = staged(send).contiguous();
    int64_t rows = 0;
    for (auto c : recv_counts) rows += c;
    at::Tensor recv = torch::empty({rows, send.size(1)}, s.options());
    const OnCurrentStream on(comm_, s);
    comm_.exchange(s.data_ptr(), send_counts, recv.data_ptr(), recv_counts,
                   send.size(1) * int64_t(send.element_size()));
    return recv.to(send.device());
  }

 private:
  // A device-memory communicator ordered against the stream the caller issues from (the default
  // stream, or the second one of a rank's halo plan) for one operation; the trainer's own
  // calls keep the default.
  class OnCurrentStream {
   public:
    OnCurrentStream(Communicator& comm, const at::Tensor& t) : comm_(comm), set_(t.is_cuda()) {
      if (set_) comm_.set_compute_stream(c10::impl::VirtualGuardImpl(t.device().type()).getStream(t.device()).native_handle());
    }
    ~OnCurrentStream() {
      if (set_) comm_.set_compute_stream(nullptr);
    }
    OnCurrentStream(const OnCurrentStream&) = delete;
    OnCurrentStream& operator=(const OnCurrentStream&) = delete;

   private:
    Communicator& comm_;
    bool set_;
  };
  // The memory the communicator takes: CUDA for NCCL (on the tensor's device when it has one),
  // host memory for MPI.
  at::Tensor staged(const at::Tensor& t) const {
    if (device_memory_) return t.is_cuda() ? t : t.to(torch::Device(torch::kCUDA, c10::DeviceIndex(-1)));
    return t.is_cpu() ? t : t.to(torch::kCPU);
  }
  Communicator& comm_;
  bool device_memory_;
};

}  // namespace

void host_allreduce(Communicator& comm, void* data, int64_t count, DType dt, ReduceOp op) {
  if (!comm.device_memory()) return comm.allreduce(data, count, dt, op);
  const auto type = dt == DType::F32 ? torch::kFloat32 : dt == DType::F64 ? torch::kFloat64 : torch::kInt64;
  at::Tensor host = torch::from_blob(data, {count}, type);
  at::Tensor dev = host.to(torch::kCUDA);
  comm.allreduce(dev.data_ptr(), count, dt, op);
  host.copy_(dev);
  comm.synchronize();  // deferred mode: a failed reduction throws here, not later
}

void host_broadcast(Communicator& comm, void* data, int64_t bytes, int root) {
  if (!comm.device_memory()) return comm.broadcast(data, bytes, root);
  at::Tensor host = torch::from_blob(data, {bytes}, torch::kUInt8);
  at::Tensor dev = host.to(torch::kCUDA);
  comm.broadcast(dev.data_ptr(), bytes, root);
  host.copy_(dev);
  comm.synchronize();
}

std::shared_ptr<RankTransport> make_rank_transport(Communicator& comm, bool device_memory) {
  return std::make_shared<CommTransport>(comm, device_memory);
}

GraphPart rank_part(const Graph& g, const TrainConfig& cfg, Communicator* comm) {
  const int P = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  if (!cfg.partition_dir.empty()) return read_part(cfg.partition_dir, rank, P, graph_fingerprint(g));
  if (P == 1) {
    Partition whole = partition_stats(g, 1, std::vector<int32_t>(size_t(g.num_nodes), 0));
    return build_part(g, whole, 0);
  }
  // Rank 0 partitions (METIS may differ between builds, so one answer is broadcast); a failure
  // there must not leave the others waiting in the broadcast, so its message travels too.
  std::vector<int32_t> owner(size_t(g.num_nodes), 0);
  int64_t failed = 0;
  std::string why;
  if (rank == 0) {
    try {
      owner = partition_graph(g, P, cfg.partition, nullptr).owner;
    } catch (const InputError& e) {
      failed = 1;
      why = e.what();
    }
  }
  host_broadcast(*comm, &failed, sizeof failed, 0);
  if (failed) {
    int64_t len = int64_t(why.size());
    host_broadcast(*comm, &len, sizeof len, 0);
    why.resize(size_t(len));
    host_broadcast(*comm, why.data(), len, 0);
    throw InputError(why);
  }
  host_broadcast(*comm, owner.data(), int64_t(owner.size() * sizeof(int32_t)), 0);
  return build_part(g, partition_stats(g, P, std::move(owner)), rank);
}

}  // namespace adgnn
