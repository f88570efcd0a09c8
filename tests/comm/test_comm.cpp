// The MPI communicator, run alone and under mpirun -n 2 / -n 4. Every received value is
// predictable from (source, destination, position) and checked (nccl-tests style). Tests use
// EXPECT rather than ASSERT around collectives, so a failing rank still takes part in them.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
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

class Comm : public ::testing::Test {
 protected:
  void SetUp() override {
    c = adgnn::make_mpi_communicator();
    c->set_timeout(60);  // a broken test fails in a minute instead of hanging
    rank = c->rank();
    size = c->size();
  }
  // True when `v` holds on every rank.
  bool everywhere(bool v) {
    int64_t x = v ? 1 : 0;
    c->allreduce(&x, 1, DType::I64, ReduceOp::Min);
    return x == 1;
  }
  std::unique_ptr<Communicator> c;
  int rank = 0, size = 1;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

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
    c.allreduce(v.data(), count, dt, op);
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

// Runs one exchange where src sends count(src, dst) rows to dst, filling and checking every word.
// A rank with nothing to send passes a null send buffer.
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
  std::vector<int32_t> recv(static_cast<size_t>(total_in * kWords), 0x7eadbeef);
  c.exchange(total_out ? send.data() : nullptr, sc, total_in ? recv.data() : nullptr, rc,
             kWords * sizeof(int32_t));
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

TEST(CommErrorTest, MessageNamesRankAndHost) {
  const CommError e(3, "node17", "MPI_Iallreduce timed out after 30 s");
  EXPECT_STREQ(e.what(), "rank 3 on host node17: MPI_Iallreduce timed out after 30 s");
  EXPECT_EQ(e.rank(), 3);
  EXPECT_EQ(e.host(), "node17");
  EXPECT_STREQ(CommError(-1, "", "x").what(), "rank ? on host ?: x");
}

TEST_F(Comm, RankSizeHost) {
  EXPECT_GE(size, 1);
  EXPECT_GE(rank, 0);
  EXPECT_LT(rank, size);
  EXPECT_GE(c->local_rank(), 0);
  EXPECT_LT(c->local_rank(), size);
  EXPECT_FALSE(c->host().empty());
  // Every rank agrees on the size and appears exactly once.
  int64_t mn = size, mx = size;
  c->allreduce(&mn, 1, DType::I64, ReduceOp::Min);
  c->allreduce(&mx, 1, DType::I64, ReduceOp::Max);
  EXPECT_EQ(mn, size);
  EXPECT_EQ(mx, size);
  std::vector<int64_t> seen(size, 0);
  seen[rank] = 1;
  c->allreduce(seen.data(), size, DType::I64, ReduceOp::Sum);
  for (int p = 0; p < size; ++p) EXPECT_EQ(seen[p], 1) << "rank " << p;
  // When every rank runs on the host of rank 0, local ranks are the ranks.
  std::string host0 = c->host();
  std::vector<char> buf(256, 0);
  std::strncpy(buf.data(), host0.c_str(), buf.size() - 1);
  c->broadcast(buf.data(), static_cast<int64_t>(buf.size()), 0);
  if (everywhere(std::string(buf.data()) == c->host())) {
    EXPECT_EQ(c->local_rank(), rank);
  }
}

TEST_F(Comm, AllreduceF32) {
  for (int64_t n : {1, 7, 1000, 1 << 18}) check_allreduce<float>(*c, DType::F32, n, 0.5f);
}

TEST_F(Comm, AllreduceF64) {
  for (int64_t n : {1, 1000, 1 << 16}) check_allreduce<double>(*c, DType::F64, n, 0.25);
}

TEST_F(Comm, AllreduceI64) {
  // Values beyond 32 bits.
  for (int64_t n : {1, 1000, 1 << 16})
    check_allreduce<int64_t>(*c, DType::I64, n, int64_t{1} << 33);
}

TEST_F(Comm, AllreduceZeroCountAndBadArgs) {
  c->allreduce(nullptr, 0, DType::F32, ReduceOp::Sum);  // nothing to do
  EXPECT_THROW(c->allreduce(nullptr, -1, DType::F32, ReduceOp::Sum), CommError);
  EXPECT_THROW(c->allreduce(nullptr, 4, DType::F32, ReduceOp::Sum), CommError);
  float x = 1;
  c->allreduce(&x, 1, DType::F32, ReduceOp::Sum);  // still usable
  EXPECT_EQ(x, static_cast<float>(size));
}

TEST_F(Comm, BroadcastFromLastRank) {
  const int root = size - 1;
  for (int64_t bytes : {int64_t{1}, int64_t{1001}, int64_t{3} << 20}) {
    SCOPED_TRACE("bytes " + std::to_string(bytes));
    std::vector<unsigned char> b(static_cast<size_t>(bytes), 0xEE);
    if (rank == root)
      for (int64_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>((i * 7 + root) & 0xff);
    c->broadcast(b.data(), bytes, root);
    int64_t bad = 0;
    for (int64_t i = 0; i < bytes; ++i)
      if (b[i] != static_cast<unsigned char>((i * 7 + root) & 0xff)) ++bad;
    EXPECT_EQ(bad, 0);
  }
  // Root 0 as well, with typed data.
  std::vector<double> d(100, -1.0);
  if (rank == 0)
    for (int i = 0; i < 100; ++i) d[i] = i * 1.5;
  c->broadcast(d.data(), static_cast<int64_t>(d.size() * sizeof(double)), 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d[i], i * 1.5);
}

TEST_F(Comm, BroadcastBadRoot) {
  char x = 0;
  try {
    c->broadcast(&x, 1, size);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "broadcast: root " + std::to_string(size))) << e.what();
    EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(rank) + " on host " + c->host()))
        << e.what();
  }
  EXPECT_THROW(c->broadcast(&x, 1, -1), CommError);
  c->broadcast(&x, 0, 0);  // nothing to do
}

