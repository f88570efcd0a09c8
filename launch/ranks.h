// The ranks of an `adgnn train` / `adgnn predict` run and the share of the graph each holds.
#pragma once

#include <memory>
#include <string>

#include "adgnn/comm.h"
#include "adgnn/launch.h"
#include "adgnn/trainer.h"

namespace adgnn::cli {

// The ranks of this run: one process unless launched by mpirun / srun / torchrun or told by the
// flags. Owns the communicators: the host one (MPI; under torchrun the TCPStore bootstrap, which
// carries no training data) and NCCL on top of it. MPI is finalized by main.
struct Ranks {
  std::unique_ptr<Communicator> host, nccl;
  Communicator* comm = nullptr;
  int rank = 0;
};
// backend: --backend (auto, mpi, nccl); device: --device, "cuda" becomes this rank's GPU.
// Under torchrun only NCCL runs (no MPI, and LibTorch's wheel ships no Gloo headers): a CPU run
// is refused with one line that says to use mpirun.
Ranks start_ranks(const std::string& backend, const LaunchOverrides& launch, std::string& device);

// The MPI communicator of a command whose processes work on the CPU (data generate, partition):
// refused under torchrun with one line naming `what`, and checked against the launcher's ranks.
std::unique_ptr<Communicator> start_mpi_ranks(const LaunchInfo& launch, const std::string& what);

// This run's share of the graph, and how it was obtained (the summary says which path ran).
struct RunGraph {
  GraphPart part;
  std::string loading;
};
// With c.partition_dir a rank reads its own part file and the manifest, never the graph (a
// c.dataset given beside it is checked against the manifest by rank 0). Without, every rank
// loads the dataset and takes its part (c.partition).
RunGraph load_run_graph(const TrainConfig& c, Communicator* comm);

}  // namespace adgnn::cli
