// The MPI backend: the conformance suite on host buffers, and what only the MPI backend does
// (the timeout from the environment, the cancelled exchange, the abandoned collective on the
// communicator's own buffer). Run alone and under mpirun -n 2 / -n 4, and against the backend
// built with 4 KiB chunks (tests/CMakeLists.txt), where every message of more than 4 KiB takes
// several MPI calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "adgnn/comm.h"
#include "conformance.h"

using namespace adgnn;
using namespace adgnn::commtest;

namespace {

class MpiBackend final : public Backend {
 public:
  MpiBackend()
      : Backend("mpi", Traits{/*barrier_call=*/"MPI_Ibarrier", /*allreduce_call=*/"MPI_Iallreduce",
                              /*roll_call_over_bootstrap=*/false,
                              /*abandoned_collectives_stay_posted=*/true}) {}
  std::unique_ptr<Communicator> make(Communicator& boot) override {
    (void)boot;
    return adgnn::make_mpi_communicator();
  }
};

using Mpi = BackendTest<MpiBackend>;

}  // namespace

ADGNN_CONFORMANCE(MpiBackend);

TEST_F(Mpi, TimeoutFromTheEnvironment) {
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

TEST_F(Mpi, ExchangeTimeoutCancelsAndRecovers) {
  if (size < 2) GTEST_SKIP() << "needs a peer that stays silent";
  // Rank 0 gives up on a row that rank 1 never sends; the message names the receive.
  const std::string msg = exchange_with_a_silent_peer(*c, *mem, 10.0);
  if (rank == 0) {
    EXPECT_TRUE(contains(msg, "MPI_Irecv of 1 rows from rank 1")) << msg;
  }
  // The receive was cancelled: the communicator still works, and a row sent now by rank 1 is
  // not taken for the one rank 0 gave up on.
  c->set_timeout(60);
  c->barrier();
  run_exchange(*c, *mem, [](int s, int d) { return static_cast<int64_t>((s + d) % 3); });
  run_exchange(*c, *mem, [](int s, int d) -> int64_t { return s == 1 && d == 0 ? 1 : 0; });
  Buffer<float> x(*mem, std::vector<float>{1.0f});
  c->allreduce(x.get(), 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(x.download()[0], static_cast<float>(size));
}

TEST_F(Mpi, AbandonedCollectiveCompletesOnTheCommunicatorsBuffer) {
  if (size < 2) GTEST_SKIP() << "needs a peer that does not come";
  // The ranks that came give up on the last one (conformance.h). When it joins later, the
  // allreduce they abandoned completes with the values they had passed in, on the buffer the
  // communicator keeps: their own buffers are not written.
  auto late = adgnn::make_mpi_communicator();
  const int absent = size - 1;
  Buffer<double> x(*mem, std::vector<double>(1000, rank + 1.0));
  allreduce_without_the_last_rank(*backend, *late, *boot, x);
  boot->barrier();
  // The absent rank now joins; the others' abandoned allreduce completes as they make progress
  // in the barrier below.
  if (rank == absent) {
    late->allreduce(x.get(), 1000, DType::F64, ReduceOp::Sum);
    const std::vector<double> sum = x.download();
    const double want = size * (size + 1) / 2.0;
    EXPECT_EQ(sum.front(), want);
    EXPECT_EQ(sum.back(), want);
  }
  boot->barrier();
  if (rank != absent) {
    const std::vector<double> mine = x.download();
    EXPECT_EQ(mine.front(), rank + 1.0);  // the caller's buffer was left alone
    EXPECT_EQ(mine.back(), rank + 1.0);
  }
  late.reset();
  boot->barrier();
}
