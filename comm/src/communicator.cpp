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

}  // namespace adgnn
