// The TCPStore backend (store_communicator.h). Every operation has its own key namespace,
// <prefix>/op<n>/..., numbered in call order (the same on every rank): a rank writes its part
// under its own key and waits for the keys it needs, so a missing key names the missing rank.
// The last reader of an operation's keys deletes them, so the store stays small.
#include "adgnn/store_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "fmt/format.h"

namespace adgnn {

namespace {

using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr double kRollCallSeconds = 5;  // the roll call's grace, at most (comm.h)
constexpr double kCloseSeconds = 30;    // the serving rank waits this long for the others to close

// The store takes milliseconds; "no deadline" (inf) and absurdly long timeouts become a year.
std::chrono::milliseconds as_ms(double seconds) {
  constexpr double kYear = 365.0 * 24 * 3600;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(std::min(seconds, kYear) * 1000)));
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == 0) return "unknown";
  return name;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

Bytes to_bytes(const void* p, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return Bytes(b, b + n);
}

template <class T>
void reduce_into(T* acc, const T* v, int64_t n, ReduceOp op) {
  for (int64_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, v + i, sizeof x);  // the store's bytes carry no alignment promise
    switch (op) {
      case ReduceOp::Sum: acc[i] += x; break;
      case ReduceOp::Max: acc[i] = std::max(acc[i], x); break;
      case ReduceOp::Min: acc[i] = std::min(acc[i], x); break;
    }
  }
}

class StoreCommunicator final : public Communicator {
 public:
  StoreCommunicator(const StoreOptions& o, const std::function<void(int)>& listening);
  ~StoreCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string host() const override { return host_; }

  void barrier() override;
  void allreduce(void* data, int64_t count, DType dt, ReduceOp op) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void exchange(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                const std::vector<int64_t>& recv_counts, int64_t row_bytes) override;
  std::string roll_call(double late) override;

 private:
  CommError error(const std::string& what) const { return CommError(rank_, host_, what); }
  void check_usable(const char* call) const {
    if (!broken_.empty())
      throw error(fmt::format("{}: communicator unusable after an earlier failure ({})", call, broken_));
  }
  std::string next_op() { return fmt::format("{}/op{}", prefix_, ops_++); }
  static std::string rank_key(const std::string& op, int r) { return fmt::format("{}/r{}", op, r); }
  std::string rank_at(int p) const {
    return fmt::format("rank {} on host {}", p, p < static_cast<int>(hosts_.size()) ? hosts_[p] : "?");
  }
  std::string list(const std::vector<int>& ranks) const;
  std::string unreachable(const std::string& what, const std::string& why) const {
    return fmt::format("{} failed: the store at {}:{} is unreachable ({})", what, store_host_, store_port_,
                       first_line(why));
  }
  // A store call; its failure (the server is gone) becomes a CommError, and for a collective
  // leaves the communicator unusable.
  template <class F>
  auto call(const std::string& what, bool collective, F f) -> decltype(f());
  // Waits until keys[i] exist (written by rank owners[i]). On timeout: a CommError naming the
  // ranks still missing, for a collective with a roll call, after which it is unusable.
  void wait_for(const std::vector<std::string>& keys, const std::vector<int>& owners,
                const std::string& what, bool collective);
  // After `readers` ranks have read an operation's keys, the last of them deletes them.
  void release(const std::string& op, int readers, const std::vector<std::string>& keys);
  // Writes this rank's part of a collective and returns every rank's, in rank order.
  std::vector<Bytes> gather(const void* data, int64_t bytes, const std::string& what);

  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::string store_host_;
  int store_port_ = 0;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string host_, prefix_;
  std::vector<std::string> hosts_;
  bool serving_ = false;
  int64_t ops_ = 0, roll_calls_ = 0;
  std::string broken_;
};

