// The conformance harness (conformance.h): host memory, the backends' shared communicators,
// and the helpers and scenarios of the tests.
#include "conformance.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace adgnn::commtest {

namespace {

class HostMemory final : public Memory {
 public:
  void* allocate(int64_t bytes) override { return std::malloc(static_cast<size_t>(bytes)); }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* host, int64_t bytes) override {
    std::memcpy(dst, host, static_cast<size_t>(bytes));
  }
  void download(void* host, const void* src, int64_t bytes) override {
    std::memcpy(host, src, static_cast<size_t>(bytes));
  }
};

std::vector<Backend*>& backends() {
  static std::vector<Backend*> all;
  return all;
}

// Closes every backend's communicators after the last test: inside RUN_ALL_TESTS, so before
// mpi_main.cpp finalizes MPI, and on every rank at the same point (NCCL's destructor waits for
// its peers).
class CloseBackends : public ::testing::Environment {
 public:
  void TearDown() override {
    for (Backend* b : backends()) b->close();
  }
};

[[maybe_unused]] ::testing::Environment* const kCloseBackends =
    ::testing::AddGlobalTestEnvironment(new CloseBackends);

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

}  // namespace

Memory& host_memory() {
  static HostMemory m;
  return m;
}

Backend::Backend(std::string name, Traits traits) : name_(std::move(name)), traits_(traits) {
  backends().push_back(this);
}

void Backend::open() {
  if (opened_) return;
  opened_ = true;
  try {
    boot_ = make_mpi_communicator();
    boot_->set_timeout(60);  // a broken test fails in a minute instead of hanging
    const std::string why = unavailable(*boot_);
    // Skip everywhere when any rank must, so that no rank waits in a collective alone.
    int64_t ok = why.empty() ? 1 : 0;
    boot_->allreduce(&ok, 1, DType::I64, ReduceOp::Min);
    if (ok != 1) {
      skip_ = why.empty() ? "another rank cannot run the " + name_ + " backend (see its output)"
                          : why;
      return;
    }
    shared_ = make(*boot_);
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

void Backend::close() {
  shared_.reset();  // before its bootstrap
  boot_.reset();
  opened_ = false;
  skip_.clear();
  error_.clear();
}

Memory* Backend::memory_of(const Communicator& c) {
  return c.device_memory() ? device() : &host_memory();
}

void CommTest::open(Backend& b) {
  b.open();
  if (!b.error().empty()) FAIL() << b.error();
  if (!b.skip().empty()) GTEST_SKIP() << b.skip();
  backend = &b;
  c = &b.shared();
  boot = &b.bootstrap();
  mem = b.memory_of(*c);
  ASSERT_NE(mem, nullptr) << "the " << b.name() << " communicator wants device memory, which "
                          << "the backend does not provide";
  c->set_timeout(60);
  rank = c->rank();
  size = c->size();
}

bool CommTest::everywhere(bool v) {
  int64_t x = v ? 1 : 0;
  boot->allreduce(&x, 1, DType::I64, ReduceOp::Min);
  return x == 1;
}

std::string backend_name(const ::testing::TestParamInfo<Backend*>& info) {
  return info.param->name();
}

void PrintTo(Backend* b, std::ostream* os) { *os << b->name(); }

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

void run_exchange(Communicator& c, Memory& m, const RowCount& count) {
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
  Buffer<int32_t> dsend(m, send);
  Buffer<int32_t> drecv(m, std::vector<int32_t>(static_cast<size_t>(total_in * kWords),
                                                0x7eadbeef));
  c.exchange(dsend.get(), sc, drecv.get(), rc, kWords * sizeof(int32_t));
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

void expect_unusable(Communicator& c, Memory& m, const std::string& cause) {
  Buffer<float> x(m, std::vector<float>{1.0f});
  const std::function<void()> calls[] = {
      [&] { c.barrier(); }, [&] { c.allreduce(x.get(), 1, DType::F32, ReduceOp::Sum); }};
  for (const auto& call : calls) {
    try {
      call();
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable")) << e.what();
      EXPECT_TRUE(contains(e.what(), cause)) << e.what();
    }
  }
}

std::string exchange_with_a_silent_peer(Communicator& c, Memory& m, double within) {
  const int rank = c.rank(), size = c.size();
  c.set_timeout(rank == 0 ? 0.5 : 5);
  std::vector<int64_t> sc(size, 0), rc(size, 0);
  if (rank == 0) rc[1] = 1;
  Buffer<int64_t> in(m, 2);
  if (rank != 0) {
    c.exchange(nullptr, sc, nullptr, rc, 2 * sizeof(int64_t));
    c.synchronize();
    return {};
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.exchange(nullptr, sc, in.get(), rc, 2 * sizeof(int64_t));
    if (c.deferred()) {
      EXPECT_LT(seconds_since(t0), 0.4);  // enqueued, not waited for
      c.synchronize();
    }
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    const double waited = seconds_since(t0);
    EXPECT_GE(waited, 0.45);
    EXPECT_LT(waited, within);
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "rank 0 on host " + c.host() + ": ")) << msg;
    EXPECT_TRUE(contains(msg, "timed out after 0.5 s")) << msg;
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.host(), c.host());
    return msg;
  }
  return {};
}

std::string allreduce_without_the_last_rank(const Backend& b, Communicator& late,
                                            Communicator& boot, Buffer<double>& x) {
  const int rank = late.rank(), absent = late.size() - 1;
  late.set_timeout(rank == absent ? 5 : 1.0);
  if (rank == absent) return {};
  try {
    late.allreduce(x.get(), static_cast<int64_t>(x.size()), DType::F64, ReduceOp::Sum);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, std::string(b.traits().allreduce_call) + " (allreduce of " +
                                  std::to_string(x.size()) + " F64 Sum) timed out after 1 s"))
        << msg;
    EXPECT_TRUE(contains(msg, "roll call: ")) << msg;
    EXPECT_TRUE(contains(msg, "rank " + std::to_string(absent) + " on host ")) << msg;
    const Communicator& holder = b.traits().roll_call_over_bootstrap ? boot : late;
    EXPECT_TRUE(contains(msg, "did not answer within " +
                                  seconds(std::min(holder.timeout(), 5.0)) + " s"))
        << msg;
    EXPECT_FALSE(contains(msg, "rank " + std::to_string(rank) + " on host " + late.host() +
                                   " did not answer"))
        << msg;
    return msg;
  }
  return {};
}

}  // namespace adgnn::commtest
