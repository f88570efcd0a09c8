// The NCCL communicator on device buffers, run alone and under mpirun -n 2 (one GPU per rank; the
// MPI communicator carries the NCCL id). Every received value is predictable from (source,
// destination, position) and checked after a copy back to the host. The suite skips on every
// rank when any rank has no CUDA device of its own (no GPU, no driver, fewer GPUs than ranks on
// the host). Tests use EXPECT rather than ASSERT around collectives, so a failing rank still
// takes part in them.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "adgnn/comm.h"

using adgnn::CommError;
using adgnn::Communicator;
using adgnn::DType;
using adgnn::ReduceOp;

namespace {

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A device buffer of n elements of T, with copies to and from host vectors.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0 && cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)) != cudaSuccess) {
      p_ = nullptr;
      ADD_FAILURE() << "cudaMalloc of " << n_ * sizeof(T) << " bytes failed";
    }
  }
  explicit DeviceBuffer(const std::vector<T>& v) : DeviceBuffer(v.size()) { upload(v); }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  void upload(const std::vector<T>& v) {
    if (p_ != nullptr && !v.empty()) {
      EXPECT_EQ(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    if (p_ != nullptr && n_ > 0) {
      EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return v;
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

class Nccl : public ::testing::Test {
 public:
  // One MPI bootstrap and one NCCL communicator for the whole suite (NCCL init is slow).
  static void SetUpTestSuite() {
    try {
      boot_ = adgnn::make_mpi_communicator().release();
      boot_->set_timeout(60);  // a broken test fails in a minute instead of hanging
      int devices = 0;
      const cudaError_t rc = cudaGetDeviceCount(&devices);
      std::string why;
      if (rc != cudaSuccess) {
        cudaGetLastError();
        why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
        devices = 0;
      } else if (devices == 0) {
        why = "no CUDA device";
      } else if (boot_->local_rank() >= devices) {
        why = "local rank " + std::to_string(boot_->local_rank()) + " but only " +
              std::to_string(devices) + " CUDA device(s)";
      }
      // Skip everywhere when any rank must, so that no rank waits in a collective alone.
      int64_t ok = why.empty() ? 1 : 0;
      boot_->allreduce(&ok, 1, DType::I64, ReduceOp::Min);
      if (ok != 1) {
        skip_ = why.empty() ? std::string("another rank has no CUDA device of its own") : why;
        return;
      }
      device_ = boot_->local_rank();
      nccl_ = adgnn::make_nccl_communicator(*boot_, device_).release();
      nccl_->set_timeout(60);
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete nccl_;
    nccl_ = nullptr;
    delete boot_;
    boot_ = nullptr;
  }

 protected:
  void SetUp() override {
    if (!setup_error_.empty()) FAIL() << setup_error_;
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    c = nccl_;
    boot = boot_;
    rank = c->rank();
    size = c->size();
    c->set_timeout(60);
  }
  // True when `v` holds on every rank (through the MPI bootstrap).
  bool everywhere(bool v) {
    int64_t x = v ? 1 : 0;
    boot->allreduce(&x, 1, DType::I64, ReduceOp::Min);
    return x == 1;
  }

  static Communicator* boot_;
  static Communicator* nccl_;
  static int device_;
  static std::string skip_;
  static std::string setup_error_;
  Communicator* c = nullptr;
  Communicator* boot = nullptr;
  int rank = 0, size = 1;
};

Communicator* Nccl::boot_ = nullptr;
Communicator* Nccl::nccl_ = nullptr;
int Nccl::device_ = -1;
std::string Nccl::skip_;
std::string Nccl::setup_error_;

// Value of element i on rank r for the allreduce tests: (r + 1) * (i - count / 2) * scale, so that
// sums are exact, signs vary, and Max / Min depend on the sign.
template <class T>
T contribution(int r, int64_t i, int64_t count, T scale) {
  return static_cast<T>(r + 1) * static_cast<T>(i - count / 2) * scale;
}

template <class T>
void check_allreduce(Communicator& c, DType dt, int64_t count, T scale) {
  const int size = c.size();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    SCOPED_TRACE(std::string(adgnn::to_string(dt)) + " " + adgnn::to_string(op) + " count " +
                 std::to_string(count));
    std::vector<T> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[i] = contribution<T>(c.rank(), i, count, scale);
    DeviceBuffer<T> d(v);
    c.allreduce(d.get(), count, dt, op);
    v = d.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < count; ++i) {
      const T base = static_cast<T>(i - count / 2) * scale;  // rank 0's value
      T want;
      if (op == ReduceOp::Sum)
        want = base * static_cast<T>(size * (size + 1) / 2);
      else if ((op == ReduceOp::Max) == (base >= 0))
        want = base * static_cast<T>(size);
      else
        want = base;
      if (v[i] != want && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": got " << v[i] << ", want " << want;
    }
    EXPECT_EQ(bad, 0);
  }
}

// Rows of the exchange tests: kWords int32 words, each a hash of (source, destination, row, word).
constexpr int kWords = 5;
int32_t word(int src, int dst, int64_t row, int w) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(src) << 48) ^
               (static_cast<uint64_t>(dst) << 32) ^ (static_cast<uint64_t>(row) << 4) ^
               static_cast<uint64_t>(w);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return static_cast<int32_t>(h);
}

// Runs one exchange on device buffers where src sends count(src, dst) rows to dst, filling and
// checking every word. A rank with nothing to send (or receive) passes a null buffer.
template <class F>
void run_exchange(Communicator& c, F count) {
  const int rank = c.rank(), size = c.size();
  std::vector<int64_t> sc(size), rc(size);
  int64_t total_out = 0, total_in = 0;
  for (int p = 0; p < size; ++p) {
    sc[p] = count(rank, p);
    rc[p] = count(p, rank);
    total_out += sc[p];
    total_in += rc[p];
  }
  std::vector<int32_t> send(static_cast<size_t>(total_out * kWords));
  int64_t row = 0;
  for (int p = 0; p < size; ++p)
    for (int64_t i = 0; i < sc[p]; ++i, ++row)
      for (int w = 0; w < kWords; ++w) send[row * kWords + w] = word(rank, p, i, w);
  DeviceBuffer<int32_t> dsend(send);
  DeviceBuffer<int32_t> drecv(std::vector<int32_t>(static_cast<size_t>(total_in * kWords),
                                                   0x7eadbeef));
  c.exchange(total_out ? dsend.get() : nullptr, sc, total_in ? drecv.get() : nullptr, rc,
             kWords * sizeof(int32_t));
  const std::vector<int32_t> recv = drecv.download();
  int64_t bad = 0;
  row = 0;
  for (int p = 0; p < size; ++p)
    for (int64_t i = 0; i < rc[p]; ++i, ++row)
      for (int w = 0; w < kWords; ++w)
        if (recv[row * kWords + w] != word(p, rank, i, w) && bad++ < 5)
          ADD_FAILURE() << "rank " << rank << ": row " << i << " word " << w << " from rank "
                        << p << " is " << recv[row * kWords + w];
  EXPECT_EQ(bad, 0);
}

}  // namespace

TEST_F(Nccl, RankSizeHostFromTheBootstrap) {
  EXPECT_EQ(c->rank(), boot->rank());
  EXPECT_EQ(c->size(), boot->size());
  EXPECT_EQ(c->local_rank(), boot->local_rank());
  EXPECT_EQ(c->host(), boot->host());
  int current = -1;
  EXPECT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, device_);  // the factory made the device current
}

