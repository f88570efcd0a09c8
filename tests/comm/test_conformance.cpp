// The communicator conformance suite: what every backend does, one test body per behaviour, on
// the buffers its communicator takes (conformance.h). Each backend's test binary instantiates it
// (test_mpi_communicator.cpp, test_nccl_communicator.cpp) and runs it alone and under mpirun.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "adgnn/comm.h"
#include "conformance.h"

using namespace adgnn;
using namespace adgnn::commtest;

TEST(CommErrorTest, MessageNamesRankAndHost) {
  const CommError e(3, "node17", "MPI_Iallreduce timed out after 30 s");
  EXPECT_STREQ(e.what(), "rank 3 on host node17: MPI_Iallreduce timed out after 30 s");
  EXPECT_EQ(e.rank(), 3);
  EXPECT_EQ(e.host(), "node17");
  EXPECT_STREQ(CommError(-1, "", "x").what(), "rank ? on host ?: x");
}

TEST_P(Conformance, RankSizeHost) {
  EXPECT_GE(size, 1);
  EXPECT_GE(rank, 0);
  EXPECT_LT(rank, size);
  EXPECT_GE(c->local_rank(), 0);
  EXPECT_LT(c->local_rank(), size);
  EXPECT_FALSE(c->host().empty());
  // Every rank agrees on the size and appears exactly once.
  Buffer<int64_t> mn(*mem, std::vector<int64_t>(1, size)), mx(*mem, std::vector<int64_t>(1, size));
  c->allreduce(mn.get(), 1, DType::I64, ReduceOp::Min);
  c->allreduce(mx.get(), 1, DType::I64, ReduceOp::Max);
  EXPECT_EQ(mn.download()[0], size);
  EXPECT_EQ(mx.download()[0], size);
  std::vector<int64_t> me(size, 0);
  me[rank] = 1;
  Buffer<int64_t> seen(*mem, me);
  c->allreduce(seen.get(), size, DType::I64, ReduceOp::Sum);
  const std::vector<int64_t> all = seen.download();
  for (int p = 0; p < size; ++p) EXPECT_EQ(all[p], 1) << "rank " << p;
  // When every rank runs on the host of rank 0, local ranks are the ranks.
  std::vector<char> name(256, 0);
  std::strncpy(name.data(), c->host().c_str(), name.size() - 1);
  Buffer<char> host0(*mem, name);
  c->broadcast(host0.get(), static_cast<int64_t>(name.size()), 0);
  if (everywhere(std::string(host0.download().data()) == c->host())) {
    EXPECT_EQ(c->local_rank(), rank);
  }
}

TEST_P(Conformance, AllreduceF32) {
  for (int64_t n : {1, 7, 1000, 1 << 18}) check_allreduce<float>(*c, *mem, DType::F32, n, 0.5f);
}

TEST_P(Conformance, AllreduceF64) {
  for (int64_t n : {1, 1000, 1 << 16}) check_allreduce<double>(*c, *mem, DType::F64, n, 0.25);
}

TEST_P(Conformance, AllreduceI64) {
  // Values beyond 32 bits.
  for (int64_t n : {1, 1000, 1 << 16})
    check_allreduce<int64_t>(*c, *mem, DType::I64, n, int64_t{1} << 33);
}

TEST_P(Conformance, AllreduceZeroCountAndBadArgs) {
  c->allreduce(nullptr, 0, DType::F32, ReduceOp::Sum);  // nothing to do
  EXPECT_THROW(c->allreduce(nullptr, -1, DType::F32, ReduceOp::Sum), CommError);
  EXPECT_THROW(c->allreduce(nullptr, 4, DType::F32, ReduceOp::Sum), CommError);
  Buffer<float> x(*mem, std::vector<float>{1.0f});
  c->allreduce(x.get(), 1, DType::F32, ReduceOp::Sum);  // still usable
  EXPECT_EQ(x.download()[0], static_cast<float>(size));
}