StoreCommunicator::StoreCommunicator(const StoreOptions& o, const std::function<void(int)>& listening)
    : store_host_(o.host), store_port_(o.port), rank_(o.rank), size_(o.size), local_rank_(o.local_rank),
      host_(this_host()), prefix_(o.prefix), serving_(o.serve) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw std::invalid_argument(fmt::format("make_store_communicator: rank {} of {} ranks", o.rank, o.size));
  if (o.local_rank < 0 || o.local_rank >= o.size)
    throw std::invalid_argument(fmt::format("make_store_communicator: local rank {} of {} ranks", o.local_rank, o.size));
  if (o.port < 0 || o.port > 65535 || (o.port == 0 && !o.serve))
    throw std::invalid_argument(fmt::format("make_store_communicator: port {} (1-65535; 0 only to serve)", o.port));
  if (o.host.empty() && !o.serve) throw std::invalid_argument("make_store_communicator: no store host");
  const std::string joining = fmt::format("joining the store at {}:{}", o.host, o.port);
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(o.port);
  so.isServer = o.serve;
  so.numWorkers = std::nullopt;  // the ranks are counted below, with names for the missing ones
  so.waitWorkers = false;
  so.timeout = as_ms(timeout_);
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(o.host.empty() ? "localhost" : o.host, so);
  } catch (const c10::Error& e) {
    throw error(unreachable(joining, e.what()));
  }
  store_port_ = store_->getPort();
  if (o.serve && listening) listening(store_port_);
  // The rendezvous: every rank names its host; the names label the ranks in later messages.
  call(joining, false, [&] { store_->set(fmt::format("{}/host/r{}", prefix_, rank_), to_bytes(host_.data(), int64_t(host_.size()))); });
  std::vector<std::string> keys;
  std::vector<int> owners;
  for (int p = 0; p < size_; ++p) {
    keys.push_back(fmt::format("{}/host/r{}", prefix_, p));
    owners.push_back(p);
  }
  wait_for(keys, owners, "TCPStore::wait (" + joining + ")", false);
  const std::vector<Bytes> names = call(joining, false, [&] { return store_->multiGet(keys); });
  for (const Bytes& n : names) hosts_.emplace_back(n.begin(), n.end());
}

StoreCommunicator::~StoreCommunicator() {
  // Every rank says it is done; the serving rank keeps the server up until all have (a rank may
  // still be reading the keys of the last operation), for at most min(timeout, 30 s).
  try {
    const int64_t closed = store_->add(prefix_ + "/closed", 1);
    if (closed >= size_) {
      store_->set(prefix_ + "/closed_all", Bytes{1});
    } else if (serving_) {
      store_->wait({prefix_ + "/closed_all"}, as_ms(std::min(timeout_, kCloseSeconds)));
    }
  } catch (const std::exception&) {
    // A peer that is gone, or a server that is: nothing left to wait for.
  }
}

template <class F>
auto StoreCommunicator::call(const std::string& what, bool collective, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    const std::string msg = unreachable(what, e.what());
    if (collective) broken_ = msg;
    throw error(msg);
  }
}

std::string StoreCommunicator::list(const std::vector<int>& ranks) const {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 4; ++i) s += (i ? ", " : "") + rank_at(ranks[i]);
  if (ranks.size() > 4) s += fmt::format(" and {} more", ranks.size() - 4);
  return s;
}

void StoreCommunicator::wait_for(const std::vector<std::string>& keys, const std::vector<int>& owners,
                                 const std::string& what, bool collective) {
  if (keys.empty()) return;
  const auto start = Clock::now();
  std::string why;
  try {
    store_->wait(keys, as_ms(timeout_));
    return;
  } catch (const c10::Error& e) {
    why = e.what();
  }
  // A timeout, or a store that went away: which keys are still missing tells them apart.
  std::vector<int> missing;
  try {
    for (size_t i = 0; i < keys.size(); ++i)
      if (!store_->check({keys[i]})) missing.push_back(owners[i]);
  } catch (const c10::Error& e) {
    const std::string msg = unreachable(what, e.what());
    if (collective) broken_ = msg;
    throw error(msg);
  }
  if (missing.empty()) return;  // the last key came just after the deadline
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  if (waited < std::min(timeout_, 1e9) * 0.99) {  // the wait failed early: not a timeout
    const std::string msg = unreachable(what, why);
    if (collective) broken_ = msg;
    throw error(msg);
  }
  std::string msg = fmt::format("{} timed out after {:g} s waiting for {}", what, timeout_, list(missing));
  if (collective) {
    msg += "; " + roll_call(waited - timeout_);
    broken_ = msg;
  }
  throw error(msg);
}

void StoreCommunicator::release(const std::string& op, int readers, const std::vector<std::string>& keys) {
  call("releasing " + op, false, [&] {
    if (store_->add(op + "/read", 1) < readers) return;
    for (const std::string& k : keys) store_->deleteKey(k);
    store_->deleteKey(op + "/read");
  });
}

