// Readers of the upstream benchmark layouts, and finding a dataset by name or path.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "adgnn/loaders.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "gzip_lines.h"
#include "internal.h"

namespace adgnn {

using detail::join_path;

namespace {

const NpyArray& member(const std::map<std::string, NpyArray>& arrays, const std::string& name,
                       const std::string& where) {
  auto it = arrays.find(name);
  if (it == arrays.end()) throw InputError(fmt::format("{}: missing member '{}'", where, name));
  return it->second;
}

std::string mw(const std::string& where, const std::string& name) {
  return fmt::format("{}[{}]", where, name);
}

void expect_shape(const NpyArray& a, std::vector<int64_t> shape, const std::string& where) {
  if (a.shape != shape) {
    auto show = [](const std::vector<int64_t>& s) { return fmt::format("({})", fmt::join(s, ", ")); };
    throw InputError(fmt::format("{}: shape {} does not match the expected {}", where,
                                 show(a.shape), show(shape)));
  }
}

// A SciPy CSR matrix stored as <p>_data/_indices/_indptr/_shape.
Csr read_scipy_csr(const std::map<std::string, NpyArray>& arrays, const std::string& p,
                   const std::string& where, bool keep_values) {
  const auto shape = member(arrays, p + "_shape", where).as_int64(mw(where, p + "_shape"));
  if (shape.size() != 2 || shape[0] < 0 || shape[1] < 0)
    throw InputError(fmt::format("{}: {}_shape must hold two non-negative sizes", where, p));
  Csr c;
  c.rows = shape[0];
  c.cols = shape[1];
  const auto& ip = member(arrays, p + "_indptr", where);
  const auto& ix = member(arrays, p + "_indices", where);
  expect_shape(ip, {c.rows + 1}, mw(where, p + "_indptr"));
  if (ix.shape.size() != 1)
    throw InputError(fmt::format("{}: must be one-dimensional", mw(where, p + "_indices")));
  c.indptr = ip.as_int64(mw(where, p + "_indptr"));
  const auto idx = ix.as_int64(mw(where, p + "_indices"));
  c.indices.resize(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    if (idx[k] < 0 || idx[k] >= c.cols)
      throw InputError(fmt::format("{}: index {} at position {} out of range [0, {})",
                                   mw(where, p + "_indices"), idx[k], k, c.cols));
    c.indices[k] = static_cast<int32_t>(idx[k]);
  }
  if (c.indptr.front() != 0 || c.indptr.back() != static_cast<int64_t>(idx.size()))
    throw InputError(fmt::format("{}: row pointers do not span the {} indices",
                                 mw(where, p + "_indptr"), idx.size()));
  for (int64_t r = 0; r < c.rows; ++r)
    if (c.indptr[r + 1] < c.indptr[r])
      throw InputError(fmt::format("{}: row pointers decrease at row {}",
                                   mw(where, p + "_indptr"), r));
  if (keep_values) {
    const auto& d = member(arrays, p + "_data", where);
    expect_shape(d, {static_cast<int64_t>(idx.size())}, mw(where, p + "_data"));
    c.values = d.as_float(mw(where, p + "_data"));
  }
  return c;
}

std::vector<int64_t> read_labels(const std::map<std::string, NpyArray>& arrays,
                                 const std::string& name, int64_t n, const std::string& where) {
  const auto& l = member(arrays, name, where);
  expect_shape(l, {n}, mw(where, name));
  return l.as_int64(mw(where, name));
}

bool is_symmetric(const Csr& a) {
  // Compare the sorted, loop-free set of (u, v) with that of (v, u).
  std::vector<uint64_t> fwd, bwd;
  for (int64_t u = 0; u < a.rows; ++u)
    for (int64_t k = a.indptr[u]; k < a.indptr[u + 1]; ++k) {
      const uint64_t v = static_cast<uint64_t>(a.indices[k]);
      if (v == static_cast<uint64_t>(u)) continue;
      fwd.push_back((static_cast<uint64_t>(u) << 32) | v);
      bwd.push_back((v << 32) | static_cast<uint64_t>(u));
    }
  std::sort(fwd.begin(), fwd.end());
  fwd.erase(std::unique(fwd.begin(), fwd.end()), fwd.end());
  std::sort(bwd.begin(), bwd.end());
  bwd.erase(std::unique(bwd.begin(), bwd.end()), bwd.end());
  return fwd == bwd;
}

// The prefix of "<prefix>_split_0.6_0.2_0.npz" in dir, or "" when there is none.
std::string split_prefix(const std::string& dir) {
  const std::string tail = "_split_0.6_0.2_0.npz";
  for (const auto& n : detail::list_directory(dir))
    if (n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0)
      return n.substr(0, n.size() - tail.size());
  return "";
}

std::string parent_dir(const std::string& path) {
  auto pos = path.find_last_of('/');
  return pos == std::string::npos ? "." : path.substr(0, pos);
}

std::string stem(const std::string& path) {
  auto b = detail::base_name(path);
  auto dot = b.rfind('.');
  return dot == std::string::npos ? b : b.substr(0, dot);
}

Graph graph_from_csr_arrays(const std::map<std::string, NpyArray>& arrays,
                            const std::string& path) {
  Graph g;
  g.adj = read_scipy_csr(arrays, "adj", path, false);
  if (g.adj.rows != g.adj.cols)
    throw InputError(fmt::format("{}: adjacency is {} x {}, not square", path, g.adj.rows,
                                 g.adj.cols));
  g.num_nodes = g.adj.rows;
  g.features.sparse = true;
  g.features.csr = read_scipy_csr(arrays, "attr", path, true);
  g.features.rows = g.features.csr.rows;
  g.features.cols = g.features.csr.cols;
  if (g.features.rows != g.num_nodes)
    throw InputError(fmt::format("{}: attr_shape has {} rows for {} nodes", path,
                                 g.features.rows, g.num_nodes));
  g.labels = read_labels(arrays, "labels", g.num_nodes, path);
  g.num_classes = detail::count_classes(g.labels, mw(path, "labels"));
  if (arrays.count("train_mask")) {
    SplitSet s;
    s.name = "public";
    s.count = 1;
    for (auto [key, dst] : {std::pair<const char*, std::vector<uint8_t>*>{"train_mask", &s.train},
                            {"val_mask", &s.val},
                            {"test_mask", &s.test}}) {
      const auto& m = member(arrays, key, path);
      expect_shape(m, {g.num_nodes}, mw(path, key));
      for (auto v : m.as_int64(mw(path, key))) dst->push_back(v != 0);
    }
    g.splits.push_back(std::move(s));
  }
  g.directed = !is_symmetric(g.adj);
  return g;
}

Graph graph_from_platonov_arrays(const std::map<std::string, NpyArray>& arrays,
                                 const std::string& path) {
  Graph g;
  const auto& x = member(arrays, "node_features", path);
  if (x.shape.size() != 2)
    throw InputError(fmt::format("{}: must be two-dimensional", mw(path, "node_features")));
  g.num_nodes = x.shape[0];
  g.features.rows = x.shape[0];
  g.features.cols = x.shape[1];
  g.features.dense = x.as_float(mw(path, "node_features"));
  g.labels = read_labels(arrays, "node_labels", g.num_nodes, path);
  g.num_classes = detail::count_classes(g.labels, mw(path, "node_labels"));
  const auto& e = member(arrays, "edges", path);
  if (e.shape.size() != 2 || e.shape[1] != 2)
    throw InputError(fmt::format("{}: expected shape (E, 2)", mw(path, "edges")));
  const auto ev = e.as_int64(mw(path, "edges"));
  std::vector<int64_t> src(ev.size() / 2), dst(ev.size() / 2);
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = ev[2 * i];
    dst[i] = ev[2 * i + 1];
    if (src[i] < 0 || src[i] >= g.num_nodes || dst[i] < 0 || dst[i] >= g.num_nodes)
      throw InputError(fmt::format("{}: edge {} ({}, {}) out of range [0, {})",
                                   mw(path, "edges"), i, src[i], dst[i], g.num_nodes));
  }
  g.adj = detail::csr_from_edges(g.num_nodes, src, dst);
  SplitSet s;
  s.name = "platonov";
  bool first = true;
  for (auto [key, dst_mask] :
       {std::pair<const char*, std::vector<uint8_t>*>{"train_masks", &s.train},
        {"val_masks", &s.val},
        {"test_masks", &s.test}}) {
    const auto& m = member(arrays, key, path);
    if (m.shape.size() != 2 || m.shape[1] != g.num_nodes)
      throw InputError(fmt::format("{}: expected shape (splits, {})", mw(path, key), g.num_nodes));
    if (first) s.count = m.shape[0];
    if (m.shape[0] != s.count)
      throw InputError(fmt::format("{}: {} splits, the train masks have {}", mw(path, key),
                                   m.shape[0], s.count));
    first = false;
    for (auto v : m.as_int64(mw(path, key))) dst_mask->push_back(v != 0);
  }
  g.splits.push_back(std::move(s));
  g.directed = false;  // each undirected edge is listed once (u < v)
  return g;
}

Graph load_npz_any(const std::string& path) {
  const std::string bytes = read_file(path);
  const auto arrays = parse_npz(bytes, path);
  Graph g;
  if (arrays.count("adj_indptr")) {
    g = graph_from_csr_arrays(arrays, path);
  } else if (arrays.count("edges") && arrays.count("node_features")) {
    g = graph_from_platonov_arrays(arrays, path);
  } else {
    throw InputError(fmt::format(
        "{}: unrecognised npz layout (expected adj_*/attr_*/labels or edges/node_features)",
        path));
  }
  g.source = path;
  std::vector<std::pair<std::string, std::string>> hashes{{detail::base_name(path),
                                                           sha256_hex(bytes)}};
  const std::string dir = parent_dir(path);
  const std::string prefix = split_prefix(dir);
  if (!prefix.empty() && g.find_splits("platonov") == nullptr)
    detail::load_geomgcn_split_files(g, dir, prefix, "geom-gcn", &hashes);
  g.source_sha256 = hashes.size() == 1 ? hashes[0].second : detail::combined_sha256(hashes);
  g.name = stem(path);
  for (const char* suffix : {"_filtered"})
    if (g.name.size() > std::string(suffix).size() &&
        g.name.compare(g.name.size() - std::string(suffix).size(), std::string::npos, suffix) == 0)
      g.name.resize(g.name.size() - std::string(suffix).size());
  if (g.name == "amazon_electronics_photo") g.name = "photo";
  g.validate(path);
  return g;
}

}  // namespace

