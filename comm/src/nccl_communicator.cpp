// The NCCL backend (built with -DADGNN_NCCL=ON): the Communicator interface on CUDA device
// buffers. The communicator is non-blocking (ncclConfig_t::blocking = 0), so that no NCCL call
// waits by itself: every operation is enqueued on the communicator's own CUDA stream, then polled
// (cudaStreamQuery and ncclCommGetAsyncError) until it completes or timeout() has passed. A
// timeout or an asynchronous error aborts the NCCL communicator (ncclCommAbort stops the kernels
// still waiting for a peer) and throws CommError; every later call then throws CommError too.
// CUDA and NCCL return codes become CommError with cudaGetErrorString / ncclGetErrorString. The
// CUDA runtime API only: this file needs no nvcc.
//
// Deferred mode (set_deferred): an operation records an event on our stream after its work and
// makes the compute stream (set_compute_stream; the legacy default stream unless set) wait for
// it, instead of polling until it completes; a watchdog thread polls the events in order and
// aborts the communicator when one is not done by its deadline (or NCCL reports an asynchronous
// error). The mutex serialises the watchdog's abort with the operations' NCCL calls, so that no
// call ever uses an aborted communicator.
//
// A timeout names the ranks that did not come: the rank asks the bootstrap communicator for a
// roll call (Communicator::roll_call) on the thread that reports the failure (the watchdog only
// records that one is due), since the bootstrap may be used from that thread alone.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "adgnn/comm.h"
#include "fmt/format.h"
#include "polling.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL >= 2.14 (non-blocking communicators, ncclCommInitRankConfig)"
#endif

