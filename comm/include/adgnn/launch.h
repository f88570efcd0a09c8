// adgnn/launch: who am I in a multi-process run. Reads the rank, size and local rank that the
// launcher put in the environment (torchrun, mpirun, srun, MPICH's mpiexec) or that the command
// line gives, before MPI is initialised, so that a rank can pick its GPU first. Torch-free; no
// MPI calls.
//
// Bad values (not an integer, out of range, inconsistent) throw std::invalid_argument with one
// line naming the variable or flag: "SLURM_PROCID=abc: not an integer", "--rank 3: must be below
// --world-size 2". (std::invalid_argument rather than adgnn::InputError: comm does not link the
// loaders library; the CLI turns it into its input-error exit.)
#pragma once

#include <string>

namespace adgnn {

struct LaunchInfo {
  int rank = 0, size = 1;
  int local_rank = 0;  // rank among the ranks on this host; chooses the GPU
  int local_size = 1;  // ranks on this host; 0 when the launcher does not say
  // Where rank and size came from: "torchrun" (RANK, WORLD_SIZE), "mpirun" (OMPI_COMM_WORLD_* or
  // PMI_*), "srun" (SLURM_* or PMI_* agreeing with them), "flags" (--rank / --world-size),
  // "single" (nothing: one process).
  std::string source = "single";
  // Under torchrun with more than one rank: where the ranks meet without MPI, a c10d TCPStore at
  // MASTER_ADDR:MASTER_PORT, served by torchrun's agent (TORCHELASTIC_USE_AGENT_STORE=True) or
  // else by rank 0; keys under store_prefix, unique to this run and restart attempt.
  std::string store_host;
  int store_port = 0;
  bool store_served_by_agent = false;
  std::string store_prefix;
};

// Command-line values; -1 = not given. Given values override the environment's.
struct LaunchOverrides {
  int rank = -1, world_size = -1, local_rank = -1;
};

// Environment, first found wins:
//   torchrun:    RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; MASTER_ADDR and MASTER_PORT
//                (required when WORLD_SIZE > 1), TORCHELASTIC_USE_AGENT_STORE,
//                TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT
//   OpenMPI:     OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   MPICH/Hydra: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   Slurm srun:  SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and for local_size
//                SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE ("4(x2),3", indexed by
//                SLURM_NODEID) or SLURM_NTASKS_PER_NODE
// torchrun comes first because it is always the innermost launcher (`srun torchrun ...` leaves
// the node's SLURM_PROCID in its workers' environment, `mpirun torchrun ...` the OMPI_* ones).
// MPI launchers come before Slurm because mpirun inside an allocation starts its ranks from
// daemons that srun launched, so the inherited SLURM_PROCID is the daemon's, not the rank's.
// A launcher whose rank variable is set must also set its size variable. Without a local rank it
// is derived as under block placement: rank mod local_size, or the rank when local_size is
// unknown (0) too; rank mod GPUs then gives the same device.
// --rank with --world-size replace the environment: it is not read, and the ranks are taken to
// share one host (local rank = rank, local_size = size) unless --local-rank is given. Either alone
// (or --local-rank alone) replaces just that value of the launcher's.
LaunchInfo detect_launch(const LaunchOverrides& flags);

// The CUDA device of this rank: local_rank mod device_count (several ranks share a device when
// there are more ranks on a host than devices; a launcher that binds one GPU per task makes
// device_count 1). Throws std::runtime_error when device_count is 0, std::invalid_argument when
// it is negative.
int pick_cuda_device(const LaunchInfo& info, int device_count);

// More than one rank.
bool launched_multi(const LaunchInfo& info);

// Throws std::runtime_error when MPI's rank and size disagree with what the launcher said, e.g.
// srun starting 8 tasks of an MPI library built without Slurm's PMI support: every task then sees
// itself as rank 0 of 1 and would train alone. Skipped for source "single".
void check_launch_matches(const LaunchInfo& info, int mpi_rank, int mpi_size);

}  // namespace adgnn
