// The NCCL backend: the conformance suite on device buffers, and what only the NCCL backend does
// (the bootstrap's rank and device, host memory refused, ordering after the legacy default
// stream, a bad device on one rank, the exchange that cannot be cancelled, deferred mode and its
// watchdog). Run alone and under mpirun -n 2, one GPU per rank; the MPI communicator carries the
// NCCL id. Every test skips on every rank when any rank has no CUDA device of its own (no GPU,
// no driver, fewer GPUs than ranks on the host).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/comm.h"
#include "conformance.h"

using namespace adgnn;
using namespace adgnn::commtest;

namespace {

// cudaMalloc'd memory; copies through the legacy default stream (cudaMemcpy), so that a download
// sees what a deferred operation wrote.
class DeviceMemory final : public Memory {
 public:
  void* allocate(int64_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, static_cast<size_t>(bytes)) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void upload(void* dst, const void* host, int64_t bytes) override {
    EXPECT_EQ(cudaMemcpy(dst, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  void download(void* host, const void* src, int64_t bytes) override {
    EXPECT_EQ(cudaMemcpy(host, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
};

// Each rank uses the device of its local rank.
class NcclBackend final : public Backend {
 public:
  NcclBackend()
      : Backend("nccl", Traits{/*barrier_call=*/"ncclAllReduce", /*allreduce_call=*/"ncclAllReduce",
                               /*roll_call_over_bootstrap=*/true,
                               /*abandoned_collectives_stay_posted=*/false}) {}
  std::unique_ptr<Communicator> make(Communicator& boot) override {
    return adgnn::make_nccl_communicator(boot, boot.local_rank());
  }
  std::string unavailable(Communicator& boot) override {
    int devices = 0;
    const cudaError_t rc = cudaGetDeviceCount(&devices);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    }
    if (devices == 0) return "no CUDA device";
    if (boot.local_rank() >= devices)
      return "local rank " + std::to_string(boot.local_rank()) + " but only " +
             std::to_string(devices) + " CUDA device(s)";
    return {};
  }
  Memory* device() override { return &memory_; }

 private:
  DeviceMemory memory_;
};

class Nccl : public BackendTest<NcclBackend> {
 protected:
  int device() const { return boot->local_rank(); }
  // After exchange_with_a_silent_peer on `late`, which NCCL cannot cancel: rank 0's message
  // names the rows it waited for and, since the others wait in the bootstrap's barrier rather
  // than in a timed-out operation, the roll call over the bootstrap names rank 1; `late` refuses
  // every further call. Once `late` is gone, the suite's communicator still works.
  void expect_aborted_by_the_silent_peer(std::unique_ptr<Communicator> late,
                                         const std::string& msg) {
    if (rank == 0) {
      EXPECT_TRUE(contains(msg, "1 rows in from 1 peers")) << msg;
      EXPECT_TRUE(contains(msg, "roll call: rank 1 on host ")) << msg;
      EXPECT_TRUE(contains(msg, "did not answer")) << msg;
      expect_unusable(*late, *mem, "1 rows in from 1 peers");
    }
    boot->barrier();
    late.reset();
    c->barrier();
    run_exchange(*c, *mem, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
  }
};

}  // namespace

ADGNN_CONFORMANCE(NcclBackend);

TEST_F(Nccl, RankSizeHostFromTheBootstrap) {
  EXPECT_EQ(c->rank(), boot->rank());
  EXPECT_EQ(c->size(), boot->size());
  EXPECT_EQ(c->local_rank(), boot->local_rank());
  EXPECT_EQ(c->host(), boot->host());
  EXPECT_TRUE(c->device_memory());
  int current = -1;
  EXPECT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, device());  // the factory made the device current
}

TEST_F(Nccl, HostMemoryIsRefused) {
  // Host memory is refused before NCCL sees it, and the communicator stays usable.
  float h = 1;
  try {
    c->allreduce(&h, 1, DType::F32, ReduceOp::Sum);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "host memory")) << e.what();
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(rank) + " on host " + c->host()))
        << e.what();
  }
  std::vector<int64_t> self(size, 0);
  self[rank] = 1;
  Buffer<int32_t> row(*mem, std::vector<int32_t>{1, 2});
  int32_t host[2] = {1, 2};
  EXPECT_THROW(c->exchange(host, self, row.get(), self, 8), CommError);
  Buffer<float> d(*mem, std::vector<float>{1.0f});
  c->allreduce(d.get(), 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(d.download()[0], static_cast<float>(size));
}

TEST_F(Nccl, AllreduceSeesWorkOnTheDefaultStream) {
  // A buffer filled asynchronously on the legacy default stream is reduced after the fill.
  const int64_t n = 1 << 20;
  std::vector<float> v(static_cast<size_t>(n), static_cast<float>(rank + 1));
  Buffer<float> d(*mem, static_cast<size_t>(n));
  float* host = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&host), n * sizeof(float)), cudaSuccess);
  std::memcpy(host, v.data(), n * sizeof(float));
  EXPECT_EQ(cudaMemcpyAsync(d.get(), host, n * sizeof(float), cudaMemcpyHostToDevice, 0),
            cudaSuccess);
  c->allreduce(d.get(), n, DType::F32, ReduceOp::Sum);
  cudaFreeHost(host);
  const std::vector<float> out = d.download();
  const float want = static_cast<float>(size * (size + 1) / 2);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += out[i] != want;
  EXPECT_EQ(bad, 0);
}

