// adgnn/comm: the communicator of the distributed trainer. One interface over raw buffers; the
// MPI backend lives in mpi_communicator.cpp (this header does not include mpi.h).
//
// Every operation waits at most timeout() seconds and then throws CommError, so a dead, hung or
// absent peer ends the run with a message instead of a hang. After a collective (allreduce,
// broadcast, barrier) times out or fails, the communicator is unusable: the operation may still
// be in flight (on a buffer the communicator keeps, never the caller's), and every later call
// throws CommError. The MPI backend's timeout message names the ranks that did not reach the
// collective (a roll call among the ranks that timed out, mpi_communicator.cpp). The usual
// reaction is to report the error and call mpi_abort(). An exchange that times out cancels its
// requests, names the peers it still waits for, and leaves the communicator usable when the
// cancellation is confirmed.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace adgnn {

// A communication failure. The message is one line naming the rank, the host and the failing
// call: "rank 1 on host x: MPI_Iallreduce (allreduce of 1024 F32 Sum) timed out after 30 s".
class CommError : public std::runtime_error {
 public:
  CommError(int rank, const std::string& host, const std::string& what);
  int rank() const { return rank_; }  // -1 when the rank is not known yet
  const std::string& host() const { return host_; }

 private:
  int rank_;
  std::string host_;
};

enum class ReduceOp { Sum, Max, Min };
enum class DType { F32, F64, I64 };

int64_t dtype_bytes(DType dt);
const char* to_string(DType dt);
const char* to_string(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // rank among the ranks on this host
  virtual std::string host() const = 0;
  // Whether buffers must be device (CUDA) memory (NCCL) rather than host memory (MPI).
  virtual bool device_memory() const { return false; }

  // Collectives: every rank calls them, in the same order, with the same count / root.
  virtual void barrier() = 0;
  virtual void allreduce(void* data, int64_t count, DType dt, ReduceOp op) = 0;  // in place
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Variable-size neighbour exchange of rows: send_counts[p] / recv_counts[p] rows of row_bytes
  // each go to / come from peer p; both buffers are packed by peer in rank order. Only peers
  // with non-zero counts are contacted, but every rank must call exchange, also one with nothing
  // to send or receive. recv_counts[p] on this rank must equal send_counts[this rank] on p.
  virtual void exchange(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                        const std::vector<int64_t>& recv_counts, int64_t row_bytes) = 0;

  // Device-memory communicators (NCCL) can defer completion: allreduce, broadcast and exchange
  // then return once their work is enqueued, and work queued afterwards on the legacy default
  // CUDA stream (PyTorch's default stream) runs after it, so tensors used there see the result
  // while the host runs on. A watchdog thread aborts the communicator when an operation is not
  // done within timeout(); the next call, or synchronize(), throws the CommError that names it.
  // Off by default; no effect on host-memory communicators (MPI), which complete every
  // operation before returning.
  virtual void set_deferred(bool on) { (void)on; }
  virtual bool deferred() const { return false; }
  // The CUDA stream (a cudaStream_t) in that role: each later operation of a device-memory
  // communicator runs after the work queued on it and, deferred, its later work waits for the
  // operation. Null: the legacy default stream. A caller that issues from another stream names
  // it (a rank's halo plan runs on a second stream, beside layer 1: docs/decisions/halo-plan-stream.md).
  virtual void set_compute_stream(void* stream) { (void)stream; }
  // Waits (up to the timeout) until every enqueued operation has completed, and throws the
  // CommError of one that failed. Returns at once where operations complete before returning.
  virtual void synchronize() {}

  // After an operation timed out on this communicator, or on a device communicator bootstrapped
  // over it: asks the other ranks over this communicator which of them timed out too, waiting a
  // short grace period for their answers, and returns one clause that names those that did not
  // answer (hung, dead or still computing) and those that were stopped. `late`: how many seconds
  // past its deadline this rank noticed. Every rank that timed out calls it; a healthy rank never
  // does. Empty where the backend cannot hold one (NCCL asks its bootstrap).
  virtual std::string roll_call(double late) {
    (void)late;
    return {};
  }

  // Every wait fails with CommError after this many seconds (> 0; infinity disables). Default
  // 300 s, or $ADGNN_COMM_TIMEOUT when set.
  void set_timeout(double seconds);
  double timeout() const { return timeout_; }

 protected:
  Communicator();  // applies $ADGNN_COMM_TIMEOUT; throws std::invalid_argument on a bad value
  // Checks exchange()'s arguments (one count per rank, non-negative, self rows matching, no null
  // buffer with data) and returns the byte offsets per peer, size() + 1 each; CommError if bad.
  struct ExchangePlan {
    std::vector<int64_t> send_off, recv_off;
  };
  ExchangePlan plan_exchange(const void* send, const std::vector<int64_t>& send_counts,
                             const void* recv, const std::vector<int64_t>& recv_counts,
                             int64_t row_bytes) const;
  double timeout_ = 300;
};

// The timeout from $ADGNN_COMM_TIMEOUT, or 300 s when it is unset.
double default_comm_timeout();

// MPI: initialises MPI (MPI_Init_thread, FUNNELED: only the thread that created it may call it)
// when not yet initialised and returns a communicator over a duplicate of MPI_COMM_WORLD.
// Collective over MPI_COMM_WORLD. Finalize explicitly with mpi_finalize() at the end of main,
// after every communicator is gone or unused; never in a destructor.
std::unique_ptr<Communicator> make_mpi_communicator();
void mpi_finalize();
// Whether MPI is initialised and not finalized; MPI_COMM_WORLD's rank and size, and the host
// name (valid only while mpi_running()).
bool mpi_running();
int mpi_world_rank();
int mpi_world_size();
std::string mpi_host();
// MPI_Abort(MPI_COMM_WORLD, code) (or _Exit when MPI is not running): the way out after a
// CommError, since MPI_Finalize may wait for the peer that failed.
[[noreturn]] void mpi_abort(int exit_code);

// NCCL (defined only in builds with -DADGNN_NCCL=ON, which define ADGNN_HAVE_NCCL): a
// communicator over CUDA device `device` (made current with cudaSetDevice) with the rank, size,
// local rank, host and timeout of `bootstrap` (usually the MPI communicator), which carries the
// ncclUniqueId from rank 0. Collective over bootstrap; when any rank fails to set up its device,
// every rank throws CommError. Every void* of its operations is a device pointer on `device` (or
// managed memory); host memory is refused with CommError. Operations run on the communicator's
// own CUDA stream after the work already queued on the legacy default stream (and, through it,
// on every blocking stream); work on other non-blocking streams must be synchronized by the
// caller. They return when the result is in the buffer. A timeout or an NCCL / CUDA failure
// aborts the NCCL communicator (also for exchange, which NCCL cannot cancel): every later call
// throws CommError. An operation that times out names the ranks that did not come, from a roll
// call over `bootstrap`, which must outlive the communicator; the roll call runs on the calling
// thread when the failure is reported (MPI's FUNNELED level holds). The destructor flushes and destroys the NCCL communicator (aborting it when
// the peers do not finish within min(timeout(), 30 s)); it never finalizes MPI.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);

}  // namespace adgnn
