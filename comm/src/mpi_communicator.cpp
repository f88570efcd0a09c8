// The MPI backend. Every operation posts the non-blocking MPI call and polls MPI_Testsome until
// a deadline, so a dead or hung peer becomes a CommError instead of a hang. Errors come back as
// return codes (MPI_ERRORS_RETURN on our duplicate of MPI_COMM_WORLD) and become CommError with
// MPI's error string. MPI is finalized only by mpi_finalize(), never by a destructor.
//
// Collectives run on a buffer the communicator owns (the caller's data is copied in and out): a
// collective that times out cannot be cancelled and may still write its result later, after the
// caller has unwound and freed its own buffer. A timed-out collective's buffer is kept until the
// request completes, and never freed while it may still be written.
//
// A collective that times out names the ranks that did not come: every rank whose collective
// timed out holds a roll call (it sends its collective count to every peer on a reserved tag
// and listens for theirs for a short grace period). The healthy ranks, all blocked on the same
// missing peer, time out within their entry skew of each other and answer; a hung, dead or
// still-computing rank does not, and is named with its host.
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
// How long a roll call listens for the other timed-out ranks (at most the timeout itself): it
// covers the skew between the ranks' entries into the collective that timed out.
constexpr double kRollCallSeconds = 5.0;
// The largest staging buffer kept between collectives (gradients fit; larger ones are freed).
constexpr int64_t kKeptStagingBytes = int64_t{64} << 20;
// The host names exchanged at start-up are cut to this many bytes.
constexpr int kHostBytes = 64;

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
  // See the top of this file; also asked by an NCCL communicator bootstrapped over this one.
  std::string roll_call(double late) override;

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
  // post(offset, items, request) starts one (on the staging buffer); then waits for all of them.
  template <class Post>
  void chunked_collective(int64_t count, int64_t chunk, const std::string& what, Post post);
  // The staging buffer of the next collective, at least `bytes` long.
  char* staging(int64_t bytes);
  // Frees a staging buffer larger than kKeptStagingBytes, so that one large collective (a
  // partition's owner array) does not hold its size for the rest of the run.
  void release_large_staging() {
    if (staging_bytes_ > kKeptStagingBytes) {
      staging_.reset();
      staging_bytes_ = 0;
    }
  }
  std::string rank_at(int p) const { return fmt::format("rank {} on host {}", p, hosts_[p]); }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = -1;
  int size_ = 0;
  int local_rank_ = -1;
  std::string host_;
  int64_t tag_ub_ = 32767;
  int64_t seq_ = 0;             // exchange number: its tag, so a late message never matches
  int64_t collectives_ = 0;     // collectives started: what a roll call reports
  std::vector<std::string> hosts_;  // every rank's host, by rank
  std::string broken_;          // the failure that made this communicator unusable
  std::vector<MPI_Request> dangling_;  // collective requests given up after a timeout
  std::unique_ptr<char[]> staging_;    // the collectives' buffer (see the top of this file)
  int64_t staging_bytes_ = 0;
  std::vector<std::unique_ptr<char[]>> kept_;  // buffers of dangling requests
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
    // Every rank's host, so that a timeout can name the host of a rank that did not answer.
    std::vector<char> mine(kHostBytes, 0), all(static_cast<size_t>(kHostBytes) * size_, 0);
    std::memcpy(mine.data(), host_.data(), std::min<size_t>(host_.size(), kHostBytes - 1));
    rc = MPI_Allgather(mine.data(), kHostBytes, MPI_CHAR, all.data(), kHostBytes, MPI_CHAR, comm_);
    if (rc != MPI_SUCCESS) throw error("MPI_Allgather of host names failed: " + mpi_error_string(rc));
    for (int p = 0; p < size_; ++p) hosts_.emplace_back(all.data() + int64_t{p} * kHostBytes);
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
  bool pending = false;
  for (MPI_Request& r : dangling_) {
    int done = 0;
    if (r != MPI_REQUEST_NULL && (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done))
      pending = true;
  }
  MPI_Comm_free(&comm_);  // pending operations, if any, complete normally
  // A request still pending may write its buffer after this object is gone: leave it allocated.
  if (pending)
    for (auto& b : kept_) static_cast<void>(b.release());
}

char* MpiCommunicator::staging(int64_t bytes) {
  if (!staging_ || staging_bytes_ < bytes) {
    staging_.reset(new char[static_cast<size_t>(bytes)]);  // uninitialised: filled by the caller
    staging_bytes_ = bytes;
  }
  return staging_.get();
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
    // Collectives work on the staging buffer: it now belongs to the dangling requests.
    if (left > 0 && staging_) {
      kept_.push_back(std::move(staging_));
      staging_bytes_ = 0;
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
      // Polling sleeps at most a millisecond: a deadline long past means this process did not
      // run (stopped or starved), so the peers it was waiting for may well be fine.
      const double late = std::chrono::duration<double>(now - deadline).count();
      if (late > 1.0)
        msg += fmt::format("; this rank ran again only {:.0f} s after its deadline (it was stopped "
                           "or starved)", late);
      if (!cancellable) msg += "; " + roll_call(late);
      abandon(reqs, cancellable, msg);
      throw error(msg);
    }
    backoff(spin, now - start);
  }
}