Graph load_csr_npz(const std::string& path) {
  auto g = load_npz_any(path);
  return g;
}

Graph load_platonov_npz(const std::string& path) { return load_npz_any(path); }

namespace {

// Edge lines "u<sep>v" from any line source (LineCursor over text, GzipLines over a file).
template <class Lines>
Csr parse_edges(Lines& cur, const std::string& where, int64_t num_nodes, bool header, char sep) {
  std::string_view line;
  if (header && !cur.next(line)) throw InputError(fmt::format("{}: empty file", where));
  std::vector<int64_t> src, dst;
  while (cur.next(line)) {
    if (line.empty()) continue;
    const auto f = detail::split(line, sep);
    if (f.size() != 2)
      throw InputError(fmt::format("{}:{}: expected 2 fields, found {}", where, cur.lineno(),
                                   f.size()));
    const int64_t u = detail::parse_int(f[0], where, cur.lineno());
    const int64_t v = detail::parse_int(f[1], where, cur.lineno());
    if (u < 0 || u >= num_nodes || v < 0 || v >= num_nodes)
      throw InputError(fmt::format("{}:{}: node id out of range [0, {}) in edge ({}, {})", where,
                                   cur.lineno(), num_nodes, u, v));
    src.push_back(u);
    dst.push_back(v);
  }
  return detail::csr_from_edges(num_nodes, src, dst);
}

}  // namespace

