// Partition folders (docs/partition.md): part-<r>.h5 per rank, written with loaders'
// write_arrays_h5, and manifest.json. The manifest is removed first and written last, so a folder
// with a manifest is complete; every part file repeats the graph hash and the part count, so a
// file from another run is refused too.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <limits>
#include <regex>

#include "adgnn/partition.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "internal.h"
#include "nlohmann/json.hpp"

namespace adgnn {

namespace {

// 2: labels and split masks over every source row, the partition id, the graph's identity and
// sizes in the manifest (a rank reads no graph). Version 1 folders are refused: rerun partition.
constexpr int kFormatVersion = 2;
constexpr const char* kPartFormat = "adgnn-partition-part";
constexpr const char* kManifestFormat = "adgnn-partition";

std::string part_file(const std::string& dir, int32_t rank) {
  return (std::filesystem::path(dir) / fmt::format("part-{}.h5", rank)).string();
}

// Array conversion. The vectors are released as soon as they are stored: a part of a big graph
// then needs about one extra copy of its largest array, not of the whole part.
template <class T>
H5Array i64_array(std::vector<T>& v, std::vector<int64_t> shape = {}) {
  H5Array a;
  a.dtype = "i64";
  a.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(v.size())} : shape;
  a.bytes.resize(v.size() * sizeof(int64_t));
  if constexpr (std::is_same_v<T, int64_t>) {
    if (!v.empty()) std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t x = v[i];
      std::memcpy(&a.bytes[i * sizeof(int64_t)], &x, sizeof x);
    }
  }
  std::vector<T>().swap(v);
  return a;
}
template <class T>
H5Array raw_array(std::vector<T>& v, const char* dtype, std::vector<int64_t> shape) {
  H5Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  std::vector<T>().swap(v);
  return a;
}

void put_csr(std::map<std::string, H5Array>& out, const std::string& name, Csr& c) {
  out[name + "/indptr"] = i64_array(c.indptr);
  out[name + "/indices"] = i64_array(c.indices);
}

std::map<std::string, H5Array> part_arrays(GraphPart& gp, std::map<std::string, std::string>& attrs) {
  attrs["format"] = kPartFormat;
  attrs["format_version"] = std::to_string(kFormatVersion);
  attrs["rank"] = std::to_string(gp.rank);
  attrs["parts"] = std::to_string(gp.parts);
  attrs["graph_hash"] = gp.graph_hash;
  attrs["graph_name"] = gp.graph_name;
  attrs["graph_source_sha256"] = gp.graph_source_sha256;
  attrs["partition_id"] = gp.partition_id;
  attrs["method"] = gp.method;
  attrs["global_nodes"] = std::to_string(gp.global_nodes);
  attrs["num_classes"] = std::to_string(gp.num_classes);
  attrs["num_owned"] = std::to_string(gp.num_owned);
  attrs["features_sparse"] = gp.features.sparse ? "1" : "0";
  attrs["features_rows"] = std::to_string(gp.features.rows);
  attrs["features_cols"] = std::to_string(gp.features.cols);
  attrs["splits"] = std::to_string(gp.splits.size());

  const int64_t sources = static_cast<int64_t>(gp.global_id.size());  // before global_id is released
  std::map<std::string, H5Array> a;
  a["global_id"] = i64_array(gp.global_id);
  a["halo_owner"] = i64_array(gp.halo_owner);
  a["halo_owner_index"] = i64_array(gp.halo_owner_index);
  a["recv_offset"] = i64_array(gp.recv_offset);
  // The send lists as one CSR over the peers.
  std::vector<int64_t> send_indptr{0}, send_rows;
  for (const auto& s : gp.send) {
    send_rows.insert(send_rows.end(), s.begin(), s.end());
    send_indptr.push_back(static_cast<int64_t>(send_rows.size()));
  }
  std::vector<std::vector<int64_t>>().swap(gp.send);
  a["send/indptr"] = i64_array(send_indptr);
  a["send/rows"] = i64_array(send_rows);
  // out and in equal sym whenever every edge is stored in both directions (most undirected
  // datasets): then they are not stored twice more.
  const bool out_is_sym = gp.out.indptr == gp.sym.indptr && gp.out.indices == gp.sym.indices;
  const bool in_is_sym = gp.in.indptr == gp.sym.indptr && gp.in.indices == gp.sym.indices;
  attrs["out_is_sym"] = out_is_sym ? "1" : "0";
  attrs["in_is_sym"] = in_is_sym ? "1" : "0";
  if (!out_is_sym) put_csr(a, "out", gp.out);
  if (!in_is_sym) put_csr(a, "in", gp.in);
  put_csr(a, "sym", gp.sym);
  a["degree"] = i64_array(gp.degree);
  a["in_degree"] = i64_array(gp.in_degree);
  a["out_degree"] = i64_array(gp.out_degree);
  std::vector<double> mdp{gp.max_degree_product};
  a["max_degree_product"] = raw_array(mdp, "f64", {1});
  Features& f = gp.features;
  if (f.sparse) {
    attrs["features_values"] = f.csr.values.empty() ? "0" : "1";  // absent: every entry is 1
    a["features/indptr"] = i64_array(f.csr.indptr);
    const int64_t nnz = static_cast<int64_t>(f.csr.indices.size());
    a["features/indices"] = i64_array(f.csr.indices);
    if (!f.csr.values.empty()) a["features/values"] = raw_array(f.csr.values, "f32", {nnz});
  } else {
    a["features/dense"] = raw_array(f.dense, "f32", {f.rows, f.cols});
  }
  a["labels"] = i64_array(gp.labels);
  for (size_t s = 0; s < gp.splits.size(); ++s) {
    SplitSet& set = gp.splits[s];
    attrs[fmt::format("split_{}_name", s)] = set.name;
    attrs[fmt::format("split_{}_count", s)] = std::to_string(set.count);
    const std::vector<int64_t> shape{set.count, sources};
    for (auto [name, mask] : {std::pair<const char*, std::vector<uint8_t>*>{"train", &set.train},
                              {"val", &set.val},
                              {"test", &set.test}})
      if (!mask->empty()) a[fmt::format("splits/{}/{}", s, name)] = raw_array(*mask, "u8", shape);
  }
  return a;
}