TEST_F(Nccl, AllreduceF32) {
  for (int64_t n : {1, 7, 1000, 1 << 18}) check_allreduce<float>(*c, DType::F32, n, 0.5f);
}

TEST_F(Nccl, AllreduceF64) {
  for (int64_t n : {1, 1000, 1 << 16}) check_allreduce<double>(*c, DType::F64, n, 0.25);
}

TEST_F(Nccl, AllreduceI64) {
  // Values beyond 32 bits.
  for (int64_t n : {1, 1000, 1 << 16})
    check_allreduce<int64_t>(*c, DType::I64, n, int64_t{1} << 33);
}

TEST_F(Nccl, AllreduceSeesWorkOnTheDefaultStream) {
  // A buffer filled asynchronously on the legacy default stream is reduced after the fill.
  const int64_t n = 1 << 20;
  std::vector<float> v(static_cast<size_t>(n), static_cast<float>(rank + 1));
  DeviceBuffer<float> d(static_cast<size_t>(n));
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

TEST_F(Nccl, AllreduceZeroCountAndBadArgs) {
  c->allreduce(nullptr, 0, DType::F32, ReduceOp::Sum);  // nothing to do
  EXPECT_THROW(c->allreduce(nullptr, -1, DType::F32, ReduceOp::Sum), CommError);
  EXPECT_THROW(c->allreduce(nullptr, 4, DType::F32, ReduceOp::Sum), CommError);
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
  DeviceBuffer<float> d(std::vector<float>{1.0f});
  c->allreduce(d.get(), 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(d.download()[0], static_cast<float>(size));
}

TEST_F(Nccl, BroadcastFromLastRank) {
  const int root = size - 1;
  for (int64_t bytes : {int64_t{1}, int64_t{1001}, int64_t{3} << 20}) {
    SCOPED_TRACE("bytes " + std::to_string(bytes));
    std::vector<unsigned char> b(static_cast<size_t>(bytes), 0xEE);
    if (rank == root)
      for (int64_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>((i * 7 + root) & 0xff);
    DeviceBuffer<unsigned char> d(b);
    c->broadcast(d.get(), bytes, root);
    b = d.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < bytes; ++i)
      if (b[i] != static_cast<unsigned char>((i * 7 + root) & 0xff)) ++bad;
    EXPECT_EQ(bad, 0);
  }
  // Root 0 as well, with typed data.
  std::vector<double> v(100, -1.0);
  if (rank == 0)
    for (int i = 0; i < 100; ++i) v[i] = i * 1.5;
  DeviceBuffer<double> d(v);
  c->broadcast(d.get(), static_cast<int64_t>(v.size() * sizeof(double)), 0);
  v = d.download();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(v[i], i * 1.5);
}

TEST_F(Nccl, BroadcastBadRoot) {
  DeviceBuffer<char> d(1);
  try {
    c->broadcast(d.get(), 1, size);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "broadcast: root " + std::to_string(size))) << e.what();
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(rank) + " on host " + c->host()))
        << e.what();
  }
  EXPECT_THROW(c->broadcast(d.get(), 1, -1), CommError);
  c->broadcast(d.get(), 0, 0);  // nothing to do
}

