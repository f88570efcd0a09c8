// adgnn/first_error: making one process's failure every process's, so that no process waits in
// a collective for a peer that has given up.
#pragma once

#include <string>

#include "adgnn/comm.h"

namespace adgnn {

// Collective over `comm` (a host-memory communicator): every process passes its error message,
// empty for none. Returns "" when no process failed, else the message of the lowest-ranked
// failing process followed by " (rank r on host h)", the same on every process; the caller
// throws it.
std::string first_error(Communicator& comm, const std::string& local_error);

}  // namespace adgnn