// ---- reading ----

class PartReader {
 public:
  PartReader(std::string where, std::map<std::string, H5Array> arrays,
             std::map<std::string, std::string> attrs)
      : where_(std::move(where)), arrays_(std::move(arrays)), attrs_(std::move(attrs)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where_, what));
  }
  const std::string& attr(const std::string& name) const {
    const auto it = attrs_.find(name);
    if (it == attrs_.end()) fail(fmt::format("missing attribute '{}'", name));
    return it->second;
  }
  int64_t attr_int(const std::string& name) const {
    const std::string& s = attr(name);
    try {
      size_t used = 0;
      const long long v = std::stoll(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
    fail(fmt::format("attribute '{}' = '{}' is not an integer", name, s));
  }
  bool has(const std::string& name) const { return arrays_.count(name) > 0; }
  std::vector<int64_t> shape(const std::string& name) const {
    const auto it = arrays_.find(name);
    if (it == arrays_.end()) fail(fmt::format("missing array {}", name));
    return it->second.shape;
  }

  // Takes an array out of the file's map (releasing it), checking dtype and shape.
  H5Array take(const std::string& name, const char* dtype, const std::vector<int64_t>& shape) {
    const auto it = arrays_.find(name);
    if (it == arrays_.end()) fail(fmt::format("missing array {}", name));
    H5Array a = std::move(it->second);
    arrays_.erase(it);
    if (a.dtype != dtype) fail(fmt::format("array {} is {}, expected {}", name, a.dtype, dtype));
    if (a.shape != shape)
      fail(fmt::format("array {} has shape ({}), expected ({})", name, fmt::join(a.shape, ", "),
                       fmt::join(shape, ", ")));
    return a;
  }
  // A 1-d i64 array of length n with every value in [lo, hi).
  template <class T = int64_t>
  std::vector<T> ints(const std::string& name, int64_t n, int64_t lo, int64_t hi) {
    const H5Array a = take(name, "i64", {n});
    std::vector<T> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t x;
      std::memcpy(&x, &a.bytes[static_cast<size_t>(i) * 8], 8);
      if (x < lo || x >= hi)
        fail(fmt::format("array {}[{}] = {} is outside [{}, {})", name, i, x, lo, hi));
      out[static_cast<size_t>(i)] = static_cast<T>(x);
    }
    return out;
  }
  // An indptr of `rows` rows: starts at 0, never decreases; returns it, its last value = nnz.
  std::vector<int64_t> indptr(const std::string& name, int64_t rows) {
    std::vector<int64_t> p = ints(name, rows + 1, 0, std::numeric_limits<int64_t>::max());
    if (p[0] != 0) fail(fmt::format("array {} does not start at 0", name));
    for (int64_t r = 0; r < rows; ++r)
      if (p[r + 1] < p[r]) fail(fmt::format("array {} decreases at row {}", name, r));
    return p;
  }
  Csr csr(const std::string& name, int64_t rows, int64_t cols) {
    Csr c;
    c.rows = rows;
    c.cols = cols;
    c.indptr = indptr(name + "/indptr", rows);
    c.indices = ints<int32_t>(name + "/indices", c.indptr.back(), 0, cols);
    return c;
  }
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape) {
    const H5Array a = take(name, "f32", shape);
    std::vector<float> out(a.bytes.size() / sizeof(float));
    if (!out.empty()) std::memcpy(out.data(), a.bytes.data(), a.bytes.size());
    return out;
  }
  std::vector<uint8_t> bytes(const std::string& name, const std::vector<int64_t>& shape) {
    const H5Array a = take(name, "u8", shape);
    return std::vector<uint8_t>(a.bytes.begin(), a.bytes.end());
  }

 private:
  std::string where_;
  std::map<std::string, H5Array> arrays_;
  std::map<std::string, std::string> attrs_;
};