TEST_F(Nccl, BadDeviceFailsOnEveryRank) {
  // Every rank throws, also those whose device is fine, instead of waiting in ncclCommInitRank.
  const int bad = rank == 0 ? 1 << 20 : device();
  try {
    auto x = adgnn::make_nccl_communicator(*boot, bad);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    if (rank == 0) {
      EXPECT_TRUE(contains(msg, "cudaSetDevice")) << msg;
    } else {
      EXPECT_TRUE(contains(msg, "another rank failed")) << msg;
    }
  }
  int current = -1;
  EXPECT_EQ(cudaGetDevice(&current), cudaSuccess);
  if (rank == 0) {
    EXPECT_EQ(current, device());  // unchanged by the failed cudaSetDevice
  }
  cudaSetDevice(device());
  c->barrier();
}

TEST_F(Nccl, ExchangeTimeoutAbortsTheCommunicator) {
  if (size < 2) GTEST_SKIP() << "needs a peer that stays silent";
  // On a second NCCL communicator, rank 0 gives up on a row that rank 1 never sends; NCCL cannot
  // cancel it, so the communicator is aborted. 15 s: the timeout, then the roll call's grace (5 s).
  auto late = adgnn::make_nccl_communicator(*boot, device());
  const std::string msg = exchange_with_a_silent_peer(*late, *mem, 15.0);
  expect_aborted_by_the_silent_peer(std::move(late), msg);
}

TEST_F(Nccl, DeferredOperationsAreOrderedOnTheDefaultStream) {
  // The host does not wait for the operations; every result is read through the legacy default
  // stream (the downloads' cudaMemcpy), which the communicator made wait for them.
  auto d = adgnn::make_nccl_communicator(*boot, device());
  d->set_timeout(60);
  d->set_deferred(true);
  EXPECT_TRUE(d->deferred());
  check_allreduce<float>(*d, *mem, DType::F32, 1 << 18, 0.5f);
  check_allreduce<double>(*d, *mem, DType::F64, 1000, 0.25);
  run_exchange(*d, *mem, [](int s, int t) { return static_cast<int64_t>((s + t) % 3); });
  run_exchange(*d, *mem, [](int s, int t) { return static_cast<int64_t>(s == t ? 0 : 1000 + s); });
  // Several operations queued back to back before any read: an allreduce of the exchange's
  // output sees the exchange, and the host only waits in the download.
  const int64_t n = 4096;
  std::vector<int64_t> sc(size, n), rc(size, n);
  std::vector<float> mine(static_cast<size_t>(n * size));
  for (int p = 0; p < size; ++p)
    for (int64_t i = 0; i < n; ++i) mine[size_t(p * n + i)] = float(rank * 10 + p) + float(i) / n;
  Buffer<float> out(*mem, mine), in(*mem, static_cast<size_t>(n * size));
  d->exchange(out.get(), sc, in.get(), rc, sizeof(float));
  d->allreduce(in.get(), n * size, DType::F32, ReduceOp::Sum);
  const std::vector<float> got = in.download();
  int64_t bad = 0;
  for (int p = 0; p < size; ++p)
    for (int64_t i = 0; i < n; ++i) {
      // Block p on every rank r came from rank p (its value p * 10 + r); summed over r.
      float want = 0;
      for (int r = 0; r < size; ++r) want += float(p * 10 + r) + float(i) / n;
      if (got[size_t(p * n + i)] != want && bad++ < 5)
        ADD_FAILURE() << "block " << p << " element " << i << ": " << got[size_t(p * n + i)]
                      << " != " << want;
    }
  EXPECT_EQ(bad, 0);
  d->synchronize();
  d->set_deferred(false);
  EXPECT_FALSE(d->deferred());
  d->barrier();
  EXPECT_TRUE(everywhere(true));
}

TEST_F(Nccl, DeferredTimeoutAbortsAndSurfacesInSynchronize) {
  if (size < 2) GTEST_SKIP() << "needs a peer that stays silent";
  // As ExchangeTimeoutAbortsTheCommunicator, deferred: rank 0's exchange returns at once, its
  // watchdog aborts the communicator after 0.5 s, and synchronize() reports it. One exchange
  // between every pair first: NCCL connects peers on their first exchange, and a peer that
  // never connects keeps ncclGroupEnd itself in progress (the blocking path's timeout).
  auto late = adgnn::make_nccl_communicator(*boot, device());
  late->set_timeout(60);
  late->set_deferred(true);
  run_exchange(*late, *mem, [](int s, int t) { return static_cast<int64_t>(s == t ? 0 : 1); });
  late->synchronize();
  boot->barrier();
  const std::string msg = exchange_with_a_silent_peer(*late, *mem, 15.0);
  expect_aborted_by_the_silent_peer(std::move(late), msg);
}
