// The communicator conformance harness: one suite of tests (test_conformance.cpp) that every
// backend must pass, run against each backend by the binary that instantiates it
// (test_mpi_communicator.cpp, test_nccl_communicator.cpp, test_store_communicator.cpp). A
// Backend makes the communicators and says where their buffers live; the fixture hands each test the backend's communicator, a
// host-memory communicator over the same ranks, and the memory its buffers come from, so that a
// test body reads the same for host (MPI) and device (NCCL) buffers. What differs by design
// between the backends (comm.h) is a Backend trait, not a second body.
//
// Every received value is predictable from (source, destination, position) and checked after a
// download to the host (nccl-tests style). Tests use EXPECT rather than ASSERT around
// collectives, so a failing rank still takes part in them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "adgnn/comm.h"

namespace adgnn::commtest {

// Where a communicator's buffers live: host memory, or the device of a device-memory backend.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual void* allocate(int64_t bytes) = 0;  // null when it fails
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host, int64_t bytes) = 0;
  virtual void download(void* host, const void* src, int64_t bytes) = 0;
};

Memory& host_memory();

// n elements of T in `memory`, with copies from and to host vectors. Null when n is 0.
template <class T>
class Buffer {
 public:
  Buffer(Memory& memory, size_t n) : memory_(&memory), n_(n) {
    if (n_ == 0) return;
    p_ = static_cast<T*>(memory_->allocate(static_cast<int64_t>(n_ * sizeof(T))));
    if (p_ == nullptr) ADD_FAILURE() << "allocation of " << n_ * sizeof(T) << " bytes failed";
  }
  Buffer(Memory& memory, const std::vector<T>& v) : Buffer(memory, v.size()) { upload(v); }
  ~Buffer() {
    if (p_ != nullptr) memory_->release(p_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& v) {
    EXPECT_LE(v.size(), n_);
    if (p_ != nullptr && !v.empty() && v.size() <= n_)
      memory_->upload(p_, v.data(), static_cast<int64_t>(v.size() * sizeof(T)));
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    if (p_ != nullptr) memory_->download(v.data(), p_, static_cast<int64_t>(n_ * sizeof(T)));
    return v;
  }

 private:
  Memory* memory_;
  size_t n_;
  T* p_ = nullptr;
};

// One communicator backend under test. The first test that opens it makes, over every rank, a
// host-memory MPI communicator (the bootstrap) and the backend's communicator, which the tests
// share (an NCCL communicator takes seconds to set up); both are closed after the last test.
class Backend {
 public:
  // What differs by design between backends, so that one test body holds for each.
  struct Traits {
    // The library call that a barrier's / an allreduce's error messages name.
    const char* barrier_call;
    const char* allreduce_call;
    // Whether the roll call after a timeout runs over the bootstrap (NCCL) rather than over the
    // communicator that timed out (MPI); its grace is the smaller of that one's timeout and 5 s.
    bool roll_call_over_bootstrap;
    // Whether a collective that timed out stays posted, so that the late ranks must still join
    // it before the communicator goes (MPI: it completes on the communicator's buffer), rather
    // than being aborted with the communicator, so that they must not (NCCL).
    bool abandoned_collectives_stay_posted;
  };

  Backend(std::string name, Traits traits);
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const std::string& name() const { return name_; }
  const Traits& traits() const { return traits_; }

  // A new communicator of this backend over every rank; collective over `boot`.
  virtual std::unique_ptr<Communicator> make(Communicator& boot) = 0;
  // Why this rank cannot run the backend (no device of its own); empty when it can.
  virtual std::string unavailable(Communicator& boot) {
    (void)boot;
    return {};
  }
  // The memory of communicators whose device_memory() is true; null for host-only backends.
  virtual Memory* device() { return nullptr; }

  // Opens the suite's communicators on first use (collective: every rank's first test of the
  // backend calls it). Afterwards skip() says why every rank skips (some rank cannot run the
  // backend) and error() why the set-up failed; both are empty when it is ready.
  void open();
  void close();  // after the last test, before MPI is finalized
  const std::string& skip() const { return skip_; }
  const std::string& error() const { return error_; }
  Communicator& bootstrap() { return *boot_; }
  Communicator& shared() { return *shared_; }
  // The memory of c's buffers (host or this backend's device).
  Memory* memory_of(const Communicator& c);