TEST_F(Comm, BarrierWaitsForTheLastRank) {
  c->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c->barrier();
  EXPECT_GE(seconds_since(t0), 0.18);
  for (int i = 0; i < 50; ++i) c->barrier();
}

TEST_F(Comm, ExchangeModulo3) {
  // Rank r sends (r + p) % 3 rows to p: zero-row pairs included (rank 0 to itself).
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
}

TEST_F(Comm, ExchangeWithASilentRank) {
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

TEST_F(Comm, ExchangeLargeRows) {
  // Up to ~1.6 MB per peer: past the eager limit of every transport.
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3) * 40000 + 1; });
  // Several exchanges in a row keep their rows apart.
  for (int k = 0; k < 20; ++k)
    run_exchange(*c, [k](int s, int d) { return static_cast<int64_t>((s * 3 + d + k) % 4); });
}

TEST_F(Comm, ExchangeBadArgs) {
  std::vector<int64_t> ok(size, 0), bad_size(size + 1, 0), negative(size, 0);
  negative[0] = -1;
  EXPECT_THROW(c->exchange(nullptr, bad_size, nullptr, ok, 4), CommError);
  EXPECT_THROW(c->exchange(nullptr, ok, nullptr, negative, 4), CommError);
  EXPECT_THROW(c->exchange(nullptr, ok, nullptr, ok, -4), CommError);
  // The rows a rank sends itself must match the rows it expects from itself.
  std::vector<int64_t> self(size, 0);
  self[rank] = 1;
  int32_t row[2] = {1, 2};
  try {
    c->exchange(row, self, row, ok, 8);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "send_counts[" + std::to_string(rank) + "] = 1")) << e.what();
  }
  // Null buffers with rows to move.
  EXPECT_THROW(c->exchange(nullptr, self, row, self, 8), CommError);
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 2); });  // usable
}

TEST_F(Comm, TimeoutSettings) {
  EXPECT_EQ(c->timeout(), 60);
  EXPECT_THROW(c->set_timeout(0), std::invalid_argument);
  EXPECT_THROW(c->set_timeout(-1), std::invalid_argument);
  EXPECT_THROW(c->set_timeout(std::nan("")), std::invalid_argument);
  c->set_timeout(std::numeric_limits<double>::infinity());  // no deadline
  c->barrier();
  // The environment sets the default of new communicators (same value on every rank).
  ::unsetenv("ADGNN_COMM_TIMEOUT");
  EXPECT_EQ(adgnn::make_mpi_communicator()->timeout(), 300);
  ::setenv("ADGNN_COMM_TIMEOUT", "12.5", 1);
  EXPECT_EQ(adgnn::make_mpi_communicator()->timeout(), 12.5);
  ::setenv("ADGNN_COMM_TIMEOUT", "soon", 1);
  EXPECT_THROW(adgnn::make_mpi_communicator(), std::invalid_argument);  // before any MPI call
  ::setenv("ADGNN_COMM_TIMEOUT", "-3", 1);
  EXPECT_THROW(adgnn::make_mpi_communicator(), std::invalid_argument);
  ::unsetenv("ADGNN_COMM_TIMEOUT");
}

