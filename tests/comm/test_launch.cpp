// Launch environment: each launcher's variables, flags over the environment, torchrun over MPI
// launchers over Slurm, and one-line errors naming the variable or flag for bad values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "adgnn/launch.h"

using adgnn::detect_launch;
using adgnn::LaunchInfo;
using adgnn::LaunchOverrides;

namespace {

const char* const kVars[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"};

// Every test starts from an environment without launcher variables (the test may itself run
// under mpirun or inside a Slurm job) and gets the original back afterwards.
class Launch : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

  static void ompi(const char* rank, const char* size, const char* local, const char* local_size) {
    set("OMPI_COMM_WORLD_RANK", rank);
    set("OMPI_COMM_WORLD_SIZE", size);
    set("OMPI_COMM_WORLD_LOCAL_RANK", local);
    set("OMPI_COMM_WORLD_LOCAL_SIZE", local_size);
  }
  // What torchrun gives each worker (torch.distributed.run, --nproc_per_node with the agent's store).
  static void torchrun(const char* rank, const char* size, const char* local, const char* local_size) {
    set("RANK", rank);
    set("WORLD_SIZE", size);
    set("LOCAL_RANK", local);
    set("LOCAL_WORLD_SIZE", local_size);
    set("MASTER_ADDR", "node3");
    set("MASTER_PORT", "29500");
    set("TORCHELASTIC_USE_AGENT_STORE", "True");
    set("TORCHELASTIC_RUN_ID", "job7");
    set("TORCHELASTIC_RESTART_COUNT", "2");
  }
  static void slurm(const char* procid, const char* ntasks, const char* localid) {
    set("SLURM_PROCID", procid);
    set("SLURM_NTASKS", ntasks);
    set("SLURM_LOCALID", localid);
  }

 private:
  std::map<std::string, std::string> saved_;
};

LaunchOverrides flags(int rank, int size, int local = -1) { return {rank, size, local}; }

// The message of the std::invalid_argument that detect_launch throws (empty when it does not).
std::string error_of(const LaunchOverrides& f = {}) {
  try {
    detect_launch(f);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

void expect_info(const LaunchInfo& i, int rank, int size, int local, int local_size,
                 const std::string& source) {
  EXPECT_EQ(i.rank, rank);
  EXPECT_EQ(i.size, size);
  EXPECT_EQ(i.local_rank, local);
  EXPECT_EQ(i.local_size, local_size);
  EXPECT_EQ(i.source, source);
}

TEST_F(Launch, NothingIsASingleProcess) {
  const LaunchInfo i = detect_launch({});
  expect_info(i, 0, 1, 0, 1, "single");
  EXPECT_FALSE(adgnn::launched_multi(i));
}

TEST_F(Launch, OpenMpi) {
  ompi("5", "8", "1", "4");
  const LaunchInfo i = detect_launch({});
  expect_info(i, 5, 8, 1, 4, "mpirun");
  EXPECT_TRUE(adgnn::launched_multi(i));
}

TEST_F(Launch, Torchrun) {
  torchrun("5", "8", "1", "4");
  const LaunchInfo i = detect_launch({});
  expect_info(i, 5, 8, 1, 4, "torchrun");
  EXPECT_EQ(i.store_host, "node3");
  EXPECT_EQ(i.store_port, 29500);
  EXPECT_TRUE(i.store_served_by_agent);
  EXPECT_EQ(i.store_prefix, "adgnn/job7/2");
  // Without the agent's store rank 0 serves it; another attempt meets under other keys.
  set("TORCHELASTIC_USE_AGENT_STORE", "False");
  set("TORCHELASTIC_RESTART_COUNT", "3");
  const LaunchInfo j = detect_launch({});
  EXPECT_FALSE(j.store_served_by_agent);
  EXPECT_EQ(j.store_prefix, "adgnn/job7/3");
  // Other launchers leave no store.
  for (const char* v : {"RANK", "WORLD_SIZE"}) unsetenv(v);
  ompi("5", "8", "1", "4");
  EXPECT_TRUE(detect_launch({}).store_host.empty());
}

TEST_F(Launch, TorchrunWinsOverTheLaunchersAroundIt) {
  // srun torchrun ...: the workers inherit the node's SLURM_PROCID; mpirun torchrun ...: OMPI_*.
  slurm("1", "2", "0");
  ompi("1", "2", "0", "1");
  torchrun("6", "8", "2", "4");
  expect_info(detect_launch({}), 6, 8, 2, 4, "torchrun");
}

TEST_F(Launch, TorchrunWithOneRankNeedsNoStore) {
  set("RANK", "0");
  set("WORLD_SIZE", "1");
  const LaunchInfo i = detect_launch({});
  expect_info(i, 0, 1, 0, 0, "torchrun");
  EXPECT_FALSE(adgnn::launched_multi(i));
}

TEST_F(Launch, TorchrunBadValues) {
  torchrun("1", "2", "1", "2");
  set("MASTER_PORT", "abc");
  EXPECT_EQ(error_of(), "MASTER_PORT=abc: not an integer");
  set("MASTER_PORT", "70000");
  EXPECT_EQ(error_of(), "MASTER_PORT=70000: not a port number (1-65535)");
  set("MASTER_PORT", "0");
  EXPECT_EQ(error_of(), "MASTER_PORT=0: not a port number (1-65535)");
  unsetenv("MASTER_PORT");
  EXPECT_EQ(error_of(), "MASTER_PORT: not set although RANK=1 and WORLD_SIZE=2 are (torchrun sets it)");
  set("MASTER_PORT", "29500");
  unsetenv("MASTER_ADDR");
  EXPECT_EQ(error_of(), "MASTER_ADDR: not set although RANK=1 and WORLD_SIZE=2 are (torchrun sets it)");
  set("MASTER_ADDR", "node3");
  set("LOCAL_RANK", "2");
  EXPECT_EQ(error_of(), "LOCAL_RANK=2: must be below WORLD_SIZE=2");
  set("LOCAL_RANK", "1");
  set("LOCAL_WORLD_SIZE", "1");
  EXPECT_EQ(error_of(), "LOCAL_RANK=1: must be below LOCAL_WORLD_SIZE=1 (ranks on this host)");
  set("LOCAL_WORLD_SIZE", "2");
  set("TORCHELASTIC_RESTART_COUNT", "x");
  EXPECT_EQ(error_of(), "TORCHELASTIC_RESTART_COUNT=x: not an integer");
  set("TORCHELASTIC_RESTART_COUNT", "0");
  set("RANK", "2");
  EXPECT_EQ(error_of(), "RANK=2: must be below WORLD_SIZE=2");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(error_of(), "WORLD_SIZE: not set although RANK=2 is");
}

TEST_F(Launch, OpenMpiWithoutLocalVariablesUsesTheRank) {
  set("OMPI_COMM_WORLD_RANK", "6");
  set("OMPI_COMM_WORLD_SIZE", "8");
  expect_info(detect_launch({}), 6, 8, 6, 0, "mpirun");
}

TEST_F(Launch, Srun) {
  slurm("6", "8", "2");
  set("SLURM_NTASKS_PER_NODE", "4");
  expect_info(detect_launch({}), 6, 8, 2, 4, "srun");
}

TEST_F(Launch, SrunLocalSizeFromTheStepsTasksPerNode) {
  // Nodes with 4, 4 and 3 tasks; this is node 2. The step's list wins over the job's.
  slurm("9", "11", "1");
  set("SLURM_STEP_TASKS_PER_NODE", "4(x2),3");
  set("SLURM_TASKS_PER_NODE", "8(x3)");
  set("SLURM_NODEID", "2");
  expect_info(detect_launch({}), 9, 11, 1, 3, "srun");
  set("SLURM_NODEID", "0");
  set("SLURM_LOCALID", "3");
  EXPECT_EQ(detect_launch({}).local_size, 4);
  // A uniform list needs no node id.
  unsetenv("SLURM_NODEID");
  set("SLURM_STEP_TASKS_PER_NODE", "4(x2),4");
  EXPECT_EQ(detect_launch({}).local_size, 4);
  // A non-uniform list without a node id: unknown.
  set("SLURM_STEP_TASKS_PER_NODE", "4,3");
  EXPECT_EQ(detect_launch({}).local_size, 0);
}

TEST_F(Launch, SrunJobLevelCountsAreCappedAtTheStep) {
  // srun -n 1 inside a 4-tasks-per-node job, on a Slurm that sets only the job's counts.
  slurm("0", "1", "0");
  set("SLURM_TASKS_PER_NODE", "4");
  expect_info(detect_launch({}), 0, 1, 0, 1, "srun");
  unsetenv("SLURM_TASKS_PER_NODE");
  set("SLURM_NTASKS_PER_NODE", "4");
  expect_info(detect_launch({}), 0, 1, 0, 1, "srun");
}

TEST_F(Launch, BatchScriptWithoutSrunIsASingleProcess) {
  // sbatch without --ntasks: the batch shell has SLURM_PROCID=0 but no SLURM_NTASKS.
  set("SLURM_PROCID", "0");
  set("SLURM_LOCALID", "0");
  expect_info(detect_launch({}), 0, 1, 0, 1, "single");
}

TEST_F(Launch, Mpich) {
  set("PMI_RANK", "3");
  set("PMI_SIZE", "4");
  set("MPI_LOCALRANKID", "1");
  set("MPI_LOCALNRANKS", "2");
  expect_info(detect_launch({}), 3, 4, 1, 2, "mpirun");
}

TEST_F(Launch, PmiUnderSrunTakesSlurmsLocalRank) {
  // srun --mpi=pmi2: PMI_RANK/PMI_SIZE agree with SLURM_PROCID/SLURM_NTASKS; no MPI_LOCALRANKID.
  set("PMI_RANK", "5");
  set("PMI_SIZE", "8");
  slurm("5", "8", "1");
  set("SLURM_STEP_TASKS_PER_NODE", "4(x2)");
  expect_info(detect_launch({}), 5, 8, 1, 4, "srun");
}

TEST_F(Launch, MpiLaunchersWinOverInheritedSlurmVariables) {
  // mpirun inside an allocation: its ranks inherit the srun-launched daemon's SLURM_PROCID.
  slurm("1", "2", "0");
  ompi("6", "8", "2", "4");
  expect_info(detect_launch({}), 6, 8, 2, 4, "mpirun");
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    unsetenv(v);
  set("PMI_RANK", "6");
  set("PMI_SIZE", "8");
  set("MPI_LOCALRANKID", "2");
  expect_info(detect_launch({}), 6, 8, 2, 0, "mpirun");
}

TEST_F(Launch, FlagsWithoutALauncherShareOneHost) {
  expect_info(detect_launch(flags(2, 4)), 2, 4, 2, 4, "flags");
  expect_info(detect_launch(flags(2, 4, 0)), 2, 4, 0, 0, "flags");
  // Only --local-rank: still one process.
  expect_info(detect_launch(flags(-1, -1, 0)), 0, 1, 0, 0, "single");
}

TEST_F(Launch, FlagsOverrideTheEnvironment) {
  ompi("5", "8", "1", "4");
  // Both --rank and --world-size: the environment is not read at all.
  expect_info(detect_launch(flags(1, 2)), 1, 2, 1, 2, "flags");
  set("OMPI_COMM_WORLD_RANK", "five");
  expect_info(detect_launch(flags(1, 2, 0)), 1, 2, 0, 0, "flags");
  set("OMPI_COMM_WORLD_RANK", "5");
  // One flag alone replaces one value and keeps the launcher's others.
  expect_info(detect_launch(flags(-1, -1, 3)), 5, 8, 3, 4, "mpirun");
  expect_info(detect_launch(flags(7, -1)), 7, 8, 1, 4, "flags");
  slurm("6", "8", "2");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  expect_info(detect_launch(flags(-1, 16)), 6, 16, 2, 0, "flags");
}

TEST_F(Launch, BadEnvironmentValues) {
  slurm("abc", "4", "0");
  EXPECT_EQ(error_of(), "SLURM_PROCID=abc: not an integer");
  for (const char* v : {"", "1.5", " 1", "1 ", "+1", "0x1", "-", "1e3"}) {
    set("SLURM_PROCID", v);
    EXPECT_EQ(error_of(), std::string("SLURM_PROCID=") + v + ": not an integer") << "'" << v << "'";
  }
  set("SLURM_PROCID", "99999999999");
  EXPECT_EQ(error_of(), "SLURM_PROCID=99999999999: out of range");
  set("SLURM_PROCID", "99999999999999999999999");
  EXPECT_EQ(error_of(), "SLURM_PROCID=99999999999999999999999: out of range");
  set("SLURM_PROCID", "4");
  EXPECT_EQ(error_of(), "SLURM_PROCID=4: must be below SLURM_NTASKS=4");
  set("SLURM_PROCID", "-1");
  EXPECT_EQ(error_of(), "SLURM_PROCID=-1: must be non-negative");
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "0");
  EXPECT_EQ(error_of(), "SLURM_NTASKS=0: must be at least 1");
  set("SLURM_NTASKS", "4");
  set("SLURM_LOCALID", "x");
  EXPECT_EQ(error_of(), "SLURM_LOCALID=x: not an integer");
  set("SLURM_LOCALID", "2");
  set("SLURM_NTASKS_PER_NODE", "2");
  EXPECT_EQ(error_of(), "SLURM_LOCALID=2: must be below SLURM_NTASKS_PER_NODE=2 (ranks on this host)");
  unsetenv("SLURM_NTASKS_PER_NODE");
  for (const char* list : {"4(x2", "4(x)", "x", "4,,3", "0", "4(x0)", "4(2)"}) {
    set("SLURM_STEP_TASKS_PER_NODE", list);
    EXPECT_EQ(error_of(), std::string("SLURM_STEP_TASKS_PER_NODE=") + list +
                              ": not a task count list like 4(x2),3")
        << list;
  }
  set("SLURM_STEP_TASKS_PER_NODE", "2,2");
  set("SLURM_NODEID", "0");
  set("SLURM_LOCALID", "1");
  EXPECT_EQ(error_of(), "");
  set("SLURM_STEP_TASKS_PER_NODE", "2,1");
  set("SLURM_NODEID", "2");
  EXPECT_EQ(error_of(), "SLURM_NODEID=2: must be below the 2 nodes of SLURM_STEP_TASKS_PER_NODE=2,1");
  set("SLURM_STEP_TASKS_PER_NODE", "8");
  EXPECT_EQ(error_of(), "SLURM_STEP_TASKS_PER_NODE=8: must not exceed SLURM_NTASKS=4");
}

TEST_F(Launch, IncompleteLauncherVariables) {
  set("OMPI_COMM_WORLD_RANK", "1");
  EXPECT_EQ(error_of(), "OMPI_COMM_WORLD_SIZE: not set although OMPI_COMM_WORLD_RANK=1 is");
  unsetenv("OMPI_COMM_WORLD_RANK");
  set("PMI_SIZE", "2");
  EXPECT_EQ(error_of(), "PMI_RANK: not set although PMI_SIZE=2 is");
  set("PMI_RANK", "1");
  set("MPI_LOCALNRANKS", "0");
  EXPECT_EQ(error_of(), "MPI_LOCALNRANKS=0: must be at least 1");
  set("MPI_LOCALNRANKS", "3");
  EXPECT_EQ(error_of(), "MPI_LOCALNRANKS=3: must not exceed PMI_SIZE=2");
  // No local rank but a local size: rank mod local size, as under block placement.
  set("MPI_LOCALNRANKS", "1");
  expect_info(detect_launch({}), 1, 2, 0, 1, "mpirun");
  set("MPI_LOCALRANKID", "1");
  EXPECT_EQ(error_of(), "MPI_LOCALRANKID=1: must be below MPI_LOCALNRANKS=1 (ranks on this host)");
}

TEST_F(Launch, BadFlags) {
  EXPECT_EQ(error_of(flags(3, 2)), "--rank 3: must be below --world-size 2");
  EXPECT_EQ(error_of(flags(0, 0)), "--world-size 0: must be at least 1");
  EXPECT_EQ(error_of(flags(-2, 2)), "--rank -2: must be non-negative");
  EXPECT_EQ(error_of(flags(0, -5)), "--world-size -5: must be non-negative");
  EXPECT_EQ(error_of(flags(0, 2, -3)), "--local-rank -3: must be non-negative");
  EXPECT_EQ(error_of(flags(1, -1)), "--rank 1: needs --world-size (no launcher variables found)");
  EXPECT_EQ(error_of(flags(-1, 2)), "--world-size 2: needs --rank (no launcher variables found)");
  EXPECT_EQ(error_of(flags(0, 2, 2)), "--local-rank 2: must be below --world-size 2");
  EXPECT_EQ(error_of(flags(-1, -1, 1)),
            "--local-rank 1: must be below the world size 1 (no launcher, no --world-size)");
  // Flags against the environment: the messages name both sides.
  ompi("5", "8", "1", "4");
  EXPECT_EQ(error_of(flags(-1, 4)), "OMPI_COMM_WORLD_RANK=5: must be below --world-size 4");
  EXPECT_EQ(error_of(flags(9, -1)), "--rank 9: must be below OMPI_COMM_WORLD_SIZE=8");
  EXPECT_EQ(error_of(flags(-1, -1, 4)),
            "--local-rank 4: must be below OMPI_COMM_WORLD_LOCAL_SIZE=4 (ranks on this host)");
  // A bad variable is reported even when a flag replaces it: the environment is wrong.
  set("OMPI_COMM_WORLD_RANK", "five");
  EXPECT_EQ(error_of(flags(1, -1)), "OMPI_COMM_WORLD_RANK=five: not an integer");
  ompi("1", "8", "1", "4");
  EXPECT_EQ(error_of(flags(-1, 2)), "OMPI_COMM_WORLD_LOCAL_SIZE=4: must not exceed --world-size 2");
}

TEST_F(Launch, CudaDeviceIsTheLocalRankModTheDeviceCount) {
  LaunchInfo i;
  i.rank = 6;
  i.size = 8;
  i.local_rank = 2;
  i.local_size = 4;
  EXPECT_EQ(adgnn::pick_cuda_device(i, 4), 2);
  EXPECT_EQ(adgnn::pick_cuda_device(i, 2), 0);  // two ranks per device
  EXPECT_EQ(adgnn::pick_cuda_device(i, 1), 0);  // one GPU bound per task
  EXPECT_EQ(adgnn::pick_cuda_device(i, 8), 2);
  try {
    adgnn::pick_cuda_device(i, 0);
    ADD_FAILURE() << "no error for 0 devices";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).find("rank 6 (local rank 2): no CUDA device visible"), 0u) << e.what();
  }
  EXPECT_THROW(adgnn::pick_cuda_device(i, -1), std::invalid_argument);
}

TEST_F(Launch, MpiMustAgreeWithTheLauncher) {
  slurm("3", "8", "3");
  const LaunchInfo i = detect_launch({});
  EXPECT_NO_THROW(adgnn::check_launch_matches(i, 3, 8));
  try {
    adgnn::check_launch_matches(i, 0, 1);
    ADD_FAILURE() << "no error for an MPI singleton under srun";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).find("srun says rank 3 of 8, but MPI sees rank 0 of 1: "), 0u)
        << e.what();
  }
  EXPECT_THROW(adgnn::check_launch_matches(detect_launch(flags(1, 2)), 1, 4), std::runtime_error);
  EXPECT_NO_THROW(adgnn::check_launch_matches(LaunchInfo{}, 0, 4));  // single: nothing to check
}

}  // namespace