TEST_F(Nccl, BarrierWaitsForTheLastRank) {
  c->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c->barrier();
  if (size > 1) {
    EXPECT_GE(seconds_since(t0), 0.18);
  }
  for (int i = 0; i < 50; ++i) c->barrier();
}

TEST_F(Nccl, ExchangeModulo3) {
  // Rank r sends (r + p) % 3 rows to p: zero-row pairs included (rank 0 to itself).
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
}

TEST_F(Nccl, ExchangeWithASilentRank) {
  // The last rank (with size > 1) sends nothing at all but still calls exchange and receives;
  // the others also send to themselves.
  const int n = size;
  run_exchange(*c, [n](int s, int d) -> int64_t {
    if (n > 1 && s == n - 1) return 0;
    return (s + d) % 3 + 1;
  });
  // Only rank 0 receives (from everyone); nobody else gets anything.
  run_exchange(*c, [](int, int d) -> int64_t { return d == 0 ? 2 : 0; });
  // Nothing at all.
  run_exchange(*c, [](int, int) -> int64_t { return 0; });
}

TEST_F(Nccl, ExchangeLargeRows) {
  // Up to ~1.6 MB per peer.
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3) * 40000 + 1; });
  // Several exchanges in a row keep their rows apart.
  for (int k = 0; k < 20; ++k)
    run_exchange(*c, [k](int s, int d) { return static_cast<int64_t>((s * 3 + d + k) % 4); });
}

TEST_F(Nccl, ExchangeBadArgs) {
  std::vector<int64_t> ok(size, 0), bad_size(size + 1, 0), negative(size, 0);
  negative[0] = -1;
  EXPECT_THROW(c->exchange(nullptr, bad_size, nullptr, ok, 4), CommError);
  EXPECT_THROW(c->exchange(nullptr, ok, nullptr, negative, 4), CommError);
  EXPECT_THROW(c->exchange(nullptr, ok, nullptr, ok, -4), CommError);
  // The rows a rank sends itself must match the rows it expects from itself.
  std::vector<int64_t> self(size, 0);
  self[rank] = 1;
  DeviceBuffer<int32_t> row(std::vector<int32_t>{1, 2});
  try {
    c->exchange(row.get(), self, row.get(), ok, 8);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "send_counts[" + std::to_string(rank) + "] = 1")) << e.what();
  }
  // Null buffers with rows to move; host buffers.
  EXPECT_THROW(c->exchange(nullptr, self, row.get(), self, 8), CommError);
  int32_t host[2] = {1, 2};
  EXPECT_THROW(c->exchange(host, self, row.get(), self, 8), CommError);
  // Rows to itself only: a device-to-device copy.
  DeviceBuffer<int32_t> out(std::vector<int32_t>{0, 0});
  c->exchange(row.get(), self, out.get(), self, 8);
  EXPECT_EQ(out.download(), (std::vector<int32_t>{1, 2}));
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 2); });  // usable
}

TEST_F(Nccl, BadDeviceFailsOnEveryRank) {
  // Every rank throws, also those whose device is fine, instead of waiting in ncclCommInitRank.
  const int bad = rank == 0 ? 1 << 20 : device_;
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
    EXPECT_EQ(current, device_);  // unchanged by the failed cudaSetDevice
  }
  cudaSetDevice(device_);
  c->barrier();
}