TEST_F(Comm, ExchangeTimeoutCancelsAndRecovers) {
  if (size < 2) GTEST_SKIP() << "needs a peer that stays silent";
  // Rank 0 expects a row from rank 1 that rank 1 never sends; every other rank calls exchange
  // with nothing to do and returns at once.
  c->set_timeout(0.5);
  std::vector<int64_t> sc(size, 0), rc(size, 0);
  if (rank == 0) rc[1] = 1;
  int64_t in[2] = {0, 0};
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == 0) {
    try {
      c->exchange(nullptr, sc, in, rc, sizeof(in));
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      const double waited = seconds_since(t0);
      EXPECT_GE(waited, 0.45);
      EXPECT_LT(waited, 10.0);
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "rank 0 on host " + c->host() + ": ")) << msg;
      EXPECT_TRUE(contains(msg, "timed out after 0.5 s")) << msg;
      EXPECT_TRUE(contains(msg, "MPI_Irecv of 1 rows from rank 1")) << msg;
      EXPECT_EQ(e.rank(), 0);
      EXPECT_EQ(e.host(), c->host());
    }
  } else {
    c->exchange(nullptr, sc, nullptr, rc, sizeof(in));
  }
  // The receive was cancelled: the communicator still works, and a row sent now by rank 1 is
  // not taken for the one rank 0 gave up on.
  c->set_timeout(60);
  c->barrier();
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
  run_exchange(*c, [](int s, int d) -> int64_t { return s == 1 && d == 0 ? 1 : 0; });
  float x = 1;
  c->allreduce(&x, 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(x, static_cast<float>(size));
}

TEST_F(Comm, CollectiveTimeoutMakesTheCommunicatorUnusable) {
  if (size < 2) GTEST_SKIP() << "needs a peer that is late";
  // Rank 0 enters a barrier on a second communicator that the others join only later.
  auto late = adgnn::make_mpi_communicator();
  late->set_timeout(rank == 0 ? 0.3 : 60);
  if (rank == 0) {
    try {
      late->barrier();
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "rank 0 on host " + late->host() + ": MPI_Ibarrier")) << msg;
      EXPECT_TRUE(contains(msg, "timed out after 0.3 s")) << msg;
    }
    // The barrier may still complete later: every further call is refused.
    float x = 1;
    try {
      late->allreduce(&x, 1, DType::F32, ReduceOp::Sum);
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable")) << e.what();
      EXPECT_TRUE(contains(e.what(), "MPI_Ibarrier")) << e.what();
    }
  }
  c->barrier();
  // The others now join: the barrier rank 0 gave up on completes as rank 0 makes progress in
  // the next barrier, so nobody is left waiting.
  if (rank != 0) late->barrier();
  c->barrier();
  late.reset();
  float y = 2;
  c->allreduce(&y, 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(y, 2.0f * size);
}

TEST_F(Comm, CollectiveTimeoutNamesTheRankThatDidNotCome) {
  if (size < 2) GTEST_SKIP() << "needs a peer that does not come";
  // Every rank but the last enters an allreduce on a second communicator; the last joins only
  // after the others have given up on it. Their roll call names it, and their own buffers are
  // not written when the abandoned allreduce completes later (it runs on the communicator's
  // buffer, which outlives the timeout).
  auto late = adgnn::make_mpi_communicator();
  const int absent = size - 1;
  late->set_timeout(rank == absent ? 60 : 1.0);
  std::vector<double> x(1000, rank + 1.0);
  if (rank != absent) {
    try {
      late->allreduce(x.data(), static_cast<int64_t>(x.size()), DType::F64, ReduceOp::Sum);
      ADD_FAILURE() << "no CommError";
    } catch (const CommError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "MPI_Iallreduce (allreduce of 1000 F64 Sum) timed out after 1 s"))
          << msg;
      EXPECT_TRUE(contains(msg, "roll call: ")) << msg;
      EXPECT_TRUE(contains(msg, "rank " + std::to_string(absent) + " on host ")) << msg;
      EXPECT_TRUE(contains(msg, "did not answer within 1 s")) << msg;
      EXPECT_FALSE(contains(msg, "rank " + std::to_string(rank) + " on host " + c->host() +
                                     " did not answer")) << msg;
    }
  }
  c->barrier();
  // The absent rank now joins; the others' abandoned allreduce completes as they make progress
  // in the barrier below, with the values they had passed in.
  if (rank == absent) {
    late->allreduce(x.data(), static_cast<int64_t>(x.size()), DType::F64, ReduceOp::Sum);
    const double want = size * (size + 1) / 2.0;
    EXPECT_EQ(x.front(), want);
    EXPECT_EQ(x.back(), want);
  }
  c->barrier();
  if (rank != absent) {
    EXPECT_EQ(x.front(), rank + 1.0);  // the caller's buffer was left alone
    EXPECT_EQ(x.back(), rank + 1.0);
  }
  late.reset();
  c->barrier();
}

TEST_F(Comm, HealthyAfterTimeouts) {
  check_allreduce<double>(*c, DType::F64, 513, 1.0);
  run_exchange(*c, [](int s, int d) { return static_cast<int64_t>((2 * s + d) % 3); });
  c->barrier();
}