nlohmann::json read_manifest(const std::string& dir, const std::string& flag) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(fmt::format("{}: no such folder", flag));
  if (!std::filesystem::exists(path, ec))
    throw InputError(fmt::format("{}: no manifest.json (not a partition folder, or its writing "
                                 "did not finish)",
                                 flag));
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception&) {
    throw InputError(fmt::format("{}: manifest.json is not valid JSON (corrupt?)", flag));
  }
  try {
    if (m.at("format").get<std::string>() != kManifestFormat)
      throw InputError(fmt::format("{}: manifest.json is not a partition manifest", flag));
    const int v = m.at("format_version").get<int>();
    if (v != kFormatVersion)
      throw InputError(fmt::format("{}: format version {}, this build reads version {} (run "
                                   "`adgnn partition` again)",
                                   flag, v, kFormatVersion));
    bool ok = true;
    for (const char* key : {"graph_hash", "graph_name", "graph_source_sha256", "partition_id", "method"})
      (void)m.at(key).get<std::string>();
    for (const char* key : {"parts", "nodes", "stored_edges", "features", "classes"})
      ok = ok && m.at(key).get<int64_t>() >= 0;
    for (const auto& f : m.at("split_families"))
      ok = ok && !f.at("name").get<std::string>().empty() && f.at("count").get<int64_t>() >= 0;
    for (const char* key : {"part_nodes", "halo_rows"})
      ok = ok && m.at(key).is_array() && m.at(key).size() == m.at("parts").get<size_t>();
    if (!ok) throw InputError(fmt::format("{}: manifest.json has a negative size or count, or per-part "
                                          "lists of the wrong length (corrupt?)", flag));
    if (m.at("classes").get<int64_t>() > kMaxClasses)
      throw InputError(fmt::format("{}: manifest.json: {} classes, at most {} are supported", flag,
                                   m.at("classes").get<int64_t>(), kMaxClasses));
  } catch (const nlohmann::json::exception&) {
    throw InputError(fmt::format("{}: manifest.json lacks or garbles a required key (format, graph "
                                 "identity, sizes, split families, parts; corrupt?)",
                                 flag));
  }
  return m;
}

}  // namespace

namespace detail {

void prepare_partition_folder(const std::string& dir, int32_t parts) {
  namespace fs = std::filesystem;
  const std::string flag = fmt::format("--out {}", dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw InputError(fmt::format("{}: cannot create the folder ({})", flag,
                                 ec ? ec.message() : "exists and is not a folder"));
  // The folder is invalid from here until the new manifest is in place.
  const fs::path manifest = fs::path(dir) / "manifest.json";
  fs::remove(manifest, ec);
  if (ec) throw InputError(fmt::format("{}: cannot remove the old manifest.json ({})", flag, ec.message()));
  // Part files of an earlier partition into more parts.
  const std::regex part_name(R"(part-(\d+)\.h5)");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, part_name) && std::stoll(m[1].str()) >= parts)
      fs::remove(e.path(), ec);
  }
}