Csr parse_edge_list(const std::string& text, const std::string& where, int64_t num_nodes,
                    bool header, char sep) {
  if (text.empty()) throw InputError(fmt::format("{}: empty file", where));
  detail::LineCursor cur(text);
  return parse_edges(cur, where, num_nodes, header, sep);
}

Features parse_geomgcn_nodes(const std::string& text, const std::string& where,
                             std::vector<int64_t>& labels) {
  if (text.empty()) throw InputError(fmt::format("{}: empty file", where));
  detail::LineCursor cur(text);
  std::string_view line;
  cur.next(line);
  if (line.rfind("node_id", 0) != 0)
    throw InputError(fmt::format("{}:1: expected the header 'node_id<TAB>feature<TAB>label'",
                                 where));
  // Film lists the indices of its ones ("feature(feature_amount:931)"); WebKB lists every value.
  const bool index_lists = line.find("feature_amount") != std::string_view::npos;
  int64_t declared = 0;
  if (index_lists) {
    auto p = line.find("feature_amount:");
    declared = detail::parse_int(
        line.substr(p + 15, line.find(')', p) - (p + 15)), where, 1);
  }
  struct Row {
    int64_t id;
    std::vector<int32_t> cols;
    std::vector<float> vals;
    int64_t label;
  };
  std::vector<Row> rows;
  int64_t width = -1, max_col = -1;
  while (cur.next(line)) {
    if (line.empty()) continue;
    const auto f = detail::split(line, '\t');
    if (f.size() != 3)
      throw InputError(fmt::format("{}:{}: expected 3 tab-separated fields, found {}", where,
                                   cur.lineno(), f.size()));
    Row r;
    r.id = detail::parse_int(f[0], where, cur.lineno());
    r.label = detail::parse_int(f[2], where, cur.lineno());
    if (r.label < 0)
      throw InputError(fmt::format("{}:{}: negative label {}", where, cur.lineno(), r.label));
    const auto toks = f[1].empty() ? std::vector<std::string_view>{} : detail::split(f[1], ',');
    if (index_lists) {
      for (auto t : toks) {
        const int64_t c = detail::parse_int(t, where, cur.lineno());
        if (c < 0 || c >= INT32_MAX)
          throw InputError(fmt::format("{}:{}: feature index {} out of range", where,
                                       cur.lineno(), c));
        r.cols.push_back(static_cast<int32_t>(c));
      }
      std::sort(r.cols.begin(), r.cols.end());
      r.cols.erase(std::unique(r.cols.begin(), r.cols.end()), r.cols.end());
      if (!r.cols.empty()) max_col = std::max<int64_t>(max_col, r.cols.back());
      r.vals.assign(r.cols.size(), 1.0f);
    } else {
      if (width < 0) width = static_cast<int64_t>(toks.size());
      if (static_cast<int64_t>(toks.size()) != width)
        throw InputError(fmt::format("{}:{}: {} feature values, the first row has {}", where,
                                     cur.lineno(), toks.size(), width));
      for (size_t c = 0; c < toks.size(); ++c) {
        const double v = detail::parse_double(toks[c], where, cur.lineno());
        if (v != 0.0) {
          r.cols.push_back(static_cast<int32_t>(c));
          r.vals.push_back(static_cast<float>(v));
        }
      }
    }
    rows.push_back(std::move(r));
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) throw InputError(fmt::format("{}: no node lines after the header", where));
  // Lines may come in any order (Film's do not follow ids); the ids must be a permutation.
  std::vector<int64_t> pos(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = rows[i].id;
    if (id < 0 || id >= n)
      throw InputError(fmt::format("{}: node id {} out of range [0, {})", where, id, n));
    if (pos[id] >= 0) throw InputError(fmt::format("{}: node id {} listed twice", where, id));
    pos[id] = i;
  }
  Features x;
  x.sparse = true;
  x.rows = n;
  x.cols = index_lists ? std::max(declared, max_col + 1) : width;
  x.csr.rows = n;
  x.csr.cols = x.cols;
  x.csr.indptr.assign(static_cast<size_t>(n) + 1, 0);
  labels.assign(static_cast<size_t>(n), 0);
  for (int64_t v = 0; v < n; ++v) {
    const Row& r = rows[pos[v]];
    x.csr.indices.insert(x.csr.indices.end(), r.cols.begin(), r.cols.end());
    x.csr.values.insert(x.csr.values.end(), r.vals.begin(), r.vals.end());
    x.csr.indptr[v + 1] = static_cast<int64_t>(x.csr.indices.size());
    labels[v] = r.label;
  }
  return x;
}