TEST_P(Conformance, BroadcastFromEveryRoot) {
  for (int root = 0; root < size; ++root)
    for (int64_t bytes : {int64_t{1}, int64_t{1001}, int64_t{3} << 20}) {
      SCOPED_TRACE("root " + std::to_string(root) + ", bytes " + std::to_string(bytes));
      const auto byte = [root](int64_t i) {
        return static_cast<unsigned char>((i * 7 + root) & 0xff);
      };
      std::vector<unsigned char> b(static_cast<size_t>(bytes), 0xEE);
      if (rank == root)
        for (int64_t i = 0; i < bytes; ++i) b[i] = byte(i);
      Buffer<unsigned char> d(*mem, b);
      c->broadcast(d.get(), bytes, root);
      b = d.download();
      int64_t bad = 0;
      for (int64_t i = 0; i < bytes; ++i) bad += b[i] != byte(i);
      EXPECT_EQ(bad, 0);
    }
  // Typed data.
  std::vector<double> v(100, -1.0);
  if (rank == 0)
    for (int i = 0; i < 100; ++i) v[i] = i * 1.5;
  Buffer<double> d(*mem, v);
  c->broadcast(d.get(), static_cast<int64_t>(v.size() * sizeof(double)), 0);
  v = d.download();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(v[i], i * 1.5);
}

TEST_P(Conformance, BroadcastBadRoot) {
  Buffer<char> x(*mem, 1);
  try {
    c->broadcast(x.get(), 1, size);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "broadcast: root " + std::to_string(size))) << e.what();
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(rank) + " on host " + c->host()))
        << e.what();
  }
  EXPECT_THROW(c->broadcast(x.get(), 1, -1), CommError);
  c->broadcast(x.get(), 0, 0);  // nothing to do
}

TEST_P(Conformance, BarrierWaitsForTheLastRank) {
  c->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c->barrier();
  EXPECT_GE(seconds_since(t0), 0.18);
  for (int i = 0; i < 50; ++i) c->barrier();
}

TEST_P(Conformance, ExchangeModulo3) {
  // Rank r sends (r + p) % 3 rows to p: zero-row pairs included (rank 0 to itself).
  run_exchange(*c, *mem, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
}

TEST_P(Conformance, ExchangeWithASilentRank) {
  // The last rank (with size > 1) sends nothing at all but still calls exchange and receives;
  // the others also send to themselves.
  const int n = size;
  run_exchange(*c, *mem, [n](int s, int d) -> int64_t {
    if (n > 1 && s == n - 1) return 0;
    return (s + d) % 3 + 1;
  });
  // Only rank 0 receives (from everyone); nobody else gets anything.
  run_exchange(*c, *mem, [](int, int d) -> int64_t { return d == 0 ? 2 : 0; });
  // Nothing at all.
  run_exchange(*c, *mem, [](int, int) -> int64_t { return 0; });
}

TEST_P(Conformance, ExchangeLargeRows) {
  // Up to ~1.6 MB per peer: past the eager limit of every MPI transport.
  run_exchange(*c, *mem,
               [](int s, int d) { return static_cast<int64_t>((s + d) % 3) * 40000 + 1; });
  // Several exchanges in a row keep their rows apart.
  for (int k = 0; k < 20; ++k)
    run_exchange(*c, *mem,
                 [k](int s, int d) { return static_cast<int64_t>((s * 3 + d + k) % 4); });
}

TEST_P(Conformance, ExchangeBadArgs) {
  std::vector<int64_t> ok(size, 0), bad_size(size + 1, 0), negative(size, 0);
  negative[0] = -1;
  EXPECT_THROW(c->exchange(nullptr, bad_size, nullptr, ok, 4), CommError);
  EXPECT_THROW(c->exchange(nullptr, ok, nullptr, negative, 4), CommError);
  EXPECT_THROW(c->exchange(nullptr, ok, nullptr, ok, -4), CommError);
  // The rows a rank sends itself must match the rows it expects from itself.
  std::vector<int64_t> self(size, 0);
  self[rank] = 1;
  Buffer<int32_t> row(*mem, std::vector<int32_t>{1, 2});
  try {
    c->exchange(row.get(), self, row.get(), ok, 8);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "send_counts[" + std::to_string(rank) + "] = 1")) << e.what();
  }
  // Null buffers with rows to move.
  EXPECT_THROW(c->exchange(nullptr, self, row.get(), self, 8), CommError);
  // Rows to itself only: a copy within the rank.
  Buffer<int32_t> out(*mem, std::vector<int32_t>{0, 0});
  c->exchange(row.get(), self, out.get(), self, 8);
  EXPECT_EQ(out.download(), (std::vector<int32_t>{1, 2}));
  run_exchange(*c, *mem, [](int s, int d) { return static_cast<int64_t>((s + d) % 2); });  // usable
}