int64_t write_part_file(const std::string& dir, GraphPart& gp) {
  int64_t sent = 0;
  for (const auto& s : gp.send) sent += static_cast<int64_t>(s.size());
  std::map<std::string, std::string> attrs;
  const int32_t rank = gp.rank;
  const std::map<std::string, H5Array> arrays = part_arrays(gp, attrs);
  write_arrays_h5(part_file(dir, rank), arrays, attrs);
  return sent;
}

void write_manifest(const std::string& dir, const PartitionManifest& id, const Partition& p,
                    const std::string& method_desc, const PartitionOptions* opt,
                    const std::vector<int64_t>& send_rows) {
  nlohmann::json m;
  m["format"] = kManifestFormat;
  m["format_version"] = kFormatVersion;
  m["graph_hash"] = id.graph_hash;
  m["graph_name"] = id.graph_name;
  m["graph_source_sha256"] = id.graph_source_sha256;
  m["partition_id"] = id.partition_id;
  m["nodes"] = id.nodes;
  m["stored_edges"] = id.stored_edges;
  m["features"] = id.features;
  m["classes"] = id.classes;
  nlohmann::json families = nlohmann::json::array();
  for (const auto& [name, count] : id.split_families) families.push_back({{"name", name}, {"count", count}});
  m["split_families"] = families;
  m["parts"] = p.parts;
  m["method"] = method_desc;
  if (opt) {
    m["objective"] = opt->objective;
    m["seed"] = opt->seed;
    m["balance_train"] = opt->balance_train;
    m["balance_edges"] = opt->balance_edges;
    if (opt->imbalance > 0) m["imbalance"] = opt->imbalance;
  } else {
    m["objective"] = nullptr;
    m["seed"] = nullptr;
  }
  if (p.strata > 0) {
    m["strata"] = p.strata;  // the bins of part_strata (balanced by "stratified")
    m["strata_spacing"] = p.strata_spacing;
  }
  m["edge_cut"] = p.edge_cut;
  nlohmann::json balance;
  balance["nodes"] = p.node_imbalance;
  balance["edges"] = p.edge_imbalance;
  if (!p.part_train.empty()) balance["train"] = p.train_imbalance;
  if (p.strata > 0) balance["strata"] = p.stratum_imbalance;
  m["balance"] = balance;  // max / mean over the parts, per constraint
  m["part_nodes"] = p.part_nodes;
  m["part_edges"] = p.part_edges;
  if (!p.part_train.empty()) m["part_train"] = p.part_train;
  if (p.strata > 0) {
    nlohmann::json rows = nlohmann::json::array();
    for (int32_t q = 0; q < p.parts; ++q)
      rows.push_back(std::vector<int64_t>(p.part_strata.begin() + int64_t(q) * p.strata,
                                          p.part_strata.begin() + int64_t(q + 1) * p.strata));
    m["part_strata"] = rows;  // [part][stratum], stratum strata-1 = highest benefit
  }
  if (!p.part_top.empty()) {
    const size_t k = std::size(kTopFractions);
    nlohmann::json rows = nlohmann::json::array();
    for (int32_t q = 0; q < p.parts; ++q)
      rows.push_back(std::vector<int64_t>(p.part_top.begin() + int64_t(q) * k,
                                          p.part_top.begin() + int64_t(q + 1) * k));
    m["top_fractions"] = std::vector<double>(std::begin(kTopFractions), std::end(kTopFractions));
    m["part_top"] = rows;  // [part][fraction]: nodes among the highest-score fraction
  }
  m["halo_rows"] = id.halo_rows;
  m["send_rows"] = send_rows;
  nlohmann::json files = nlohmann::json::array();
  for (int32_t r = 0; r < p.parts; ++r) files.push_back(fmt::format("part-{}.h5", r));
  m["files"] = files;
  write_file_atomic((std::filesystem::path(dir) / "manifest.json").string(), m.dump(2) + "\n");
}

}  // namespace detail