TEST_F(Nccl, ExchangeTimeoutAbortsTheCommunicator) {
  if (size < 2) GTEST_SKIP() << "needs a peer that stays silent";
  // On a second NCCL communicator, rank 0 expects a row from rank 1 that rank 1 never sends;
  // every other rank calls exchange with nothing to do and returns at once.
  auto late = adgnn::make_nccl_communicator(*boot, device_);
  late->set_timeout(rank == 0 ? 0.5 : 5);  // 5 s: the others' destructor waits for rank 0
  std::vector<int64_t> sc(size, 0), rc(size, 0);
  if (rank == 0) rc[1] = 1;
  DeviceBuffer<int64_t> in(2);
  if (rank == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      late->exchange(nullptr, sc, in.get(), rc, 2 * sizeof(int64_t));
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      const double waited = seconds_since(t0);
      EXPECT_GE(waited, 0.45);
      EXPECT_LT(waited, 10.0);
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "rank 0 on host " + late->host() + ": ")) << msg;
      EXPECT_TRUE(contains(msg, "timed out after 0.5 s")) << msg;
      EXPECT_TRUE(contains(msg, "1 rows in from 1 peers")) << msg;
      EXPECT_EQ(e.rank(), 0);
    }
    try {
      late->barrier();
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable")) << e.what();
    }
  } else {
    late->exchange(nullptr, sc, nullptr, rc, 2 * sizeof(int64_t));
  }
  boot->barrier();
  late.reset();
  // The suite's communicator is not affected.
  c->barrier();
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
}

TEST_F(Nccl, DeferredOperationsAreOrderedOnTheDefaultStream) {
  // The host does not wait for the operations; every result is read through the legacy default
  // stream (the downloads' cudaMemcpy), which the communicator made wait for them.
  auto d = adgnn::make_nccl_communicator(*boot, device_);
  d->set_timeout(60);
  d->set_deferred(true);
  EXPECT_TRUE(d->deferred());
  check_allreduce<float>(*d, DType::F32, 1 << 18, 0.5f);
  check_allreduce<double>(*d, DType::F64, 1000, 0.25);
  run_exchange(*d, [](int s, int t) { return static_cast<int64_t>((s + t) % 3); });
  run_exchange(*d, [](int s, int t) { return static_cast<int64_t>(s == t ? 0 : 1000 + s); });
  // Several operations queued back to back before any read: an allreduce of the exchange's
  // output sees the exchange, and the host only waits in the download.
  const int64_t n = 4096;
  std::vector<int64_t> sc(size, n), rc(size, n);
  std::vector<float> mine(static_cast<size_t>(n * size));
  for (int p = 0; p < size; ++p)
    for (int64_t i = 0; i < n; ++i) mine[size_t(p * n + i)] = float(rank * 10 + p) + float(i) / n;
  DeviceBuffer<float> out(mine), in(static_cast<size_t>(n * size));
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
        ADD_FAILURE() << "block " << p << " element " << i << ": " << got[size_t(p * n + i)] << " != " << want;
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
  auto late = adgnn::make_nccl_communicator(*boot, device_);
  late->set_timeout(60);
  late->set_deferred(true);
  run_exchange(*late, [](int s, int t) { return static_cast<int64_t>(s == t ? 0 : 1); });
  late->synchronize();
  boot->barrier();
  late->set_timeout(rank == 0 ? 0.5 : 5);
  std::vector<int64_t> sc(size, 0), rc(size, 0);
  if (rank == 0) rc[1] = 1;
  DeviceBuffer<int64_t> in(2);
  if (rank == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    late->exchange(nullptr, sc, in.get(), rc, 2 * sizeof(int64_t));
    EXPECT_LT(seconds_since(t0), 0.4);  // enqueued, not waited for
    try {
      late->synchronize();
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      const double waited = seconds_since(t0);
      EXPECT_GE(waited, 0.45);
      EXPECT_LT(waited, 10.0);
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "rank 0 on host " + late->host() + ": ")) << msg;
      EXPECT_TRUE(contains(msg, "timed out after 0.5 s")) << msg;
      EXPECT_TRUE(contains(msg, "1 rows in from 1 peers")) << msg;
    }
    try {
      late->allreduce(in.get(), 2, DType::I64, ReduceOp::Sum);
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable")) << e.what();
    }
  } else {
    late->exchange(nullptr, sc, nullptr, rc, 2 * sizeof(int64_t));
    late->synchronize();
  }
  boot->barrier();
  late.reset();
  c->barrier();
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
}

TEST_F(Nccl, HealthyAtTheEnd) {
  check_allreduce<double>(*c, DType::F64, 513, 1.0);
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((2 * s + d) % 3); });
  c->barrier();
  EXPECT_TRUE(everywhere(true));
}
