// The MPI backend. Every operation posts the non-blocking MPI call and polls MPI_Testsome until
// a deadline, so a dead or hung peer becomes a CommError instead of a hang. Errors come back as
// return codes (MPI_ERRORS_RETURN on our duplicate of MPI_COMM_WORLD) and become CommError with
// MPI's error string. MPI is finalized only by mpi_finalize(), never by a destructor.
// The C API only: no deprecated C++ bindings (they also warn under -Wextra).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "adgnn/comm.h"
#include "fmt/format.h"
#include "polling.h"

namespace adgnn {

namespace {

using detail::backoff;
using detail::Clock;
using detail::deadline_after;

// The most bytes one MPI call moves (MPI counts are int); larger buffers go in several calls.
// Overridable at compile time so that the tests can exercise the chunking on small buffers.
#ifndef ADGNN_COMM_MAX_CHUNK_BYTES
#define ADGNN_COMM_MAX_CHUNK_BYTES (int64_t{1} << 30)
#endif
constexpr int64_t kMaxChunkBytes = ADGNN_COMM_MAX_CHUNK_BYTES;
static_assert(kMaxChunkBytes >= 8 && kMaxChunkBytes <= INT_MAX, "chunk must fit an MPI count");
// How long a cancelled exchange waits for MPI to confirm the cancellation.
constexpr double kCancelGraceSeconds = 1.0;

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(buf, static_cast<size_t>(len));
}

std::string local_hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string host() const override { return host_; }

  void barrier() override;
  void allreduce(void* data, int64_t count, DType dt, ReduceOp op) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void exchange(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                const std::vector<int64_t>& recv_counts, int64_t row_bytes) override;

 private:
  CommError error(const std::string& what) const { return CommError(rank_, host_, what); }
  void check_usable(const char* call) const;
  // Waits for every request; on failure or timeout gives them up (see abandon) and throws.
  // labels[i], when given, describes reqs[i] for the timeout message.
  void wait_all(std::vector<MPI_Request>& reqs, const std::vector<std::string>& labels,
                const std::string& what, bool cancellable);
  // Gives up the requests still active after a failure: point-to-point ones are cancelled (the
  // communicator stays usable when MPI confirms it), collective ones cannot be and are kept
  // dangling; either way an unconfirmed request makes the communicator unusable.
  void abandon(std::vector<MPI_Request>& reqs, bool cancellable, const std::string& why);
  // A collective over `count` items in calls of at most `chunk` items (MPI counts are int):
  // post(offset, items, request) starts one; then waits for all of them.
  template <class Post>
  void chunked_collective(int64_t count, int64_t chunk, const std::string& what, Post post);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = -1;
  int size_ = 0;
  int local_rank_ = -1;
  std::string host_;
  int64_t tag_ub_ = 32767;
  int64_t seq_ = 0;             // exchange number: its tag, so a late message never matches
  std::string broken_;          // the failure that made this communicator unusable
  std::vector<MPI_Request> dangling_;  // collective requests given up after a timeout
};

MpiCommunicator::MpiCommunicator() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  host_ = local_hostname();
  if (finalized) throw error("make_mpi_communicator: MPI is already finalized");
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) throw error("MPI_Init_thread failed: " + mpi_error_string(rc));
    if (provided < MPI_THREAD_FUNNELED)
      throw error(fmt::format("MPI_Init_thread: asked for MPI_THREAD_FUNNELED, got level {}",
                              provided));
  }
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  if (rc != MPI_SUCCESS) throw error("MPI_Comm_dup failed: " + mpi_error_string(rc));
  try {
    rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) throw error("MPI_Comm_set_errhandler: " + mpi_error_string(rc));
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0)
      host_.assign(name, static_cast<size_t>(len));
    MPI_Comm local = MPI_COMM_NULL;
    rc = MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) throw error("MPI_Comm_split_type failed: " + mpi_error_string(rc));
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_free(&local);
    void* attr = nullptr;
    int flag = 0;
    if (MPI_Comm_get_attr(comm_, MPI_TAG_UB, &attr, &flag) == MPI_SUCCESS && flag && attr)
      tag_ub_ = *static_cast<int*>(attr);
  } catch (...) {
    MPI_Comm_free(&comm_);
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || comm_ == MPI_COMM_NULL) return;
  // Collective requests given up earlier may have completed since; release those that did.
  for (MPI_Request& r : dangling_) {
    int done = 0;
    if (r != MPI_REQUEST_NULL) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&comm_);  // pending operations, if any, complete normally
}