TEST_P(Conformance, TimeoutSettings) {
  EXPECT_EQ(c->timeout(), 60);
  EXPECT_THROW(c->set_timeout(0), std::invalid_argument);
  EXPECT_THROW(c->set_timeout(-1), std::invalid_argument);
  EXPECT_THROW(c->set_timeout(std::nan("")), std::invalid_argument);
  EXPECT_EQ(c->timeout(), 60);  // a refused value changes nothing
  c->set_timeout(std::numeric_limits<double>::infinity());  // no deadline
  c->barrier();
}

TEST_P(Conformance, CollectiveTimeoutMakesTheCommunicatorUnusable) {
  if (size < 2) GTEST_SKIP() << "needs a peer that is late";
  // Rank 0 enters a barrier on a second communicator that the others do not join in time.
  auto late = backend->make(*boot);
  late->set_timeout(rank == 0 ? 0.3 : 5);
  const std::string barrier = std::string(backend->traits().barrier_call) + " (barrier)";
  if (rank == 0) {
    try {
      late->barrier();
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "rank 0 on host " + late->host() + ": " + barrier +
                                    " timed out after 0.3 s"))
          << msg;
    }
    // The barrier may still be in flight: every further call is refused.
    expect_unusable(*late, *mem, barrier);
  }
  boot->barrier();
  if (backend->traits().abandoned_collectives_stay_posted) {
    // The others now join: the barrier rank 0 gave up on completes as rank 0 makes progress in
    // the next barrier, so nobody is left waiting.
    if (rank != 0) late->barrier();
    boot->barrier();
  }
  late.reset();
  Buffer<float> y(*mem, std::vector<float>{2.0f});
  c->allreduce(y.get(), 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(y.download()[0], 2.0f * size);
}

TEST_P(Conformance, CollectiveTimeoutNamesTheRankThatDidNotCome) {
  if (size < 2) GTEST_SKIP() << "needs a peer that does not come";
  // Every rank but the last enters an allreduce on a second communicator; their roll call names
  // the last one (conformance.h), and their communicator is unusable from then on.
  auto late = backend->make(*boot);
  const int absent = size - 1;
  Buffer<double> x(*mem, std::vector<double>(1000, rank + 1.0));
  allreduce_without_the_last_rank(*backend, *late, *boot, x);
  if (rank != absent) {
    expect_unusable(*late, *mem, std::string(backend->traits().allreduce_call) + " (allreduce of");
  }
  boot->barrier();
  if (backend->traits().abandoned_collectives_stay_posted) {
    // The absent rank joins, so that the abandoned allreduce completes before the communicator
    // goes (test_mpi_communicator.cpp checks what it leaves in the buffers).
    if (rank == absent) late->allreduce(x.get(), 1000, DType::F64, ReduceOp::Sum);
    boot->barrier();
  }
  late.reset();
  c->barrier();
}

// gtest runs the parameterised suites after the plain ones, and this test last in its suite: after
// every test that broke a communicator of its own.
TEST_P(Conformance, HealthyAtTheEnd) {
  check_allreduce<double>(*c, *mem, DType::F64, 513, 1.0);
  run_exchange(*c, *mem, [](int s, int d) { return static_cast<int64_t>((2 * s + d) % 3); });
  c->barrier();
  EXPECT_TRUE(everywhere(true));
}