std::vector<Bytes> StoreCommunicator::gather(const void* data, int64_t bytes, const std::string& what) {
  const std::string op = next_op();
  std::vector<std::string> keys, others;
  std::vector<int> owners;
  for (int p = 0; p < size_; ++p) {
    keys.push_back(rank_key(op, p));
    if (p == rank_) continue;
    others.push_back(keys.back());
    owners.push_back(p);
  }
  call(what, true, [&] { store_->set(keys[rank_], to_bytes(data, bytes)); });
  wait_for(others, owners, what, true);
  std::vector<Bytes> got = call(what, true, [&] { return store_->multiGet(keys); });
  for (int p = 0; p < size_; ++p)
    if (static_cast<int64_t>(got[p].size()) != bytes) {
      broken_ = fmt::format("{}: rank {} gave {} bytes, this rank {} (the ranks disagree on the call)", what, p,
                            got[p].size(), bytes);
      throw error(broken_);
    }
  release(op, size_, keys);
  return got;
}

void StoreCommunicator::barrier() {
  check_usable("barrier");
  const uint8_t one = 1;
  gather(&one, 1, "TCPStore::wait (barrier)");
}

void StoreCommunicator::allreduce(void* data, int64_t count, DType dt, ReduceOp op) {
  check_usable("allreduce");
  if (count < 0) throw error(fmt::format("allreduce: count {} < 0", count));
  if (count == 0) return;
  if (data == nullptr) throw error(fmt::format("allreduce: null buffer for {} elements", count));
  const std::string what =
      fmt::format("TCPStore::wait (allreduce of {} {} {})", count, to_string(dt), to_string(op));
  const int64_t bytes = count * dtype_bytes(dt);
  const std::vector<Bytes> parts = gather(data, bytes, what);
  // Rank order on every rank: the same result everywhere, bit for bit.
  std::memcpy(data, parts[0].data(), static_cast<size_t>(bytes));
  for (int p = 1; p < size_; ++p) switch (dt) {
      case DType::F32: reduce_into(static_cast<float*>(data), reinterpret_cast<const float*>(parts[p].data()), count, op); break;
      case DType::F64: reduce_into(static_cast<double*>(data), reinterpret_cast<const double*>(parts[p].data()), count, op); break;
      case DType::I64: reduce_into(static_cast<int64_t*>(data), reinterpret_cast<const int64_t*>(parts[p].data()), count, op); break;
    }
}

void StoreCommunicator::broadcast(void* data, int64_t bytes, int root) {
  check_usable("broadcast");
  if (root < 0 || root >= size_) throw error(fmt::format("broadcast: root {} outside [0, {})", root, size_));
  if (bytes < 0) throw error(fmt::format("broadcast: {} bytes < 0", bytes));
  if (bytes == 0) return;
  if (data == nullptr) throw error(fmt::format("broadcast: null buffer for {} bytes", bytes));
  if (size_ == 1) return;
  const std::string what = fmt::format("TCPStore::wait (broadcast of {} bytes from rank {})", bytes, root);
  const std::string op = next_op(), key = op + "/v";
  if (rank_ == root) {
    call(what, true, [&] { store_->set(key, to_bytes(data, bytes)); });
    return;
  }
  wait_for({key}, {root}, what, true);
  const Bytes got = call(what, true, [&] { return store_->get(key); });
  if (static_cast<int64_t>(got.size()) != bytes) {
    broken_ = fmt::format("{}: rank {} sent {} bytes (the ranks disagree on the call)", what, root, got.size());
    throw error(broken_);
  }
  std::memcpy(data, got.data(), static_cast<size_t>(bytes));
  release(op, size_ - 1, {key});
}