namespace adgnn {

namespace {

using detail::backoff;
using detail::Clock;
using detail::deadline_after;

// The longest the destructor waits for ncclCommFinalize before it aborts instead.
constexpr double kDestroyGraceSeconds = 30.0;

std::string cuda_error_string(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

std::string nccl_error_string(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') s += fmt::format(" ({})", last);
  return s;
}

ncclDataType_t nccl_type(DType dt, bool* ok) {
  *ok = true;
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I64: return ncclInt64;
  }
  *ok = false;
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op, bool* ok) {
  *ok = true;
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  *ok = false;
  return ncclSum;
}

// Makes `device` current for the lifetime of the guard and restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != device) {
      rc_ = cudaSetDevice(device);
      changed_ = rc_ == cudaSuccess;
    }
  }
  ~DeviceGuard() {
    if (changed_ && prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  cudaError_t status() const { return rc_; }

 private:
  int prev_ = -1;
  bool changed_ = false;
  cudaError_t rc_ = cudaSuccess;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string host() const override { return host_; }
  bool device_memory() const override { return true; }

  void barrier() override;
  void allreduce(void* data, int64_t count, DType dt, ReduceOp op) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void exchange(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                const std::vector<int64_t>& recv_counts, int64_t row_bytes) override;
  void set_deferred(bool on) override;
  void set_compute_stream(void* stream) override {
    compute_ = stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
  }
  bool deferred() const override { return deferred_; }
  void synchronize() override;

 private:
  // An enqueued operation of deferred mode: its completion event and deadline.
  struct Pending {
    cudaEvent_t done = nullptr;
    Clock::time_point deadline;
    std::string what;
  };
  // The end of an operation: waits for it (blocking mode) or hands it to the watchdog.
  void complete(const std::string& what, Clock::time_point deadline);
  void watchdog();
  // Under mu_: remembers why, aborts, releases the pending events (the watchdog's failures).
  void break_locked(const std::string& msg);
  CommError error(const std::string& what) const { return CommError(rank_, host_, what); }
  void check_usable(const char* call);
  // A timed-out operation's message with the bootstrap's roll call; `late`: seconds past the
  // deadline when it was noticed.
  std::string with_roll_call(const std::string& msg, double late);
  // The watchdog's failure, with the roll call it left due (on the calling thread), under mu_.
  const std::string& reported_failure_locked();
  // The failure message, with the roll call, of an operation that passed its deadline at `now`.
  std::string timed_out(const std::string& what, Clock::time_point now, Clock::time_point deadline);
  // Makes device_ current for one operation (restored when the guard goes).
  void enter(DeviceGuard& guard, const char* call) const;
  // Throws (without breaking the communicator) unless p is memory of device_ (or managed).
  void check_device_buffer(const void* p, const char* call, const char* name) const;
  // Aborts the NCCL communicator, remembers why (every later call is refused) and throws.
  [[noreturn]] void fail(const std::string& msg);
  void abort_comm();
  // A CUDA call inside an operation: any error fails the communicator.
  void cuda(cudaError_t rc, const std::string& call, const std::string& what);
  // An NCCL call inside an operation: ncclInProgress waits for the communicator to become ready
  // (until `deadline`); any error fails the communicator.
  void nccl(ncclResult_t rc, const std::string& call, const std::string& what,
            Clock::time_point deadline);
  // Polls ncclCommGetAsyncError until the communicator has left ncclInProgress.
  void wait_ready(const std::string& what, Clock::time_point deadline);
  // Polls the stream (and NCCL's asynchronous errors) until everything enqueued has completed.
  void wait_stream(const std::string& what, Clock::time_point deadline);
  // Makes our stream wait for the work already queued on the compute stream (by default the
  // legacy default stream, which also waits for every blocking stream), so that buffers written
  // there are complete.
  void order_after_compute_stream(const std::string& what);
  void release();  // frees the CUDA objects (not the NCCL communicator)

  int rank_ = -1;
  int size_ = 0;
  int local_rank_ = -1;
  std::string host_;
  int device_ = -1;
  Communicator* bootstrap_ = nullptr;  // holds the roll call after a timeout
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t compute_ = cudaStreamLegacy;  // set_compute_stream
  cudaEvent_t ready_ = nullptr;     // recorded on the compute stream before each operation
  int32_t* scratch_ = nullptr;      // one device int for the barrier
  std::string broken_;              // the failure that made this communicator unusable
  // The watchdog's timeout: seconds past the deadline when it noticed; < 0 when no roll call is
  // due (none yet, or it ran).
  double roll_call_late_ = -1;
  // Deferred mode. mu_ guards comm_ (against the watchdog's abort), broken_, pending_ and
  // free_events_; recursive, since fail() runs inside operations that hold it.
  bool deferred_ = false;
  mutable std::recursive_mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  std::thread watchdog_;
  bool stop_ = false;
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device)
    : rank_(bootstrap.rank()),
      size_(bootstrap.size()),
      local_rank_(bootstrap.local_rank()),
      host_(bootstrap.host()),
      device_(device),
      bootstrap_(&bootstrap) {
  timeout_ = bootstrap.timeout();
  // Local set-up first; then every rank learns whether every rank succeeded, so that a rank
  // without its device fails everywhere at once instead of leaving the others in
  // ncclCommInitRank until they time out.
  std::string local_error;
  int least_priority = 0, greatest_priority = 0;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  auto try_cuda = [&](cudaError_t rc, const char* call) {
    if (rc == cudaSuccess || !local_error.empty()) return rc == cudaSuccess;
    cudaGetLastError();
    local_error = fmt::format("make_nccl_communicator: {} (device {}) failed: {}", call, device,
                              cuda_error_string(rc));
    return false;
  };
  if (device < 0) {
    local_error = fmt::format("make_nccl_communicator: device {} < 0", device);
  } else if (try_cuda(cudaSetDevice(device), "cudaSetDevice") &&
             try_cuda(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority),
                      "cudaDeviceGetStreamPriorityRange") &&
             // The highest priority: the block scheduler starts our kernels as soon as SMs free
             // up rather than after every block of a large kernel queued before them on another
             // stream (docs/decisions/halo-plan-stream.md).
             try_cuda(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest_priority),
                      "cudaStreamCreateWithPriority") &&
             try_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming),
                      "cudaEventCreateWithFlags") &&
             try_cuda(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(int32_t)),
                      "cudaMalloc") &&
             try_cuda(cudaMemset(scratch_, 0, sizeof(int32_t)), "cudaMemset")) {
    if (rank_ == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess)
        local_error = fmt::format("make_nccl_communicator: ncclGetUniqueId failed: {}",
                                  nccl_error_string(rc, nullptr));
    }
  }
  try {
    int64_t ok = local_error.empty() ? 1 : 0;
    bootstrap.allreduce(&ok, 1, DType::I64, ReduceOp::Min);
    if (!local_error.empty()) throw error(local_error);
    if (ok != 1)
      throw error(fmt::format(
          "make_nccl_communicator (device {}): another rank failed to set up its device or the "
          "NCCL id (see its error)",
          device));
    bootstrap.broadcast(&id, static_cast<int64_t>(sizeof(id)), 0);
  } catch (...) {
    release();
    throw;
  }

  const std::string what = fmt::format(
      "ncclCommInitRankConfig ({} ranks, device {}, NCCL {}.{}.{})", size_, device, NCCL_MAJOR,
      NCCL_MINOR, NCCL_PATCH);
  const auto deadline = deadline_after(timeout_);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  try {
    if (rc != ncclSuccess && rc != ncclInProgress) {
      const std::string msg = fmt::format("{} failed: {}", what, nccl_error_string(rc, comm_));
      abort_comm();
      throw error(msg);
    }
    if (comm_ == nullptr) throw error(what + " returned no communicator");
    wait_ready(what, deadline);
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  DeviceGuard guard(device_);
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }
  if (comm_ != nullptr) {
    // Finalize flushes what is still in flight; the communicator is then destroyed without
    // blocking. A peer that never finalizes (it failed) makes us abort after the grace time.
    const auto start = Clock::now();
    const auto deadline = deadline_after(std::min(timeout_, kDestroyGraceSeconds));
    ncclResult_t state = ncclCommFinalize(comm_);
    for (int64_t spin = 0; state == ncclInProgress; ++spin) {
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) {
        state = ncclInternalError;
        break;
      }
      const auto now = Clock::now();
      if (state != ncclInProgress || now >= deadline) break;
      backoff(spin, now - start);
    }
    if (state == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  release();
}