 private:
  std::string name_;
  Traits traits_;
  bool opened_ = false;
  std::string skip_, error_;
  std::unique_ptr<Communicator> boot_, shared_;
};

// A test on one backend: SetUp calls open(), which skips or fails the test as the backend says.
class CommTest : public ::testing::Test {
 protected:
  void open(Backend& b);
  // True when `v` holds on every rank (over the bootstrap).
  bool everywhere(bool v);

  Backend* backend = nullptr;
  Communicator* c = nullptr;     // the backend's communicator, shared by the tests
  // Host memory, the same ranks: agreement and the phases of a test that breaks a communicator.
  Communicator* boot = nullptr;
  Memory* mem = nullptr;         // where c's buffers live
  int rank = 0, size = 1;
};

// The one instance of backend B, made on first use.
template <class B>
Backend& instance() {
  static B b;
  return b;
}

// The fixture of backend B's own tests (test_mpi_communicator.cpp, test_nccl_communicator.cpp).
template <class B>
class BackendTest : public CommTest {
 protected:
  void SetUp() override { open(instance<B>()); }
};

// The conformance suite, instantiated once per backend in that backend's test binary with
// ADGNN_CONFORMANCE(B).
class Conformance : public CommTest, public ::testing::WithParamInterface<Backend*> {
 protected:
  void SetUp() override { open(*GetParam()); }
};

// Test names: "Conformance.AllreduceF32/mpi"; gtest prints the parameter as the name too.
std::string backend_name(const ::testing::TestParamInfo<Backend*>& info);
void PrintTo(Backend* b, std::ostream* os);

#define ADGNN_CONFORMANCE(B)                                                       \
  INSTANTIATE_TEST_SUITE_P(, Conformance,                                          \
                           ::testing::Values(&::adgnn::commtest::instance<B>()), \
                           ::adgnn::commtest::backend_name)

bool contains(const std::string& s, const std::string& needle);
double seconds_since(std::chrono::steady_clock::time_point t);
// A number as error messages print it ({:g}): "0.5", "1".
std::string seconds(double s);

// Allreduces `count` elements of T on c with every op and checks each element. Element i on
// rank r is (r + 1) * (i - count / 2) * scale, so that sums are exact, signs vary, and Max /
// Min depend on the sign.
template <class T>
void check_allreduce(Communicator& c, Memory& m, DType dt, int64_t count, T scale) {
  const int size = c.size();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    SCOPED_TRACE(std::string(to_string(dt)) + " " + to_string(op) + " count " +
                 std::to_string(count));
    std::vector<T> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      v[i] = static_cast<T>(c.rank() + 1) * static_cast<T>(i - count / 2) * scale;
    Buffer<T> d(m, v);
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

// Rows to move from rank src to rank dst.
using RowCount = std::function<int64_t(int src, int dst)>;
// Runs one exchange on c where src sends count(src, dst) rows to dst, each row's words hashed from
// (source, destination, row, word), and checks every word received. A rank with nothing to send
// (or receive) passes a null buffer.
void run_exchange(Communicator& c, Memory& m, const RowCount& count);

// Checks that c refuses every further call (a barrier, an allreduce) as unusable, naming the
// failure that broke it (`cause`).
void expect_unusable(Communicator& c, Memory& m, const std::string& cause);

// Scenarios that more than one test starts from. Each needs two ranks or more.
//
// Rank 0 waits in an exchange on c for one row from rank 1, which sends none; every other rank
// has nothing to move and returns at once (deferred: also from synchronize). The timeout is
// 0.5 s on rank 0 and 5 s elsewhere (the others' NCCL destructor waits that long for a peer
// whose communicator was aborted). On rank 0, checks what every backend's error says (this rank
// and host, the timeout, reported after it and within `within` seconds; a deferred exchange
// returns at once and synchronize() reports it) and returns the message; empty elsewhere.
std::string exchange_with_a_silent_peer(Communicator& c, Memory& m, double within);
// Every rank but the last enters an allreduce (F64, Sum) of x on `late` with a 1 s timeout; the
// last rank does not come (its timeout: 5 s). On the ranks that gave up, checks that the error
// names the call and the timeout and that the roll call names the last rank, not this one, and
// returns the message; empty on the last rank. `boot` is the backend's bootstrap.
std::string allreduce_without_the_last_rank(const Backend& b, Communicator& late,
                                            Communicator& boot, Buffer<double>& x);

}  // namespace adgnn::commtest