Graph load_geomgcn(const std::string& dir) {
  const auto edges_path = join_path(dir, "out1_graph_edges.txt");
  const auto nodes_path = join_path(dir, "out1_node_feature_label.txt");
  const std::string nodes_text = read_file(nodes_path);
  const std::string edges_text = read_file(edges_path);
  Graph g;
  g.features = parse_geomgcn_nodes(nodes_text, nodes_path, g.labels);
  g.num_nodes = g.features.rows;
  g.num_classes = detail::count_classes(g.labels, nodes_path);
  g.adj = parse_edge_list(edges_text, edges_path, g.num_nodes, true, '\t');
  g.directed = true;  // hyperlinks / co-occurrence lists keep their stored direction
  g.name = detail::base_name(dir);
  g.source = dir;
  std::vector<std::pair<std::string, std::string>> hashes{
      {"out1_graph_edges.txt", sha256_hex(edges_text)},
      {"out1_node_feature_label.txt", sha256_hex(nodes_text)}};
  const std::string prefix = split_prefix(dir);
  if (!prefix.empty()) detail::load_geomgcn_split_files(g, dir, prefix, "geom-gcn", &hashes);
  g.source_sha256 = detail::combined_sha256(hashes);
  g.validate(dir);
  return g;
}

namespace {

std::string ogb_file(const std::string& dir, const std::string& name) {
  for (const auto& cand : {join_path(join_path(dir, "raw"), name), join_path(dir, name)})
    if (detail::file_exists(cand)) return cand;
  throw InputError(fmt::format("{}: missing file raw/{}", dir, name));
}

}  // namespace