void NcclCommunicator::release() {
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  pending_.clear();
  free_events_.clear();
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  scratch_ = nullptr;
  ready_ = nullptr;
  stream_ = nullptr;
  if (comm_ != nullptr) abort_comm();
}

void NcclCommunicator::abort_comm() {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::fail(const std::string& msg) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  abort_comm();
  if (broken_.empty()) broken_ = msg;
  throw error(msg);
}

void NcclCommunicator::break_locked(const std::string& msg) {
  abort_comm();
  if (broken_.empty()) broken_ = msg;
  // The aborted kernels end, so the events complete; they are simply not waited for any more.
  for (const Pending& p : pending_) free_events_.push_back(p.done);
  pending_.clear();
  cv_.notify_all();
}

std::string NcclCommunicator::timed_out(const std::string& what, Clock::time_point now,
                                        Clock::time_point deadline) {
  return with_roll_call(
      fmt::format("{} timed out after {:g} s (NCCL communicator aborted)", what, timeout_),
      std::chrono::duration<double>(now - deadline).count());
}

std::string NcclCommunicator::with_roll_call(const std::string& msg, double late) {
  const std::string names = bootstrap_ != nullptr ? bootstrap_->roll_call(late) : std::string();
  return names.empty() ? msg : msg + "; " + names;
}

const std::string& NcclCommunicator::reported_failure_locked() {
  if (roll_call_late_ >= 0) {
    const double late = roll_call_late_;
    roll_call_late_ = -1;
    broken_ = with_roll_call(broken_, late);
  }
  return broken_;
}

void NcclCommunicator::check_usable(const char* call) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!broken_.empty())
    throw error(fmt::format("{}: communicator unusable after an earlier failure ({})", call,
                            reported_failure_locked()));
}

void NcclCommunicator::enter(DeviceGuard& guard, const char* call) const {
  if (guard.status() != cudaSuccess) {
    cudaGetLastError();
    throw error(fmt::format("{}: cudaSetDevice({}) failed: {}", call, device_,
                            cuda_error_string(guard.status())));
  }
}