void MpiCommunicator::check_usable(const char* call) const {
  if (!broken_.empty())
    throw error(fmt::format("{}: communicator unusable after an earlier failure ({})", call,
                            broken_));
}

void MpiCommunicator::abandon(std::vector<MPI_Request>& reqs, bool cancellable,
                              const std::string& why) {
  size_t left = 0;
  if (cancellable) {
    for (MPI_Request& r : reqs)
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    // A cancelled receive completes at once; a send may not be cancellable (Open MPI cannot
    // cancel sends) and then completes only when the peer receives it.
    const auto deadline =
        Clock::now() + std::chrono::duration<double>(std::min(kCancelGraceSeconds, timeout_));
    for (int64_t spin = 0;; ++spin) {
      left = 0;
      for (MPI_Request& r : reqs) {
        int done = 0;
        if (r != MPI_REQUEST_NULL && (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
                                      !done))
          ++left;
      }
      if (left == 0 || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::microseconds(spin < 10 ? 1 : 100));
    }
    for (MPI_Request& r : reqs)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  } else {
    for (MPI_Request& r : reqs)
      if (r != MPI_REQUEST_NULL) {
        dangling_.push_back(r);
        r = MPI_REQUEST_NULL;
        ++left;
      }
  }
  if (left > 0 && broken_.empty()) broken_ = why;
}

void MpiCommunicator::wait_all(std::vector<MPI_Request>& reqs,
                               const std::vector<std::string>& labels, const std::string& what,
                               bool cancellable) {
  if (reqs.empty()) return;
  const int n = static_cast<int>(reqs.size());
  const auto start = Clock::now();
  const auto deadline = deadline_after(timeout_);
  std::vector<int> index(reqs.size());
  std::vector<MPI_Status> status(reqs.size());
  for (int64_t spin = 0;; ++spin) {
    int outcount = 0;
    const int rc = MPI_Testsome(n, reqs.data(), &outcount, index.data(), status.data());
    if (rc != MPI_SUCCESS) {
      int code = rc;
      if (rc == MPI_ERR_IN_STATUS)
        for (int i = 0; i < outcount; ++i)
          if (status[i].MPI_ERROR != MPI_SUCCESS) {
            code = status[i].MPI_ERROR;
            break;
          }
      const std::string msg = fmt::format("{} failed: {}", what, mpi_error_string(code));
      abandon(reqs, cancellable, msg);
      throw error(msg);
    }
    if (outcount == MPI_UNDEFINED) return;  // every request has completed
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string msg = fmt::format("{} timed out after {:g} s", what, timeout_);
      if (!labels.empty()) {
        std::vector<std::string> pending;
        for (size_t i = 0; i < reqs.size(); ++i)
          if (reqs[i] != MPI_REQUEST_NULL &&
              (pending.empty() || pending.back() != labels[i]))  // chunks of one peer: once
            pending.push_back(labels[i]);
        msg += "; still waiting for ";
        for (size_t i = 0; i < pending.size() && i < 4; ++i)
          msg += (i ? ", " : "") + pending[i];
        if (pending.size() > 4) msg += fmt::format(" and {} more", pending.size() - 4);
      }
      abandon(reqs, cancellable, msg);
      throw error(msg);
    }
    backoff(spin, now - start);
  }
}

template <class Post>
void MpiCommunicator::chunked_collective(int64_t count, int64_t chunk, const std::string& what, Post post) {
  std::vector<MPI_Request> reqs;
  for (int64_t off = 0; off < count; off += chunk) {
    MPI_Request r = MPI_REQUEST_NULL;
    const int rc = post(off, static_cast<int>(std::min(chunk, count - off)), &r);
    if (rc != MPI_SUCCESS) {
      const std::string msg = fmt::format("{} failed: {}", what, mpi_error_string(rc));
      abandon(reqs, false, msg);  // collectives cannot be cancelled
      throw error(msg);
    }
    reqs.push_back(r);
  }
  wait_all(reqs, {}, what, false);
}

void MpiCommunicator::barrier() {
  check_usable("barrier");
  std::vector<MPI_Request> reqs(1, MPI_REQUEST_NULL);
  const int rc = MPI_Ibarrier(comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) throw error("MPI_Ibarrier failed: " + mpi_error_string(rc));
  wait_all(reqs, {}, "MPI_Ibarrier (barrier)", false);
}

