// Under torchrun (tests/CMakeLists.txt starts it with 2 workers, with the agent's store and with
// rank 0 serving one): the ranks the launcher gives, and the store communicator they meet in,
// exactly as `adgnn train` under torchrun builds its NCCL communicator's bootstrap.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "adgnn/launch.h"
#include "adgnn/store_communicator.h"

using namespace adgnn;

TEST(Torchrun, RanksMeetInTheLaunchersStore) {
  if (!std::getenv("TORCHELASTIC_RUN_ID")) GTEST_SKIP() << "not started by torchrun";
  const LaunchInfo li = detect_launch({});
  ASSERT_EQ(li.source, "torchrun");
  ASSERT_GT(li.size, 1) << "start it with --nproc_per_node 2 or more";
  EXPECT_EQ(li.rank, std::atoi(std::getenv("RANK")));
  EXPECT_EQ(li.local_rank, std::atoi(std::getenv("LOCAL_RANK")));
  EXPECT_EQ(li.local_size, std::atoi(std::getenv("LOCAL_WORLD_SIZE")));
  const char* want_agent = std::getenv("EXPECT_AGENT_STORE");
  ASSERT_NE(want_agent, nullptr) << "tests/CMakeLists.txt says which store the launch uses";
  EXPECT_EQ(li.store_served_by_agent, std::string(want_agent) == "1");
  auto c = make_launch_store_communicator(li);
  EXPECT_EQ(c->rank(), li.rank);
  EXPECT_EQ(c->size(), li.size);
  std::vector<int64_t> seen(li.size, 0);
  seen[li.rank] = li.rank + 1;
  c->allreduce(seen.data(), li.size, DType::I64, ReduceOp::Sum);
  for (int p = 0; p < li.size; ++p) EXPECT_EQ(seen[p], p + 1);
  // Each rank sends one row to the next.
  std::vector<int64_t> sc(li.size, 0), rc(li.size, 0);
  sc[(li.rank + 1) % li.size] = 1;
  rc[(li.rank + li.size - 1) % li.size] = 1;
  const int64_t out = 100 + li.rank;
  int64_t in = -1;
  c->exchange(&out, sc, &in, rc, sizeof(int64_t));
  EXPECT_EQ(in, 100 + (li.rank + li.size - 1) % li.size);
  c->barrier();
}