namespace {

bool ogb_has(const std::string& dir, const std::string& name) {
  return detail::file_exists(join_path(join_path(dir, "raw"), name)) ||
         detail::file_exists(join_path(dir, name));
}

// A label line of node-label.csv.gz: an integer, or "nan" for a node without a label.
int64_t ogb_label(std::string_view line, const std::string& where, int64_t lineno) {
  if (line == "nan" || line == "NaN" || line == "NAN") return kUnlabelled;
  return detail::parse_int(line, where, lineno);
}

// OGB's csv.gz raw layout (read_csv_graph_raw): every file streamed.
template <class Done>
void load_ogb_csv(const std::string& dir, Graph& g, Done&& done) {
  // Labels first: they fix the node count (num-node-list.csv.gz, when present, must agree).
  const auto label_path = ogb_file(dir, "node-label.csv.gz");
  {
    detail::GzipLines cur(label_path);
    std::string_view line;
    while (cur.next(line)) {
      if (line.empty()) continue;
      g.labels.push_back(ogb_label(line, label_path, cur.lineno()));
    }
    if (g.labels.empty()) throw InputError(fmt::format("{}: no labels", label_path));
    done(label_path, cur);
  }
  g.num_nodes = static_cast<int64_t>(g.labels.size());
  g.num_classes = detail::count_classes(g.labels, label_path, true);
  for (const auto& cand : {join_path(join_path(dir, "raw"), "num-node-list.csv.gz"),
                           join_path(dir, "num-node-list.csv.gz")}) {
    if (!detail::file_exists(cand)) continue;
    detail::GzipLines cur(cand);
    std::string_view line;
    if (cur.next(line)) {
      const int64_t n = detail::parse_int(line, cand, 1);
      if (n != g.num_nodes)
        throw InputError(fmt::format("{}: {} nodes, node-label.csv.gz has {}", cand, n,
                                     g.num_nodes));
    }
    done(cand, cur);
    break;
  }
  const auto edge_path = ogb_file(dir, "edge.csv.gz");
  {
    detail::GzipLines cur(edge_path);
    g.adj = parse_edges(cur, edge_path, g.num_nodes, false, ',');
    done(edge_path, cur);
  }
  const auto feat_path = ogb_file(dir, "node-feat.csv.gz");
  {
    detail::GzipLines cur(feat_path);
    std::string_view line;
    int64_t width = -1, rows = 0;
    while (cur.next(line)) {
      if (line.empty()) continue;
      const auto toks = detail::split(line, ',');
      if (width < 0) {
        width = static_cast<int64_t>(toks.size());
        g.features.dense.reserve(static_cast<size_t>(width * g.num_nodes));
      }
      if (static_cast<int64_t>(toks.size()) != width)
        throw InputError(fmt::format("{}:{}: {} values, the first row has {}", feat_path,
                                     cur.lineno(), toks.size(), width));
      if (rows == g.num_nodes)
        throw InputError(fmt::format("{}:{}: more feature rows than the {} nodes", feat_path,
                                     cur.lineno(), g.num_nodes));
      for (auto t : toks)
        g.features.dense.push_back(static_cast<float>(detail::parse_double(t, feat_path,
                                                                           cur.lineno())));
      ++rows;
    }
    if (rows != g.num_nodes)
      throw InputError(fmt::format("{}: {} feature rows for {} nodes", feat_path, rows,
                                   g.num_nodes));
    g.features.rows = rows;
    g.features.cols = width;
    done(feat_path, cur);
  }
}

// OGB's binary raw layout (read_binary_graph_raw): raw/data.npz with edge_index (2, E),
// node_feat (N, F) and num_nodes_list [N]; labels in raw/node-label.npz (node_label, (N, 1) or
// (N,), NaN for a node without a label, as ogbn-papers100M has for 98.6% of its nodes).
void load_ogb_binary(const std::string& dir, Graph& g,
                     std::vector<std::pair<std::string, std::string>>& hashes) {
  const std::string data_path = ogb_file(dir, "data.npz");
  std::map<std::string, NpyArray> data;
  {
    const std::string bytes = read_file(data_path);
    hashes.emplace_back(data_path.substr(dir.size()), sha256_hex(bytes));
    data = parse_npz(bytes, data_path);
  }
  auto member = [&](const std::string& name) -> const NpyArray& {
    auto it = data.find(name);
    if (it == data.end()) throw InputError(fmt::format("{}: no member {}", data_path, name));
    return it->second;
  };
  const std::vector<int64_t> nodes = member("num_nodes_list").as_int64(data_path + " num_nodes_list");
  if (nodes.size() != 1 || nodes[0] <= 0)
    throw InputError(fmt::format("{}: num_nodes_list must hold one positive count (one graph)", data_path));
  g.num_nodes = nodes[0];
  const NpyArray& ei = member("edge_index");
  if (ei.shape.size() != 2 || ei.shape[0] != 2)
    throw InputError(fmt::format("{}: edge_index must be (2, E), not ({})", data_path, fmt::join(ei.shape, ", ")));
  {
    const std::vector<int64_t> flat = ei.as_int64(data_path + " edge_index");
    const int64_t e = ei.shape[1];
    std::vector<int64_t> src(flat.begin(), flat.begin() + e), dst(flat.begin() + e, flat.end());
    for (int64_t k = 0; k < e; ++k)
      if (src[k] < 0 || src[k] >= g.num_nodes || dst[k] < 0 || dst[k] >= g.num_nodes)
        throw InputError(fmt::format("{}: edge {} ({}, {}) has a node id outside [0, {})", data_path, k,
                                     src[k], dst[k], g.num_nodes));
    g.adj = detail::csr_from_edges(g.num_nodes, src, dst);
  }
  const NpyArray& x = member("node_feat");
  if (x.shape.size() != 2 || x.shape[0] != g.num_nodes)
    throw InputError(fmt::format("{}: node_feat must be ({}, F), not ({})", data_path, g.num_nodes,
                                 fmt::join(x.shape, ", ")));
  g.features.rows = g.num_nodes;
  g.features.cols = x.shape[1];
  g.features.dense = x.as_float(data_path + " node_feat");
  data.clear();

  const std::string label_path = ogb_file(dir, "node-label.npz");
  const std::string bytes = read_file(label_path);
  hashes.emplace_back(label_path.substr(dir.size()), sha256_hex(bytes));
  const auto labels = parse_npz(bytes, label_path);
  auto it = labels.find("node_label");
  if (it == labels.end()) throw InputError(fmt::format("{}: no member node_label", label_path));
  const NpyArray& y = it->second;
  if (y.size() != g.num_nodes || (y.shape.size() == 2 && y.shape[1] != 1))
    throw InputError(fmt::format("{}: node_label must be ({}, 1) or ({},), not ({})", label_path, g.num_nodes,
                                 g.num_nodes, fmt::join(y.shape, ", ")));
  const std::vector<double> v = y.as_double(label_path + " node_label");
  g.labels.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      g.labels[i] = kUnlabelled;
    } else if (v[i] < 0 || v[i] != std::floor(v[i]) || v[i] > 1e9) {
      throw InputError(fmt::format("{}: node {} has label {}, not a class id (or NaN)", label_path, i, v[i]));
    } else {
      g.labels[i] = static_cast<int64_t>(v[i]);
    }
  }
  g.num_classes = detail::count_classes(g.labels, label_path, true);
}

}  // namespace