void StoreCommunicator::exchange(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                                 const std::vector<int64_t>& recv_counts, int64_t row_bytes) {
  check_usable("exchange");
  const ExchangePlan plan = plan_exchange(send, send_counts, recv, recv_counts, row_bytes);
  const std::string op = next_op();
  const auto key = [&](int from, int to) { return fmt::format("{}/{}>{}", op, from, to); };
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  for (int p = 0; p < size_; ++p) {
    const int64_t n = plan.send_off[p + 1] - plan.send_off[p];
    if (p == rank_ || n == 0) continue;
    call("exchange", false, [&] { store_->set(key(rank_, p), to_bytes(in + plan.send_off[p], n)); });
  }
  const int64_t self = plan.send_off[rank_ + 1] - plan.send_off[rank_];
  if (self > 0) std::memmove(out + plan.recv_off[rank_], in + plan.send_off[rank_], static_cast<size_t>(self));
  std::vector<std::string> keys;
  std::vector<int> owners;
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && recv_counts[p] > 0) {
      keys.push_back(key(p, rank_));
      owners.push_back(p);
    }
  wait_for(keys, owners, fmt::format("TCPStore::wait (exchange of {}-byte rows)", row_bytes), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    const int p = owners[i];
    const Bytes got = call("exchange", false, [&] { return store_->get(keys[i]); });
    const int64_t want = plan.recv_off[p + 1] - plan.recv_off[p];
    if (static_cast<int64_t>(got.size()) != want)
      throw error(fmt::format("exchange: {} sent {} bytes, this rank expected {} (send_counts and recv_counts disagree)",
                              rank_at(p), got.size(), want));
    std::memcpy(out + plan.recv_off[p], got.data(), static_cast<size_t>(want));
    call("exchange", false, [&] { store_->deleteKey(keys[i]); });
  }
}

std::string StoreCommunicator::roll_call(double late) {
  if (size_ == 1) return "this rank is the only one";
  // Every rank that timed out calls it once per failure, so the n-th roll call is the same
  // failure's on each of them.
  const std::string rc = fmt::format("{}/rollcall{}", prefix_, roll_calls_++);
  const double grace = std::min(timeout_, kRollCallSeconds);
  std::vector<std::string> keys;
  std::vector<int> owners;
  std::vector<int64_t> late_ms(size_, -1);
  try {
    const int64_t mine = static_cast<int64_t>(late * 1000);
    store_->set(rank_key(rc, rank_), to_bytes(&mine, sizeof mine));
    for (int p = 0; p < size_; ++p)
      if (p != rank_) {
        keys.push_back(rank_key(rc, p));
        owners.push_back(p);
      }
    try {
      store_->wait(keys, as_ms(grace));
    } catch (const c10::Error&) {
      // Some did not answer: found below.
    }
    for (size_t i = 0; i < keys.size(); ++i)
      if (store_->check({keys[i]})) {
        const Bytes b = store_->get(keys[i]);
        if (b.size() == sizeof(int64_t)) std::memcpy(&late_ms[owners[i]], b.data(), sizeof(int64_t));
      }
  } catch (const c10::Error& e) {
    return fmt::format("roll call: the store at {}:{} is unreachable ({})", store_host_, store_port_,
                       first_line(e.what()));
  }
  std::vector<int> silent, stopped;
  for (int p : owners) {
    if (late_ms[p] < 0) silent.push_back(p);
    else if (late_ms[p] > 1000) stopped.push_back(p);
  }
  std::string msg = "roll call: ";
  if (silent.empty())
    msg += fmt::format("every other rank ({}) timed out too", size_ - 1);
  else
    msg += fmt::format("{} did not answer within {:g} s (hung, dead or not in a collective); {} of {} other ranks "
                       "timed out here too",
                       list(silent), grace, size_ - 1 - static_cast<int>(silent.size()), size_ - 1);
  for (int p : stopped)
    msg += fmt::format("; {} answered, but ran again only {:.0f} s after its deadline (it was stopped or starved)",
                       rank_at(p), late_ms[p] / 1000.0);
  return msg;
}

}  // namespace

std::unique_ptr<Communicator> make_store_communicator(const StoreOptions& options,
                                                      const std::function<void(int)>& listening) {
  return std::make_unique<StoreCommunicator>(options, listening);
}

std::unique_ptr<Communicator> make_launch_store_communicator(const LaunchInfo& launch) {
  if (launch.store_host.empty())
    throw std::invalid_argument(fmt::format("make_launch_store_communicator: the {} launch names no store",
                                            launch.source));
  StoreOptions o;
  o.host = launch.store_host;
  o.port = launch.store_port;
  o.serve = launch.rank == 0 && !launch.store_served_by_agent;
  o.rank = launch.rank;
  o.size = launch.size;
  o.local_rank = launch.local_rank;
  o.prefix = launch.store_prefix;
  return make_store_communicator(o);
}

}  // namespace adgnn