void NcclCommunicator::check_device_buffer(const void* p, const char* call,
                                           const char* name) const {
  cudaPointerAttributes attr;
  std::memset(&attr, 0, sizeof(attr));
  const cudaError_t rc = cudaPointerGetAttributes(&attr, p);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    throw error(fmt::format("{}: {} buffer {} is not CUDA memory ({})", call, name, p,
                            cuda_error_string(rc)));
  }
  if (attr.type == cudaMemoryTypeDevice && attr.device != device_)
    throw error(fmt::format("{}: {} buffer {} is on device {}, the communicator on device {}",
                            call, name, p, attr.device, device_));
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    throw error(fmt::format("{}: {} buffer {} is host memory; the NCCL communicator needs device "
                            "buffers",
                            call, name, p));
}

void NcclCommunicator::cuda(cudaError_t rc, const std::string& call, const std::string& what) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();
  fail(fmt::format("{}: {} failed: {}", what, call, cuda_error_string(rc)));
}

void NcclCommunicator::nccl(ncclResult_t rc, const std::string& call, const std::string& what,
                            Clock::time_point deadline) {
  if (rc == ncclSuccess) return;
  if (rc == ncclInProgress) {
    wait_ready(what, deadline);
    return;
  }
  fail(fmt::format("{}: {} failed: {}", what, call, nccl_error_string(rc, comm_)));
}

void NcclCommunicator::wait_ready(const std::string& what, Clock::time_point deadline) {
  const auto start = Clock::now();
  for (int64_t spin = 0;; ++spin) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess)
      fail(fmt::format("{}: ncclCommGetAsyncError failed: {}", what,
                       nccl_error_string(rc, comm_)));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      fail(fmt::format("{} failed: {}", what, nccl_error_string(state, comm_)));
    const auto now = Clock::now();
    if (now >= deadline) fail(timed_out(what, now, deadline));
    backoff(spin, now - start);
  }
}

void NcclCommunicator::wait_stream(const std::string& what, Clock::time_point deadline) {
  const auto start = Clock::now();
  for (int64_t spin = 0;; ++spin) {
    const cudaError_t q = cudaStreamQuery(stream_);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) {
      cudaGetLastError();
      fail(fmt::format("{} failed: cudaStreamQuery: {}", what, cuda_error_string(q)));
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess)
      fail(fmt::format("{}: ncclCommGetAsyncError failed: {}", what,
                       nccl_error_string(rc, comm_)));
    if (state != ncclSuccess && state != ncclInProgress)
      fail(fmt::format("{} failed: {}", what, nccl_error_string(state, comm_)));
    const auto now = Clock::now();
    if (now >= deadline) fail(timed_out(what, now, deadline));
    backoff(spin, now - start);
  }
}

void NcclCommunicator::order_after_compute_stream(const std::string& what) {
  cuda(cudaEventRecord(ready_, compute_), "cudaEventRecord", what);
  cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent", what);
}

void NcclCommunicator::set_deferred(bool on) {
  if (deferred_ && !on) synchronize();  // blocking from now on: nothing may still be in flight
  deferred_ = on;
  if (on && !watchdog_.joinable()) watchdog_ = std::thread([this] { watchdog(); });
}