Graph load_ogb(const std::string& dir) {
  // Every csv.gz is streamed (decompressed block by block, never whole in memory); its hash is of
  // the compressed bytes, taken on the same pass.
  std::vector<std::pair<std::string, std::string>> hashes;
  auto done = [&](const std::string& path, detail::GzipLines& lines) {
    hashes.emplace_back(path.substr(dir.size()), lines.sha256_hex());
  };
  Graph g;
  g.name = detail::base_name(dir);
  g.source = dir;
  if (ogb_has(dir, "data.npz")) {
    load_ogb_binary(dir, g, hashes);
  } else {
    load_ogb_csv(dir, g, done);
  }
  const auto split_root = join_path(dir, "split");
  if (detail::is_directory(split_root)) {
    for (const auto& name : detail::list_directory(split_root)) {
      const auto sdir = join_path(split_root, name);
      if (!detail::is_directory(sdir)) continue;
      SplitSet s;
      s.name = name;
      s.count = 1;
      for (auto [file, dst] :
           {std::pair<const char*, std::vector<uint8_t>*>{"train.csv.gz", &s.train},
            {"valid.csv.gz", &s.val},
            {"test.csv.gz", &s.test}}) {
        const auto path = join_path(sdir, file);
        if (!detail::file_exists(path))
          throw InputError(fmt::format("{}: missing file split/{}/{}", dir, name, file));
        dst->assign(static_cast<size_t>(g.num_nodes), 0);
        detail::GzipLines cur(path);
        std::string_view line;
        while (cur.next(line)) {
          if (line.empty()) continue;
          const int64_t v = detail::parse_int(line, path, cur.lineno());
          if (v < 0 || v >= g.num_nodes)
            throw InputError(fmt::format("{}:{}: node id {} out of range [0, {})", path,
                                         cur.lineno(), v, g.num_nodes));
          (*dst)[v] = 1;
        }
        done(path, cur);
      }
      g.splits.push_back(std::move(s));
    }
  }
  g.directed = true;
  g.source_sha256 = detail::combined_sha256(hashes);
  g.validate(dir);
  return g;
}