void write_partition(const Graph& g, const Partition& p, const std::string& dir,
                     const std::string& method_desc, const PartitionOptions* opt,
                     const GraphFileReader* rows) {
  detail::prepare_partition_folder(dir, p.parts);
  PartBuilder builder(g, p, rows);
  PartitionManifest id;
  id.graph_hash = builder.graph_hash();
  id.graph_name = g.name;
  id.graph_source_sha256 = g.source_sha256;
  id.nodes = g.num_nodes;
  id.stored_edges = g.adj.nnz();
  id.features = g.features.cols;
  id.classes = g.num_classes;
  for (const SplitSet& s : g.splits) id.split_families.emplace_back(s.name, s.count);
  std::vector<int64_t> send_rows;
  for (int32_t r = 0; r < p.parts; ++r) {
    GraphPart gp = builder.build(r);
    id.partition_id = gp.partition_id;
    id.halo_rows.push_back(gp.num_halo());
    send_rows.push_back(detail::write_part_file(dir, gp));
  }
  detail::write_manifest(dir, id, p, method_desc, opt, send_rows);
}

PartitionManifest read_partition_manifest(const std::string& dir) {
  const nlohmann::json m = read_manifest(dir, fmt::format("--partition-dir {}", dir));
  PartitionManifest out;
  out.dir = dir;
  out.graph_hash = m["graph_hash"];
  out.graph_name = m["graph_name"];
  out.graph_source_sha256 = m["graph_source_sha256"];
  out.partition_id = m["partition_id"];
  out.method = m["method"];
  out.parts = m["parts"];
  out.nodes = m["nodes"];
  out.stored_edges = m["stored_edges"];
  out.features = m["features"];
  out.classes = m["classes"];
  for (const auto& f : m["split_families"]) out.split_families.emplace_back(f["name"], f["count"]);
  out.part_nodes = m["part_nodes"].get<std::vector<int64_t>>();
  out.halo_rows = m["halo_rows"].get<std::vector<int64_t>>();
  return out;
}