void NcclCommunicator::complete(const std::string& what, Clock::time_point deadline) {
  if (!deferred_) {
    wait_stream(what, deadline);
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(mu_);
  cudaEvent_t done = nullptr;
  if (!free_events_.empty()) {
    done = free_events_.back();
    free_events_.pop_back();
  } else {
    cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags", what);
  }
  const cudaError_t rec = cudaEventRecord(done, stream_);
  if (rec != cudaSuccess) free_events_.push_back(done);
  cuda(rec, "cudaEventRecord", what);
  // Everything queued later on the compute stream (the default one: and the blocking streams)
  // waits for it.
  const cudaError_t wait = cudaStreamWaitEvent(compute_, done, 0);
  pending_.push_back(Pending{done, deadline, what});
  cuda(wait, "cudaStreamWaitEvent (compute stream)", what);
  cv_.notify_all();
}

void NcclCommunicator::watchdog() {
  if (cudaSetDevice(device_) != cudaSuccess) cudaGetLastError();
  std::unique_lock<std::recursive_mutex> lock(mu_);
  int64_t spin = 0;
  auto since = Clock::now();
  while (!stop_) {
    if (pending_.empty()) {
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      spin = 0;
      since = Clock::now();
      continue;
    }
    const Pending front = pending_.front();
    const cudaError_t q = cudaEventQuery(front.done);
    if (q == cudaSuccess) {
      pending_.pop_front();
      free_events_.push_back(front.done);
      cv_.notify_all();
      spin = 0;
      since = Clock::now();
      continue;
    }
    if (q != cudaErrorNotReady) {
      cudaGetLastError();
      break_locked(fmt::format("{} failed: cudaEventQuery: {}", front.what, cuda_error_string(q)));
      continue;
    }
    ncclResult_t state = ncclSuccess;
    if (comm_ != nullptr && ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress) {
      break_locked(fmt::format("{} failed: {}", front.what, nccl_error_string(state, comm_)));
      continue;
    }
    const auto now = Clock::now();
    if (now >= front.deadline) {
      const bool first = broken_.empty();
      break_locked(fmt::format("{} timed out after {:g} s (NCCL communicator aborted)", front.what, timeout_));
      if (first) roll_call_late_ = std::chrono::duration<double>(now - front.deadline).count();
      continue;
    }
    // Poll again after the back-off, without holding the lock meanwhile.
    lock.unlock();
    backoff(spin++, now - since);
    if (spin >= 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    lock.lock();
  }
}

void NcclCommunicator::synchronize() {
  std::unique_lock<std::recursive_mutex> lock(mu_);
  // The watchdog retires the events in order; it also enforces every operation's deadline, so
  // this wait ends (with the failure recorded in broken_) even if a peer never answers.
  cv_.wait(lock, [&] { return pending_.empty() || !broken_.empty(); });
  if (!broken_.empty()) throw error(reported_failure_locked());
}

void NcclCommunicator::barrier() {
  std::lock_guard<std::recursive_mutex> lock(mu_);  // no abort by the watchdog meanwhile
  check_usable("barrier");
  DeviceGuard guard(device_);
  enter(guard, "barrier");
  const std::string what = "ncclAllReduce (barrier)";
  const auto deadline = deadline_after(timeout_);
  nccl(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_), "ncclAllReduce",
       what, deadline);
  wait_stream(what, deadline);
}

void NcclCommunicator::allreduce(void* data, int64_t count, DType dt, ReduceOp op) {
  std::lock_guard<std::recursive_mutex> lock(mu_);  // no abort by the watchdog meanwhile
  check_usable("allreduce");
  bool type_ok = false, op_ok = false;
  const ncclDataType_t type = nccl_type(dt, &type_ok);
  const ncclRedOp_t nop = nccl_op(op, &op_ok);
  if (!type_ok || !op_ok) throw error("allreduce: invalid DType or ReduceOp");
  if (count < 0) throw error(fmt::format("allreduce: count {} < 0", count));
  if (count == 0) return;
  if (data == nullptr) throw error(fmt::format("allreduce: null buffer for {} elements", count));
  DeviceGuard guard(device_);
  enter(guard, "allreduce");
  check_device_buffer(data, "allreduce", "the");
  const std::string what = fmt::format("ncclAllReduce (allreduce of {} {} {})", count,
                                       to_string(dt), to_string(op));
  const auto deadline = deadline_after(timeout_);
  order_after_compute_stream(what);
  nccl(ncclAllReduce(data, data, static_cast<size_t>(count), type, nop, comm_, stream_),
       "ncclAllReduce", what, deadline);
  complete(what, deadline);
}

void NcclCommunicator::broadcast(void* data, int64_t bytes, int root) {
  std::lock_guard<std::recursive_mutex> lock(mu_);  // no abort by the watchdog meanwhile
  check_usable("broadcast");
  if (root < 0 || root >= size_)
    throw error(fmt::format("broadcast: root {} outside [0, {})", root, size_));
  if (bytes < 0) throw error(fmt::format("broadcast: {} bytes < 0", bytes));
  if (bytes == 0) return;
  if (data == nullptr) throw error(fmt::format("broadcast: null buffer for {} bytes", bytes));
  DeviceGuard guard(device_);
  enter(guard, "broadcast");
  check_device_buffer(data, "broadcast", "the");
  const std::string what =
      fmt::format("ncclBroadcast (broadcast of {} bytes from rank {})", bytes, root);
  const auto deadline = deadline_after(timeout_);
  order_after_compute_stream(what);
  nccl(ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, comm_, stream_),
       "ncclBroadcast", what, deadline);
  complete(what, deadline);
}