template <class Post>
void MpiCommunicator::chunked_collective(int64_t count, int64_t chunk, const std::string& what,
                                         Post post) {
  ++collectives_;
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

std::string MpiCommunicator::roll_call(double late) {
  if (size_ == 1) return "this rank is the only one";
  const int tag = static_cast<int>(tag_ub_);  // reserved: exchanges use the tags below it
  // What each rank says: its collective count and how many milliseconds past its deadline it ran
  // again. Both buffers are heap blocks that outlive this call when MPI keeps a request.
  constexpr int kWords = 2;
  const auto words = [](int64_t n) { return std::make_unique<char[]>(sizeof(int64_t) * n); };
  auto out = words(kWords);
  auto in = words(int64_t{kWords} * size_);
  const int64_t said[kWords] = {collectives_, static_cast<int64_t>(late * 1000)};
  std::memcpy(out.get(), said, sizeof said);
  auto* heard = reinterpret_cast<int64_t*>(in.get());
  std::fill(heard, heard + int64_t{kWords} * size_, int64_t{-1});
  std::vector<MPI_Request> recvs, sends;
  std::vector<int> asked;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    MPI_Request r = MPI_REQUEST_NULL;
    if (MPI_Irecv(heard + kWords * p, kWords, MPI_INT64_T, p, tag, comm_, &r) == MPI_SUCCESS) {
      recvs.push_back(r);
      asked.push_back(p);
    }
    r = MPI_REQUEST_NULL;
    if (MPI_Isend(out.get(), kWords, MPI_INT64_T, p, tag, comm_, &r) == MPI_SUCCESS)
      sends.push_back(r);
  }
  const double grace = std::min(timeout_, kRollCallSeconds);
  const auto start = Clock::now();
  const auto deadline = deadline_after(grace);
  for (int64_t spin = 0;; ++spin) {
    int all = 0;
    if (MPI_Testall(static_cast<int>(recvs.size()), recvs.data(), &all, MPI_STATUSES_IGNORE) !=
            MPI_SUCCESS ||
        all || Clock::now() >= deadline)
      break;
    backoff(spin, Clock::now() - start);
  }
  // Receives that got nothing are cancelled; a send the silent peer never took stays with MPI.
  bool kept = false;
  for (MPI_Request& r : recvs)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      int done = 0;
      if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) {
        MPI_Request_free(&r);
        kept = true;
      }
    }
  for (MPI_Request& r : sends) {
    int done = 0;
    if (r != MPI_REQUEST_NULL && (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)) {
      MPI_Request_free(&r);
      kept = true;
    }
  }
  std::vector<int> silent, stopped, elsewhere;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const int64_t* h = heard + kWords * p;
    if (std::find(asked.begin(), asked.end(), p) == asked.end() || h[0] < 0) silent.push_back(p);
    else if (h[1] > 1000) stopped.push_back(p);
    if (h[0] >= 0 && h[0] != collectives_) elsewhere.push_back(p);
  }
  const auto list = [&](const std::vector<int>& ranks) {
    std::string s;
    for (size_t i = 0; i < ranks.size() && i < 4; ++i) s += (i ? ", " : "") + rank_at(ranks[i]);
    if (ranks.size() > 4) s += fmt::format(" and {} more", ranks.size() - 4);
    return s;
  };
  std::string msg = "roll call: ";
  if (silent.empty())
    msg += fmt::format("every other rank ({}) timed out in a collective too", size_ - 1);
  else
    msg += fmt::format("{} did not answer within {:g} s (hung, dead or not in a collective); {} of "
                       "{} other ranks timed out here too",
                       list(silent), grace, size_ - 1 - static_cast<int>(silent.size()), size_ - 1);
  for (int p : stopped)
    msg += fmt::format("; {} answered, but ran again only {:.0f} s after its deadline (it was "
                       "stopped or starved)", rank_at(p), heard[kWords * p + 1] / 1000.0);
  for (size_t i = 0; i < elsewhere.size() && i < 4; ++i)
    msg += fmt::format("; {} is at collective #{}, this rank at #{}", rank_at(elsewhere[i]),
                       heard[kWords * elsewhere[i]], collectives_);
  if (kept) {
    kept_.push_back(std::move(out));
    kept_.push_back(std::move(in));
  }
  return msg;
}

void MpiCommunicator::barrier() {
  check_usable("barrier");
  ++collectives_;
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
  char* buf = staging(count * esize);
  std::memcpy(buf, data, static_cast<size_t>(count * esize));
  chunked_collective(count, kMaxChunkBytes / esize, what, [&](int64_t off, int n, MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, buf + off * esize, n, type, mop, comm_, r);
  });
  std::memcpy(data, buf, static_cast<size_t>(count * esize));
  release_large_staging();
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
  char* buf = staging(bytes);
  if (rank_ == root) std::memcpy(buf, data, static_cast<size_t>(bytes));
  chunked_collective(bytes, kMaxChunkBytes, what, [&](int64_t off, int n, MPI_Request* r) {
    return MPI_Ibcast(buf + off, n, MPI_BYTE, root, comm_, r);
  });
  if (rank_ != root) std::memcpy(data, buf, static_cast<size_t>(bytes));
  release_large_staging();
}

void MpiCommunicator::exchange(const void* send, const std::vector<int64_t>& send_counts,
                               void* recv, const std::vector<int64_t>& recv_counts,
                               int64_t row_bytes) {
  check_usable("exchange");
  // Every rank takes the next tag, also one that returns early, so tags stay in step.
  const int tag = static_cast<int>(seq_ % tag_ub_);  // tag_ub_ itself is the roll call's
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
