#include "ranks.h"

#include <torch/cuda.h>

#include "adgnn/store_communicator.h"
#include "fmt/format.h"

namespace adgnn::cli {

namespace {

bool nccl_built() {
#ifdef ADGNN_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_nccl(Communicator& bootstrap, int device) {
#ifdef ADGNN_HAVE_NCCL
  return make_nccl_communicator(bootstrap, device);
#else
  (void)bootstrap;
  (void)device;
  throw InputError("--backend nccl: this build has no NCCL (configure with -DADGNN_NCCL=ON)");
#endif
}

// The graph a dataset names, as graph_fingerprint: read from our HDF5 file's attributes, else
// computed from the loaded graph.
std::string dataset_graph_hash(const std::string& dataset, const std::string& data_dir) {
  std::string path;
  try {
    path = resolve_dataset(dataset, data_dir);
  } catch (const InputError&) {
    path.clear();  // csbm:<preset> and the like: generated, hashed below
  }
  const std::string stored = path.empty() ? "" : stored_graph_hash(path);
  return stored.empty() ? graph_fingerprint(load_dataset(dataset, data_dir)) : stored;
}

// Rank 0's failure, thrown on every rank (so none waits in a collective the others left).
void rethrow_everywhere(Communicator* comm, std::string why) {
  if (!comm) {
    if (!why.empty()) throw InputError(why);
    return;
  }
  int64_t len = int64_t(why.size());
  host_broadcast(*comm, &len, sizeof len, 0);
  why.resize(size_t(len));
  if (len) host_broadcast(*comm, why.data(), len, 0);
  if (!why.empty()) throw InputError(why);
}

}  // namespace

// Under torchrun there is no MPI: CPU work has no communicator.
static std::string torchrun_cpu_refusal(const LaunchInfo& li, const std::string& what) {
  return fmt::format("{} under torchrun ({} ranks): CPU processes talk over MPI, which torchrun does not start; "
                     "use mpirun -n {} (or srun) instead",
                     what, li.size, li.size);
}

Ranks start_ranks(const std::string& backend, const LaunchOverrides& launch, std::string& device) {
  if (backend != "auto" && backend != "mpi" && backend != "nccl")
    throw InputError("--backend " + backend + ": expected auto, mpi or nccl");
  LaunchInfo li;
  try {
    li = detect_launch(launch);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  Ranks r;
  if (!launched_multi(li)) {
    if (backend != "auto")
      throw InputError("--backend " + backend + ": one process has no communicator (start several "
                       "ranks with mpirun, srun or torchrun)");
    return r;
  }
  const bool cuda = device.rfind("cuda", 0) == 0;
  const bool torchrun = li.source == "torchrun";
  if (torchrun) {
    if (!cuda) throw InputError(torchrun_cpu_refusal(li, "--device " + device));
    if (backend == "mpi") throw InputError(torchrun_cpu_refusal(li, "--backend mpi"));
    if (!nccl_built())
      throw InputError("--device cuda under torchrun: this build has no NCCL (configure with -DADGNN_NCCL=ON)");
    r.host = make_launch_store_communicator(li);
  } else {
    r.host = make_mpi_communicator();
    try {
      check_launch_matches(li, r.host->rank(), r.host->size());
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
  }
  r.comm = r.host.get();
  r.rank = r.host->rank();
  if (device == "cuda") {  // no index given: the GPU of this rank's local rank
    const int count = int(torch::cuda::device_count());
    if (count == 0) throw InputError("--device cuda: no CUDA device on host " + r.host->host());
    device = "cuda:" + std::to_string(pick_cuda_device(li, count));
  }
  const bool nccl = torchrun || backend == "nccl" || (backend == "auto" && cuda && nccl_built());
  if (nccl) {
    if (!nccl_built()) throw InputError("--backend nccl: this build has no NCCL (configure with -DADGNN_NCCL=ON)");
    if (!cuda) throw InputError("--backend nccl: needs --device cuda");
    r.nccl = make_nccl(*r.host, c10::Device(device).index());
    r.comm = r.nccl.get();
  }
  return r;
}

std::unique_ptr<Communicator> start_mpi_ranks(const LaunchInfo& launch, const std::string& what) {
  if (launch.source == "torchrun") throw InputError(torchrun_cpu_refusal(launch, what));
  auto comm = make_mpi_communicator();
  try {
    check_launch_matches(launch, comm->rank(), comm->size());
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  return comm;
}

// With --partition-dir a rank reads its own part file and the manifest, never the graph (a
// --dataset given beside it is checked against the manifest by rank 0: through our HDF5 file's
// stored hash, or by loading it). Without, every rank loads the dataset and takes its part.
RunGraph load_run_graph(const TrainConfig& c, Communicator* comm) {
  const int P = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  RunGraph out;
  if (!c.partition_dir.empty()) {
    std::string why;
    if (rank == 0) {
      try {
        const PartitionManifest m = read_partition_manifest(c.partition_dir);
        if (!c.dataset.empty() && dataset_graph_hash(c.dataset, c.data_dir) != m.graph_hash)
          why = fmt::format("--partition-dir {}: made for graph '{}' ({}), not --dataset {}", c.partition_dir,
                            m.graph_name, m.graph_hash.substr(0, 12), c.dataset);
      } catch (const InputError& e) {
        why = e.what();
      }
    }
    rethrow_everywhere(comm, why);
    out.part = read_part(c.partition_dir, rank, P, "");
    out.loading = fmt::format("rank-local: each rank read its part of {} ({} parts)", c.partition_dir, P);
    return out;
  }
  {
    const Graph g = load_dataset(c.dataset, c.data_dir);
    out.part = rank_part(g, c, comm);
  }  // the whole graph is released before training
  out.loading = P > 1 ? fmt::format("whole graph on every rank, partitioned in memory ({})", c.partition.method)
                      : "whole graph (one process)";
  return out;
}

}  // namespace adgnn::cli