void NcclCommunicator::exchange(const void* send, const std::vector<int64_t>& send_counts,
                                void* recv, const std::vector<int64_t>& recv_counts,
                                int64_t row_bytes) {
  std::lock_guard<std::recursive_mutex> lock(mu_);  // no abort by the watchdog meanwhile
  check_usable("exchange");
  const ExchangePlan plan = plan_exchange(send, send_counts, recv, recv_counts, row_bytes);
  const std::vector<int64_t>& send_off = plan.send_off;
  const std::vector<int64_t>& recv_off = plan.recv_off;
  if (send_off[size_] == 0 && recv_off[size_] == 0) return;  // nothing to move on this rank

  DeviceGuard guard(device_);
  enter(guard, "exchange");
  if (send_off[size_] > 0) check_device_buffer(send, "exchange", "send");
  if (recv_off[size_] > 0) check_device_buffer(recv, "exchange", "recv");

  int64_t rows_out = 0, rows_in = 0;
  int peers_out = 0, peers_in = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    rows_out += send_counts[p];
    rows_in += recv_counts[p];
    peers_out += send_off[p + 1] > send_off[p];
    peers_in += recv_off[p + 1] > recv_off[p];
  }
  const std::string what = fmt::format(
      "exchange (ncclSend/ncclRecv: {} rows out to {} peers, {} rows in from {} peers, {}-byte "
      "rows)",
      rows_out, peers_out, rows_in, peers_in, row_bytes);
  const auto deadline = deadline_after(timeout_);
  const char* sbuf = static_cast<const char*>(send);
  char* rbuf = static_cast<char*>(recv);
  order_after_compute_stream(what);
  const int64_t self_bytes = send_off[rank_ + 1] - send_off[rank_];
  if (self_bytes > 0)
    cuda(cudaMemcpyAsync(rbuf + recv_off[rank_], sbuf + send_off[rank_],
                         static_cast<size_t>(self_bytes), cudaMemcpyDeviceToDevice, stream_),
         "cudaMemcpyAsync (rows to itself)", what);
  if (peers_out + peers_in > 0) {
    nccl(ncclGroupStart(), "ncclGroupStart", what, deadline);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const int64_t out = send_off[p + 1] - send_off[p];
      const int64_t in = recv_off[p + 1] - recv_off[p];
      // Inside a group the calls are only recorded; errors also come back from ncclGroupEnd.
      if (out > 0) {
        const ncclResult_t rc = ncclSend(sbuf + send_off[p], static_cast<size_t>(out), ncclUint8,
                                         p, comm_, stream_);
        if (rc != ncclSuccess && rc != ncclInProgress) {
          ncclGroupEnd();
          fail(fmt::format("{}: ncclSend of {} rows to rank {} failed: {}", what, send_counts[p],
                           p, nccl_error_string(rc, comm_)));
        }
      }
      if (in > 0) {
        const ncclResult_t rc =
            ncclRecv(rbuf + recv_off[p], static_cast<size_t>(in), ncclUint8, p, comm_, stream_);
        if (rc != ncclSuccess && rc != ncclInProgress) {
          ncclGroupEnd();
          fail(fmt::format("{}: ncclRecv of {} rows from rank {} failed: {}", what,
                           recv_counts[p], p, nccl_error_string(rc, comm_)));
        }
      }
    }
    nccl(ncclGroupEnd(), "ncclGroupEnd", what, deadline);
  }
  complete(what, deadline);
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace adgnn
