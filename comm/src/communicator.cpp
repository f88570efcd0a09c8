// The backend-independent part of the communicator: errors, dtypes, timeouts.
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "adgnn/comm.h"
#include "fmt/format.h"

namespace adgnn {

namespace {

std::string error_message(int rank, const std::string& host, const std::string& what) {
  const std::string r = rank >= 0 ? std::to_string(rank) : std::string("?");
  return fmt::format("rank {} on host {}: {}", r, host.empty() ? "?" : host, what);
}

}  // namespace

CommError::CommError(int rank, const std::string& host, const std::string& what)
    : std::runtime_error(error_message(rank, host, what)), rank_(rank), host_(host) {}

int64_t dtype_bytes(DType dt) {
  switch (dt) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I64: return 8;
  }
  throw std::invalid_argument("dtype_bytes: invalid DType");
}

const char* to_string(DType dt) {
  switch (dt) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I64: return "I64";
  }
  return "invalid DType";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "Sum";
    case ReduceOp::Max: return "Max";
    case ReduceOp::Min: return "Min";
  }
  return "invalid ReduceOp";
}

double default_comm_timeout() {
  const char* env = std::getenv("ADGNN_COMM_TIMEOUT");
  if (env == nullptr || *env == '\0') return 300.0;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(env, &end);
  while (end != nullptr && (*end == ' ' || *end == '\t')) ++end;
  if (errno != 0 || end == env || *end != '\0' || std::isnan(v) || v <= 0)
    throw std::invalid_argument(fmt::format(
        "ADGNN_COMM_TIMEOUT={}: must be a positive number of seconds (or inf)", env));
  return v;
}

Communicator::Communicator() : timeout_(default_comm_timeout()) {}

void Communicator::set_timeout(double seconds) {
  if (std::isnan(seconds) || seconds <= 0)
    throw std::invalid_argument(
        fmt::format("Communicator::set_timeout({}): must be > 0 seconds (inf disables)", seconds));
  timeout_ = seconds;
}

Communicator::ExchangePlan Communicator::plan_exchange(const void* send,
                                                       const std::vector<int64_t>& send_counts,
                                                       const void* recv,
                                                       const std::vector<int64_t>& recv_counts,
                                                       int64_t row_bytes) const {
  const int n = size(), me = rank();
  auto fail = [&](const std::string& what) { throw CommError(me, host(), what); };
  if (static_cast<int64_t>(send_counts.size()) != n || static_cast<int64_t>(recv_counts.size()) != n)
    fail(fmt::format("exchange: {} send and {} receive counts, expected {} (one per rank)",
                     send_counts.size(), recv_counts.size(), n));
  if (row_bytes < 0) fail(fmt::format("exchange: row_bytes {} < 0", row_bytes));
  ExchangePlan plan;
  plan.send_off.assign(n + 1, 0);
  plan.recv_off.assign(n + 1, 0);
  for (int p = 0; p < n; ++p) {
    for (const auto* counts : {&send_counts, &recv_counts}) {
      const int64_t c = (*counts)[p];
      if (c < 0 || (row_bytes > 0 && c > INT64_MAX / row_bytes))
        fail(fmt::format("exchange: {}_counts[{}] = {} is invalid for {}-byte rows",
                         counts == &send_counts ? "send" : "recv", p, c, row_bytes));
    }
    plan.send_off[p + 1] = plan.send_off[p] + send_counts[p] * row_bytes;
    plan.recv_off[p + 1] = plan.recv_off[p] + recv_counts[p] * row_bytes;
    if (plan.send_off[p + 1] < plan.send_off[p] || plan.recv_off[p + 1] < plan.recv_off[p])
      fail("exchange: total bytes overflow int64");
  }
  if (send_counts[me] != recv_counts[me])
    fail(fmt::format("exchange: send_counts[{0}] = {1} but recv_counts[{0}] = {2}: the "
                     "rows a rank sends itself must match",
                     me, send_counts[me], recv_counts[me]));
  if ((send == nullptr && plan.send_off[n] > 0) || (recv == nullptr && plan.recv_off[n] > 0))
    fail("exchange: null buffer with non-zero counts");
  return plan;
}

}  // namespace adgnn
