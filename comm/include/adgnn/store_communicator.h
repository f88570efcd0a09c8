// adgnn/store_communicator: a host-memory Communicator over a c10d TCPStore, the key-value store
// that ships in LibTorch, for runs without MPI: under torchrun it is the bootstrap of the NCCL
// communicator (it carries NCCL's unique id and the roll call after a timeout). Every byte goes
// through the store's one server, so it is a rendezvous, not a data path for training.
//
// Its own library (adgnn_comm_store) because it links LibTorch, which partition/ (a user of
// adgnn_comm) must not; this header does not include it.
//
// The timeout contract is comm.h's: every wait ends after timeout() with a CommError naming the
// ranks or peers still missing; a collective that timed out leaves the communicator unusable and
// its message carries a roll call over the store; a timed-out exchange leaves it usable. Each
// operation writes its contribution under its own key, so a late rank still completes an
// operation that the others abandoned.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "adgnn/comm.h"
#include "adgnn/launch.h"

namespace adgnn {

struct StoreOptions {
  std::string host;      // the store's server (torchrun: MASTER_ADDR)
  int port = 0;          // its port (MASTER_PORT); 0 with serve: any free port
  bool serve = false;    // this process runs the server (rank 0, unless torchrun's agent does)
  int rank = 0, size = 1, local_rank = 0;
  std::string prefix;    // every key of this communicator begins with it
};

// Connects to (or, with serve, starts) the store and waits until every rank has joined: a
// collective over the `size` ranks, bounded by the communicator's timeout (default_comm_timeout).
// With serve, `listening` (when given) is called with the port the server listens on before the
// other ranks are waited for: how a caller that asked for port 0 tells them. Throws CommError
// (naming the ranks that did not join, or the store that cannot be reached) and
// std::invalid_argument for bad options. A serving communicator keeps the server up in its
// destructor until every rank has closed its own (at most min(timeout, 30 s)).
std::unique_ptr<Communicator> make_store_communicator(
    const StoreOptions& options, const std::function<void(int port)>& listening = {});

// The store of a torchrun launch (LaunchInfo's store_*): served by torchrun's agent, or else by
// rank 0 at MASTER_PORT. Throws std::invalid_argument when `launch` names no store (it was not
// a torchrun launch of several ranks).
std::unique_ptr<Communicator> make_launch_store_communicator(const LaunchInfo& launch);

}  // namespace adgnn