GraphPart read_part(const std::string& dir, int32_t rank, int32_t expected_parts,
                    const std::string& expected_graph_hash) {
  const std::string flag = fmt::format("--partition-dir {}", dir);
  const PartitionManifest m = read_partition_manifest(dir);
  const int64_t parts = m.parts;
  const std::string& hash = m.graph_hash;
  const std::string& name = m.graph_name;
  if (parts != expected_parts)
    throw InputError(fmt::format("{}: made for {} parts, this run has {} ranks", flag, parts,
                                 expected_parts));
  if (!expected_graph_hash.empty() && hash != expected_graph_hash)
    throw InputError(fmt::format("{}: made for graph {} ('{}'), this run's graph is {}", flag,
                                 hash, name, expected_graph_hash));
  if (rank < 0 || rank >= parts)
    throw InputError(fmt::format("{}: rank {} outside [0, {})", flag, rank, parts));

  const std::string path = part_file(dir, rank);
  std::map<std::string, std::string> attrs;
  std::map<std::string, H5Array> arrays;
  try {
    arrays = read_arrays_h5(path, &attrs);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", flag, e.what()));
  }
  PartReader r(fmt::format("{}: {}", flag, path), std::move(arrays), std::move(attrs));
  if (r.attr("format") != kPartFormat) r.fail("not a partition part file");
  if (r.attr_int("format_version") != kFormatVersion)
    r.fail(fmt::format("format version {}, this build reads version {}",
                       r.attr("format_version"), kFormatVersion));
  // The part file must belong to this manifest (a file copied in from another run must not).
  if (r.attr("graph_hash") != hash || r.attr_int("parts") != parts || r.attr_int("rank") != rank)
    r.fail(fmt::format("is rank {} of {} parts of graph {}, the manifest says rank {} of {} of {}",
                       r.attr("rank"), r.attr("parts"), r.attr("graph_hash"), rank, parts, hash));
  if (r.attr("partition_id") != m.partition_id)
    r.fail(fmt::format("belongs to partition {}, the manifest's is {} (part files of two "
                       "partitions mixed in one folder)",
                       r.attr("partition_id"), m.partition_id));

  GraphPart gp;
  gp.rank = rank;
  gp.parts = static_cast<int32_t>(parts);
  gp.graph_hash = hash;
  gp.graph_name = m.graph_name;
  gp.graph_source_sha256 = m.graph_source_sha256;
  gp.partition_id = m.partition_id;
  gp.method = r.attr("method");
  gp.global_nodes = r.attr_int("global_nodes");
  gp.num_classes = r.attr_int("num_classes");
  gp.num_owned = r.attr_int("num_owned");
  if (gp.global_nodes != m.nodes || gp.num_classes != m.classes)
    r.fail(fmt::format("has {} nodes and {} classes, the manifest {} and {}", gp.global_nodes,
                       gp.num_classes, m.nodes, m.classes));
  const int64_t n = gp.global_nodes, owned = gp.num_owned;
  if (n < 0 || owned < 0 || owned > n) r.fail(fmt::format("{} owned rows of {} nodes", owned, n));
  gp.recv_offset = r.indptr("recv_offset", parts);
  const int64_t halo = gp.recv_offset.back(), sources = owned + halo;
  if (sources > n) r.fail(fmt::format("{} source rows for a graph of {} nodes", sources, n));
  gp.global_id = r.ints("global_id", sources, 0, n);
  gp.halo_owner = r.ints<int32_t>("halo_owner", halo, 0, parts);
  gp.halo_owner_index = r.ints("halo_owner_index", halo, 0, n);
  const std::vector<int64_t> send_indptr = r.indptr("send/indptr", parts);
  const std::vector<int64_t> send_rows = r.ints("send/rows", send_indptr.back(), 0, owned);
  gp.send.resize(static_cast<size_t>(parts));
  for (int64_t q = 0; q < parts; ++q)
    gp.send[q].assign(send_rows.begin() + send_indptr[q], send_rows.begin() + send_indptr[q + 1]);
  gp.sym = r.csr("sym", owned, sources);
  gp.out = r.attr("out_is_sym") == "1" ? gp.sym : r.csr("out", owned, sources);
  gp.in = r.attr("in_is_sym") == "1" ? gp.sym : r.csr("in", owned, sources);
  const int64_t big = std::numeric_limits<int64_t>::max();
  gp.degree = r.ints("degree", sources, 0, big);
  gp.in_degree = r.ints("in_degree", sources, 0, big);
  gp.out_degree = r.ints("out_degree", sources, 0, big);
  {
    const H5Array a = r.take("max_degree_product", "f64", {1});
    std::memcpy(&gp.max_degree_product, a.bytes.data(), sizeof(double));
  }
  Features& f = gp.features;
  f.sparse = r.attr("features_sparse") == "1";
  f.cols = r.attr_int("features_cols");
  if (f.cols < 0) r.fail("negative feature width");
  f.rows = r.attr_int("features_rows");
  if (f.rows != sources && f.rows != 0)
    r.fail(fmt::format("{} feature rows for {} source rows", f.rows, sources));
  if (f.sparse) {
    f.csr = r.csr("features", f.rows, f.cols);
    if (r.attr("features_values") == "1") f.csr.values = r.floats("features/values", {f.csr.nnz()});
  } else {
    f.dense = r.floats("features/dense", {f.rows, f.cols});
  }
  if (f.cols != m.features)
    r.fail(fmt::format("has {} feature columns, the manifest {}", f.cols, m.features));
  // Labels of the source rows, or none (a graph without labels).
  const std::vector<int64_t> label_shape = r.shape("labels");
  const int64_t labelled = label_shape == std::vector<int64_t>{0} ? 0 : sources;
  gp.labels = r.ints("labels", labelled, kUnlabelled, std::max<int64_t>(gp.num_classes, 1));
  const int64_t splits = r.attr_int("splits");
  for (int64_t s = 0; s < splits; ++s) {
    SplitSet set;
    set.name = r.attr(fmt::format("split_{}_name", s));
    set.count = r.attr_int(fmt::format("split_{}_count", s));
    if (set.count < 0) r.fail(fmt::format("split {} has a negative count", s));
    for (auto [which, mask] : {std::pair<const char*, std::vector<uint8_t>*>{"train", &set.train},
                               {"val", &set.val},
                               {"test", &set.test}}) {
      const std::string key = fmt::format("splits/{}/{}", s, which);
      if (r.has(key)) *mask = r.bytes(key, {set.count, sources});
    }
    gp.splits.push_back(std::move(set));
  }
  return gp;
}

}  // namespace adgnn