// ---- finding datasets ----------------------------------------------------------------------------

namespace {

const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> a{
      {"actor", "film"},
      {"amazon_photo", "photo"},
      {"amazon-photo", "photo"},
      {"citeseer-planetoid", "citeseer_planetoid"},
      {"citeseer_full", "citeseer"},
      {"cora-ml", "cora_ml"},
      {"arxiv", "ogbn-arxiv"},
      {"ogbn_arxiv", "ogbn-arxiv"},
      {"products", "ogbn-products"},
      {"ogbn_products", "ogbn-products"},
      {"papers100M", "ogbn-papers100M"},
      {"papers100m", "ogbn-papers100M"},
      {"ogbn_papers100M", "ogbn-papers100M"},
  };
  return a;
}

// The npz inside a dataset folder that holds the graph (not a split file).
std::string graph_npz_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& n : detail::list_directory(dir))
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".npz") == 0 &&
        n.find("_split_") == std::string::npos)
      found.push_back(n);
  if (found.size() == 1) return join_path(dir, found[0]);
  return "";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<std::string> known_datasets() {
  return {"cora_ml", "citeseer", "citeseer_planetoid", "dblp", "photo", "film", "cornell",
          "texas", "wisconsin", "chameleon", "squirrel", "ogbn-arxiv", "ogbn-products", "ogbn-papers100M"};
}

