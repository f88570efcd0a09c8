// The TCPStore backend: the conformance suite on host buffers, with the store served by rank 0 on
// a free port (told to the others over MPI, the harness's bootstrap), and what only this backend
// does: the rendezvous that names the ranks that did not join, a store that is not there, the
// exchange that times out and recovers, a late rank completing a collective the others gave up.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "adgnn/comm.h"
#include "adgnn/launch.h"
#include "adgnn/store_communicator.h"
#include "conformance.h"

using namespace adgnn;
using namespace adgnn::commtest;

namespace {

// A store communicator over the ranks of `boot`: rank 0 serves on a free port and broadcasts it.
std::unique_ptr<Communicator> make_over(Communicator& boot, const std::string& prefix) {
  StoreOptions o;
  o.host = "127.0.0.1";
  o.rank = boot.rank();
  o.size = boot.size();
  o.local_rank = boot.local_rank();
  o.prefix = prefix;
  int port = 0;
  if (boot.rank() == 0) {
    o.serve = true;
    return make_store_communicator(o, [&](int p) {
      port = p;
      boot.broadcast(&port, sizeof port, 0);
    });
  }
  boot.broadcast(&port, sizeof port, 0);
  o.port = port;
  return make_store_communicator(o);
}

class StoreBackend final : public Backend {
 public:
  StoreBackend()
      : Backend("store", Traits{/*barrier_call=*/"TCPStore::wait", /*allreduce_call=*/"TCPStore::wait",
                                /*roll_call_over_bootstrap=*/false,
                                /*abandoned_collectives_stay_posted=*/true}) {}
  std::unique_ptr<Communicator> make(Communicator& boot) override {
    return make_over(boot, "test" + std::to_string(made_++));
  }

 private:
  int made_ = 0;
};

using Store = BackendTest<StoreBackend>;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

ADGNN_CONFORMANCE(StoreBackend);

TEST_F(Store, RendezvousNamesTheRanksThatDidNotJoin) {
  // One process serves a store for three ranks; ranks 1 and 2 never come.
  if (rank != 0) GTEST_SKIP() << "one process alone";
  ScopedEnv timeout("ADGNN_COMM_TIMEOUT", "0.5");
  StoreOptions o;
  o.serve = true;
  o.size = 3;
  o.prefix = "alone";
  try {
    make_store_communicator(o);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "joining the store at")) << msg;
    EXPECT_TRUE(contains(msg, "timed out after 0.5 s waiting for rank 1 on host ?, rank 2 on host ?")) << msg;
    EXPECT_EQ(e.rank(), 0);
  }
}

TEST_F(Store, AStoreThatIsNotThereFailsInTime) {
  if (rank != 0) GTEST_SKIP() << "one process alone";
  ScopedEnv timeout("ADGNN_COMM_TIMEOUT", "1");
  // A port nobody listens on: the one a store just gave up.
  int port = 0;
  {
    StoreOptions o;
    o.serve = true;
    o.prefix = "gone";
    const auto gone = make_store_communicator(o, [&](int p) { port = p; });
  }
  ASSERT_GT(port, 0);
  StoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.size = 2;
  o.rank = 1;
  o.prefix = "gone";
  const auto t0 = std::chrono::steady_clock::now();
  try {
    make_store_communicator(o);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "the store at 127.0.0.1:" + std::to_string(port) + " is unreachable")) << msg;
    EXPECT_EQ(e.rank(), 1);
  }
  EXPECT_LT(seconds_since(t0), 30);
}

TEST_F(Store, BadOptions) {
  StoreOptions o;
  o.rank = 2;
  o.size = 2;
  EXPECT_THROW(make_store_communicator(o), std::invalid_argument);
  o.rank = 0;
  o.port = 0;  // a client needs the server's port
  o.host = "127.0.0.1";
  EXPECT_THROW(make_store_communicator(o), std::invalid_argument);
  o.port = 70000;
  EXPECT_THROW(make_store_communicator(o), std::invalid_argument);
  LaunchInfo not_torchrun;
  not_torchrun.source = "mpirun";
  EXPECT_THROW(make_launch_store_communicator(not_torchrun), std::invalid_argument);
}

TEST_F(Store, ExchangeTimeoutNamesThePeerAndRecovers) {
  if (size < 2) GTEST_SKIP() << "needs a peer that stays silent";
  const std::string msg = exchange_with_a_silent_peer(*c, *mem, 10.0);
  if (rank == 0) {
    EXPECT_TRUE(contains(msg, "exchange of 16-byte rows) timed out after 0.5 s waiting for rank 1 on host "))
        << msg;
  }
  // Nothing was left half done: the communicator still works.
  c->set_timeout(60);
  c->barrier();
  run_exchange(*c, *mem, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
  Buffer<float> x(*mem, std::vector<float>{1.0f});
  c->allreduce(x.get(), 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(x.download()[0], static_cast<float>(size));
}

TEST_F(Store, ALateRankCompletesTheCollectiveTheOthersGaveUp) {
  if (size < 2) GTEST_SKIP() << "needs a peer that does not come";
  auto late = make_over(*boot, "late");
  const int absent = size - 1;
  Buffer<double> x(*mem, std::vector<double>(1000, rank + 1.0));
  allreduce_without_the_last_rank(*backend, *late, *boot, x);
  boot->barrier();
  // The others' parts are in the store: the absent rank's allreduce completes with every rank's.
  if (rank == absent) {
    late->allreduce(x.get(), 1000, DType::F64, ReduceOp::Sum);
    const std::vector<double> sum = x.download();
    const double want = size * (size + 1) / 2.0;
    EXPECT_EQ(sum.front(), want);
    EXPECT_EQ(sum.back(), want);
  } else {
    const std::vector<double> mine = x.download();
    EXPECT_EQ(mine.front(), rank + 1.0);  // the caller's buffer was left alone
  }
  boot->barrier();
  late.reset();
  boot->barrier();
}
