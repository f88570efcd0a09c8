// --predictions: each rank writes its own rows (no rank gathers every row), and a reader that
// assembles the per-rank files in node order.
#include <torch/torch.h>

#include <cstring>
#include <filesystem>

#include "adgnn/trainer.h"
#include "fmt/format.h"

namespace adgnn {

namespace {

constexpr const char* kIndexFormat = "adgnn-predictions-index";
constexpr const char* kPartFormat = "adgnn-predictions-part";

// <stem>.part-<r><ext> beside `path` (pred.h5 -> pred.part-0.h5).
std::string part_name(const std::string& path, int64_t rank) {
  const std::filesystem::path p(path);
  return p.stem().string() + ".part-" + std::to_string(rank) + p.extension().string();
}

int64_t attr_int(const std::map<std::string, std::string>& attrs, const std::string& key, const std::string& where) {
  const auto it = attrs.find(key);
  if (it == attrs.end()) throw InputError(fmt::format("{}: missing attribute '{}'", where, key));
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw InputError(fmt::format("{}: attribute '{}' = '{}' is not an integer", where, key, it->second));
}

}  // namespace

void write_predictions(const std::string& path, std::map<std::string, H5Array> arrays, const at::Tensor& node_id,
                       const GraphPart& part, const std::string& config, Communicator* comm) {
  const int P = comm ? comm->size() : 1;
  if (P == 1) {
    write_arrays_h5(path, arrays, {{"config", config}});
    return;
  }
  const int rank = comm->rank();
  const at::Tensor ids = node_id.to(torch::kCPU, torch::kInt64).contiguous();
  H5Array a;
  a.dtype = "i64";
  a.shape = {ids.numel()};
  a.bytes.assign(static_cast<const char*>(ids.data_ptr()), size_t(ids.nbytes()));
  arrays["node_id"] = std::move(a);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::string error;
  try {
    write_arrays_h5((dir / part_name(path, rank)).string(), arrays,
                    {{"format", kPartFormat}, {"config", config}, {"rank", std::to_string(rank)},
                     {"parts", std::to_string(P)}, {"nodes", std::to_string(part.global_nodes)},
                     {"partition_id", part.partition_id}});
  } catch (const std::exception& e) {
    error = fmt::format("--predictions {} (rank {}): {}", path, rank, e.what());
  }
  // The index goes last, and only when every rank's file is in place.
  int64_t failed = error.empty() ? 0 : 1;
  host_allreduce(*comm, &failed, 1, DType::I64, ReduceOp::Sum);
  if (!error.empty()) throw InputError(error);
  if (failed) throw InputError(fmt::format("--predictions {}: {} rank(s) could not write their rows", path, failed));
  if (rank == 0) {
    std::string files;
    for (int r = 0; r < P; ++r) files += (r ? "," : "") + part_name(path, r);
    write_arrays_h5(path, {},
                    {{"format", kIndexFormat}, {"config", config}, {"parts", std::to_string(P)},
                     {"nodes", std::to_string(part.global_nodes)}, {"partition_id", part.partition_id},
                     {"files", files}});
  }
}

std::map<std::string, H5Array> read_predictions(const std::string& path, std::map<std::string, std::string>* attrs) {
  std::map<std::string, std::string> top;
  std::map<std::string, H5Array> arrays = read_arrays_h5(path, &top);
  if (attrs) *attrs = top;
  if (top.count("format") == 0 || top["format"] != kIndexFormat) return arrays;
  const int64_t parts = attr_int(top, "parts", path), nodes = attr_int(top, "nodes", path);
  if (parts < 1 || nodes < 0) throw InputError(fmt::format("{}: {} parts of {} nodes (corrupt?)", path, parts, nodes));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::vector<uint8_t> seen(static_cast<size_t>(nodes), 0);
  std::map<std::string, H5Array> out;
  for (int64_t r = 0; r < parts; ++r) {
    const std::string file = (dir / part_name(path, r)).string();
    std::map<std::string, std::string> pa;
    std::map<std::string, H5Array> rows = read_arrays_h5(file, &pa);
    if (pa["format"] != kPartFormat || attr_int(pa, "rank", file) != r || attr_int(pa, "parts", file) != parts ||
        attr_int(pa, "nodes", file) != nodes || pa["config"] != top["config"] ||
        pa["partition_id"] != top["partition_id"])
      throw InputError(fmt::format("{}: not rank {}'s rows of this predictions file (another run's?)", file, r));
    const auto id_it = rows.find("node_id");
    if (id_it == rows.end() || id_it->second.dtype != "i64" || id_it->second.shape.size() != 1)
      throw InputError(fmt::format("{}: missing or malformed node_id", file));
    const int64_t count = id_it->second.shape[0];
    std::vector<int64_t> ids(static_cast<size_t>(count));
    if (count) std::memcpy(ids.data(), id_it->second.bytes.data(), size_t(count) * 8);
    for (int64_t id : ids) {
      if (id < 0 || id >= nodes) throw InputError(fmt::format("{}: node id {} outside [0, {})", file, id, nodes));
      if (seen[size_t(id)]++) throw InputError(fmt::format("{}: node {} appears in two part files", file, id));
    }
    rows.erase(id_it);
    for (auto& [name, a] : rows) {
      if (a.shape.empty() || a.shape[0] != count)
        throw InputError(fmt::format("{}: array {} does not have one row per node id", file, name));
      const size_t row_bytes = count ? a.bytes.size() / size_t(count) : 0;
      auto it = out.find(name);
      if (it == out.end()) {
        H5Array whole;
        whole.dtype = a.dtype;
        whole.shape = a.shape;
        whole.shape[0] = nodes;
        whole.bytes.assign(row_bytes * size_t(nodes), '\0');
        it = out.emplace(name, std::move(whole)).first;
      }
      H5Array& whole = it->second;
      std::vector<int64_t> rest_a(a.shape.begin() + 1, a.shape.end()), rest_w(whole.shape.begin() + 1, whole.shape.end());
      if (whole.dtype != a.dtype || rest_a != rest_w)
        throw InputError(fmt::format("{}: array {} differs in type or width from the other parts", file, name));
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(&whole.bytes[size_t(ids[size_t(i)]) * row_bytes], &a.bytes[size_t(i) * row_bytes], row_bytes);
    }
  }
  for (int64_t v = 0; v < nodes; ++v)
    if (!seen[size_t(v)]) throw InputError(fmt::format("{}: node {} is in no part file", path, v));
  if (attrs) *attrs = {{"config", top["config"]}};
  return out;
}

}  // namespace adgnn