std::string resolve_dataset(const std::string& name_or_path, const std::string& data_dir) {
  if (name_or_path.empty()) throw InputError("--dataset: empty dataset name");
  if (detail::file_exists(name_or_path) || detail::is_directory(name_or_path))
    return name_or_path;
  std::string root = data_dir;
  if (root.empty()) {
    const char* env = std::getenv("ADGNN_DATA");
    if (env) root = env;
  }
  if (name_or_path.find('/') != std::string::npos || root.empty())
    throw InputError(fmt::format(
        "--dataset {}: no such file or folder{}", name_or_path,
        root.empty() ? ", and neither --data-dir nor ADGNN_DATA names a data folder" : ""));
  if (!detail::is_directory(root))
    throw InputError(fmt::format("--data-dir {}: not a folder", root));
  std::string name = name_or_path;
  if (auto it = aliases().find(name); it != aliases().end()) name = it->second;
  // OGB's own download folders spell the name with '_' (ogbn_products).
  std::string underscored = name;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  for (const auto& cand : {join_path(root, name), join_path(root, name + ".h5"), join_path(root, underscored)})
    if (detail::is_directory(cand) || detail::file_exists(cand)) return cand;
  throw InputError(fmt::format("--dataset {}: not found under {} (known: {})", name_or_path,
                               root, fmt::join(known_datasets(), ", ")));
}

CsbmParams csbm_params_of(const std::string& dataset, const std::string& flag) {
  if (dataset.rfind("csbm:", 0) != 0)
    throw InputError(fmt::format("{} {}: not a generated graph (csbm:<preset>[:seed])", flag, dataset));
  const std::string rest = dataset.substr(5);
  const auto colon = rest.find(':');
  if (colon == std::string::npos) return csbm_preset(rest);
  CsbmParams p = csbm_preset(rest.substr(0, colon));
  p.seed = uint64_t(detail::parse_int(rest.substr(colon + 1), flag + " " + dataset, 1));
  return p;
}

Graph load_dataset(const std::string& name_or_path, const std::string& data_dir) {
  // "csbm:<preset>[:seed]" generates a synthetic graph in memory.
  if (name_or_path.rfind("csbm:", 0) == 0) return generate_csbm(csbm_params_of(name_or_path));
  const std::string path = resolve_dataset(name_or_path, data_dir);
  if (detail::is_directory(path)) {
    if (detail::file_exists(join_path(path, "out1_graph_edges.txt"))) return load_geomgcn(path);
    if (ogb_has(path, "edge.csv.gz") || ogb_has(path, "data.npz")) return load_ogb(path);
    const std::string npz = graph_npz_in(path);
    if (!npz.empty()) return load_npz_any(npz);
    const std::string h5 = join_path(path, detail::base_name(path) + ".h5");
    if (detail::file_exists(h5)) return read_graph_h5(h5);
    throw InputError(fmt::format("{}: no dataset recognised in this folder (expected Geom-GCN "
                                 "text files, an OGB raw/ folder, or one graph .npz)",
                                 path));
  }
  if (ends_with(path, ".npz")) return load_npz_any(path);
  if (ends_with(path, ".h5") || ends_with(path, ".hdf5")) return read_graph_h5(path);
  throw InputError(fmt::format("{}: unknown file type (expected .npz, .h5 or a dataset folder)",
                               path));
}

}  // namespace adgnn