void MpiCommunicator::allreduce(void* data, int64_t count, DType dt, ReduceOp op) {
  check_usable("allreduce");
  const MPI_Datatype type = mpi_type(dt);
  const MPI_Op mop = mpi_op(op);
  if (type == MPI_DATATYPE_NULL || mop == MPI_OP_NULL)
    throw error("allreduce: invalid DType or ReduceOp");
  if (count < 0) throw error(fmt::format("allreduce: count {} < 0", count));
  if (count == 0) return;
  if (data == nullptr) throw error(fmt::format("allreduce: null buffer for {} elements", count));
  const std::string what = fmt::format("MPI_Iallreduce (allreduce of {} {} {})", count,
                                       to_string(dt), to_string(op));
  const int64_t esize = dtype_bytes(dt);
  chunked_collective(count, kMaxChunkBytes / esize, what, [&](int64_t off, int n, MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * esize, n, type, mop, comm_, r);
  });
}

void MpiCommunicator::broadcast(void* data, int64_t bytes, int root) {
  check_usable("broadcast");
  if (root < 0 || root >= size_)
    throw error(fmt::format("broadcast: root {} outside [0, {})", root, size_));
  if (bytes < 0) throw error(fmt::format("broadcast: {} bytes < 0", bytes));
  if (bytes == 0) return;
  if (data == nullptr) throw error(fmt::format("broadcast: null buffer for {} bytes", bytes));
  const std::string what =
      fmt::format("MPI_Ibcast (broadcast of {} bytes from rank {})", bytes, root);
  chunked_collective(bytes, kMaxChunkBytes, what, [&](int64_t off, int n, MPI_Request* r) {
    return MPI_Ibcast(static_cast<char*>(data) + off, n, MPI_BYTE, root, comm_, r);
  });
}

void MpiCommunicator::exchange(const void* send, const std::vector<int64_t>& send_counts,
                               void* recv, const std::vector<int64_t>& recv_counts,
                               int64_t row_bytes) {
  check_usable("exchange");
  // Every rank takes the next tag, also one that returns early, so tags stay in step.
  const int tag = static_cast<int>(seq_ % (tag_ub_ + 1));
  ++seq_;
  const ExchangePlan plan = plan_exchange(send, send_counts, recv, recv_counts, row_bytes);
  const std::vector<int64_t>& send_off = plan.send_off;
  const std::vector<int64_t>& recv_off = plan.recv_off;

  const char* sbuf = static_cast<const char*>(send);
  char* rbuf = static_cast<char*>(recv);
  std::vector<MPI_Request> reqs;
  std::vector<std::string> labels;
  int64_t rows_out = 0, rows_in = 0;
  auto post = [&](bool is_send, int p) {
    const int64_t begin = is_send ? send_off[p] : recv_off[p];
    const int64_t bytes = (is_send ? send_off[p + 1] : recv_off[p + 1]) - begin;
    const int64_t rows = is_send ? send_counts[p] : recv_counts[p];
    (is_send ? rows_out : rows_in) += rows;
    const std::string label =
        fmt::format("{} of {} rows {} rank {}", is_send ? "MPI_Isend" : "MPI_Irecv", rows,
                    is_send ? "to" : "from", p);
    for (int64_t off = 0; off < bytes; off += kMaxChunkBytes) {
      const int n = static_cast<int>(std::min(kMaxChunkBytes, bytes - off));
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = is_send ? MPI_Isend(sbuf + begin + off, n, MPI_BYTE, p, tag, comm_, &r)
                             : MPI_Irecv(rbuf + begin + off, n, MPI_BYTE, p, tag, comm_, &r);
      if (rc != MPI_SUCCESS) {
        const std::string msg =
            fmt::format("exchange: {} failed: {}", label, mpi_error_string(rc));
        abandon(reqs, true, msg);
        throw error(msg);
      }
      reqs.push_back(r);
      labels.push_back(label);
    }
  };
  // Receives first, so that eager sends from peers land in posted buffers.
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && recv_off[p + 1] > recv_off[p]) post(false, p);
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && send_off[p + 1] > send_off[p]) post(true, p);
  const int64_t self_bytes = send_off[rank_ + 1] - send_off[rank_];
  if (self_bytes > 0) std::memcpy(rbuf + recv_off[rank_], sbuf + send_off[rank_],
                                  static_cast<size_t>(self_bytes));
  wait_all(reqs, labels,
           fmt::format("exchange (MPI_Isend/MPI_Irecv: {} rows out, {} rows in, {}-byte rows)",
                       rows_out, rows_in, row_bytes),
           true);
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int mpi_world_rank() {
  int r = 0;
  if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_world_size() {
  int s = 1;
  if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::string mpi_host() {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  if (mpi_running()) MPI_Get_processor_name(name, &len);
  return std::string(name, size_t(len));
}

void mpi_abort(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace adgnn
