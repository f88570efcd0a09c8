// The in-memory graph: symmetric view, validation, and helpers shared by the readers.
#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "adgnn/loaders.h"
#include "fmt/format.h"
#include "internal.h"

namespace adgnn {

namespace fs = std::filesystem;

int64_t Features::nnz() const {
  if (sparse) return csr.nnz();
  return static_cast<int64_t>(std::count_if(dense.begin(), dense.end(),
                                            [](float v) { return v != 0.0f; }));
}

std::vector<float> Features::to_dense() const {
  if (!sparse) return dense;
  std::vector<float> out(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = csr.indptr[r]; k < csr.indptr[r + 1]; ++k)
      out[static_cast<size_t>(r * cols + csr.indices[k])] += csr.values.empty() ? 1.0f
                                                                               : csr.values[k];
  return out;
}

Csr Graph::directed_simple() const {
  Csr c;
  c.rows = c.cols = num_nodes;
  c.indptr.assign(static_cast<size_t>(num_nodes) + 1, 0);
  std::vector<int32_t> row;
  for (int64_t u = 0; u < num_nodes; ++u) {
    row.assign(adj.indices.begin() + adj.indptr[u], adj.indices.begin() + adj.indptr[u + 1]);
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    for (auto v : row)
      if (v != u) c.indices.push_back(v);
    c.indptr[u + 1] = static_cast<int64_t>(c.indices.size());
  }
  return c;
}

Csr transpose_csr(const Csr& a) {
  Csr t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.indptr.assign(static_cast<size_t>(a.cols) + 1, 0);
  for (auto c : a.indices) ++t.indptr[c + 1];
  for (int64_t i = 0; i < a.cols; ++i) t.indptr[i + 1] += t.indptr[i];
  t.indices.resize(a.indices.size());
  std::vector<int64_t> fill(t.indptr.begin(), t.indptr.end() - 1);
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t k = a.indptr[r]; k < a.indptr[r + 1]; ++k)
      t.indices[fill[a.indices[k]]++] = static_cast<int32_t>(r);
  return t;
}

Csr Graph::symmetric() const {
  const int64_t n = num_nodes;
  // Count both directions of every non-loop entry, then sort and deduplicate each row.
  std::vector<int64_t> deg(static_cast<size_t>(n) + 1, 0);
  for (int64_t u = 0; u < n; ++u)
    for (int64_t k = adj.indptr[u]; k < adj.indptr[u + 1]; ++k) {
      const int64_t v = adj.indices[k];
      if (v == u) continue;
      ++deg[u + 1];
      ++deg[v + 1];
    }
  std::vector<int64_t> ptr(deg);
  for (int64_t i = 0; i < n; ++i) ptr[i + 1] += ptr[i];
  std::vector<int32_t> idx(static_cast<size_t>(ptr[n]));
  std::vector<int64_t> fill(ptr.begin(), ptr.end() - 1);
  for (int64_t u = 0; u < n; ++u)
    for (int64_t k = adj.indptr[u]; k < adj.indptr[u + 1]; ++k) {
      const int64_t v = adj.indices[k];
      if (v == u) continue;
      idx[fill[u]++] = static_cast<int32_t>(v);
      idx[fill[v]++] = static_cast<int32_t>(u);
    }
  Csr s;
  s.rows = s.cols = n;
  s.indptr.assign(static_cast<size_t>(n) + 1, 0);
  s.indices.reserve(idx.size());
  for (int64_t u = 0; u < n; ++u) {
    auto b = idx.begin() + ptr[u], e = idx.begin() + ptr[u + 1];
    std::sort(b, e);
    auto last = std::unique(b, e);
    s.indices.insert(s.indices.end(), b, last);
    s.indptr[u + 1] = static_cast<int64_t>(s.indices.size());
  }
  s.indices.shrink_to_fit();
  return s;
}

const SplitSet* Graph::find_splits(const std::string& split_name) const {
  for (const auto& s : splits)
    if (s.name == split_name) return &s;
  return nullptr;
}

static void validate_csr(const Csr& c, const std::string& where, const char* what) {
  if (static_cast<int64_t>(c.indptr.size()) != c.rows + 1)
    throw InputError(fmt::format("{}: {} row pointer has {} entries, expected {}", where, what,
                                 c.indptr.size(), c.rows + 1));
  if (c.indptr.front() != 0 || c.indptr.back() != c.nnz())
    throw InputError(fmt::format("{}: {} row pointers do not span the {} entries", where, what,
                                 c.nnz()));
  for (int64_t r = 0; r < c.rows; ++r)
    if (c.indptr[r + 1] < c.indptr[r])
      throw InputError(fmt::format("{}: {} row pointers decrease at row {}", where, what, r));
  for (int64_t k = 0; k < c.nnz(); ++k)
    if (c.indices[k] < 0 || c.indices[k] >= c.cols)
      throw InputError(fmt::format("{}: {} column index {} out of range [0, {})", where, what,
                                   c.indices[k], c.cols));
  if (!c.values.empty() && static_cast<int64_t>(c.values.size()) != c.nnz())
    throw InputError(fmt::format("{}: {} has {} values for {} indices", where, what,
                                 c.values.size(), c.nnz()));
}

void Graph::validate(const std::string& where, bool check_features) const {
  if (num_nodes <= 0) throw InputError(fmt::format("{}: graph has no nodes", where));
  if (num_nodes > INT32_MAX)
    throw InputError(fmt::format("{}: {} nodes exceed the 32-bit index range", where, num_nodes));
  if (adj.rows != num_nodes || adj.cols != num_nodes)
    throw InputError(fmt::format("{}: adjacency shape [{}, {}] does not match {} nodes", where,
                                 adj.rows, adj.cols, num_nodes));
  validate_csr(adj, where, "adjacency");
  if (features.rows != num_nodes)
    throw InputError(fmt::format("{}: {} feature rows for {} nodes", where, features.rows,
                                 num_nodes));
  if (!check_features) {
    // Only the shape: the values come from elsewhere.
  } else if (features.sparse) {
    if (features.csr.rows != features.rows || features.csr.cols != features.cols)
      throw InputError(fmt::format("{}: feature CSR shape mismatch", where));
    validate_csr(features.csr, where, "feature matrix");
    for (size_t i = 0; i < features.csr.values.size(); ++i)
      if (!std::isfinite(features.csr.values[i]))
        throw InputError(fmt::format("{}: non-finite feature value (NaN or Inf) at entry {}",
                                     where, i));
  } else {
    if (static_cast<int64_t>(features.dense.size()) != features.rows * features.cols)
      throw InputError(fmt::format("{}: dense features hold {} values, expected {} x {}", where,
                                   features.dense.size(), features.rows, features.cols));
    for (size_t i = 0; i < features.dense.size(); ++i)
      if (!std::isfinite(features.dense[i]))
        throw InputError(fmt::format("{}: non-finite feature value (NaN or Inf) at node {}, "
                                     "column {}",
                                     where, i / static_cast<size_t>(features.cols),
                                     i % static_cast<size_t>(features.cols)));
  }
  if (num_classes < 0 || num_classes > kMaxClasses)
    throw InputError(fmt::format("{}: {} classes: must be in [0, {}]", where, num_classes, kMaxClasses));
  if (static_cast<int64_t>(labels.size()) != num_nodes)
    throw InputError(fmt::format("{}: {} labels for {} nodes", where, labels.size(), num_nodes));
  for (int64_t v = 0; v < num_nodes; ++v)
    if (labels[v] < kUnlabelled || labels[v] >= num_classes)
      throw InputError(fmt::format("{}: label {} of node {} out of range [0, {}) (or -1: unlabelled)",
                                   where, labels[v], v, num_classes));
  if (!original_id.empty()) {
    if (static_cast<int64_t>(original_id.size()) != num_nodes)
      throw InputError(fmt::format("{}: {} original ids for {} nodes", where, original_id.size(), num_nodes));
    std::vector<uint8_t> seen(static_cast<size_t>(num_nodes), 0);
    for (int64_t v = 0; v < num_nodes; ++v) {
      const int64_t o = original_id[size_t(v)];
      if (o < 0 || o >= num_nodes || seen[size_t(o)]++)
        throw InputError(fmt::format("{}: original ids are not a permutation (node {}: {})", where, v, o));
    }
  }
  for (const auto& s : splits) {
    const size_t want = static_cast<size_t>(s.count * num_nodes);
    if (s.train.size() != want || s.val.size() != want || s.test.size() != want)
      throw InputError(fmt::format("{}: split '{}' masks do not hold {} x {} entries", where,
                                   s.name, s.count, num_nodes));
    for (int64_t k = 0; k < s.count; ++k)
      for (int64_t v = 0; v < num_nodes; ++v) {
        const size_t i = static_cast<size_t>(k * num_nodes + v);
        if (labels[v] == kUnlabelled && (s.train[i] || s.val[i] || s.test[i]))
          throw InputError(fmt::format("{}: node {} is unlabelled but in split {} of family '{}'",
                                       where, v, k, s.name));
      }
  }
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::string os_error() { return errno != 0 ? std::strerror(errno) : "I/O error"; }

void remove_temporary(const std::string& tmp) noexcept {
  std::error_code ec;
  fs::remove(tmp, ec);
}

namespace {
// fsync of a file or folder; the OS error on failure.
bool sync_path(const std::string& p, bool folder) {
  const int fd = ::open(p.c_str(), (folder ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return false;
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  // Some filesystems cannot sync folders (EINVAL): the rename is as durable as they make it.
  return rc == 0 || (folder && (errno == EINVAL || errno == EROFS));
}
}  // namespace

void commit_file(const std::string& tmp, const std::string& path) {
  errno = 0;
  if (!sync_path(tmp, false)) {
    const std::string why = os_error();
    remove_temporary(tmp);
    throw InputError(fmt::format("{}: cannot write the file out ({})", path, why));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = os_error();
    remove_temporary(tmp);
    throw InputError(fmt::format("{}: cannot rename into place ({})", path, why));
  }
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  errno = 0;
  if (!sync_path(folder.string(), true))
    throw InputError(fmt::format("{}: written, but its folder could not be synced ({})", path, os_error()));
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  errno = 0;
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw InputError(fmt::format("{}: cannot write ({})", path, os_error()));
  const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0;
  const bool closed = std::fclose(f) == 0;  // keeps errno from the write when that failed
  if (!wrote || !closed) {
    const std::string why = os_error();
    remove_temporary(tmp);
    throw InputError(fmt::format("{}: cannot write ({})", path, why));
  }
  commit_file(tmp, path);
}

namespace detail {

Csr csr_from_edges(int64_t num_nodes, const std::vector<int64_t>& src,
                   const std::vector<int64_t>& dst) {
  Csr c;
  c.rows = c.cols = num_nodes;
  c.indptr.assign(static_cast<size_t>(num_nodes) + 1, 0);
  for (auto s : src) ++c.indptr[s + 1];
  for (int64_t i = 0; i < num_nodes; ++i) c.indptr[i + 1] += c.indptr[i];
  c.indices.resize(src.size());
  std::vector<int64_t> fill(c.indptr.begin(), c.indptr.end() - 1);
  for (size_t e = 0; e < src.size(); ++e) c.indices[fill[src[e]]++] = static_cast<int32_t>(dst[e]);
  return c;
}

int64_t parse_int(std::string_view tok, const std::string& where, int64_t lineno) {
  while (!tok.empty() && (tok.front() == ' ' || tok.front() == '\t')) tok.remove_prefix(1);
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t')) tok.remove_suffix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size())
    throw InputError(fmt::format("{}:{}: expected an integer, found '{}'", where, lineno,
                                 std::string(tok.substr(0, 40))));
  return v;
}

double parse_double(std::string_view tok, const std::string& where, int64_t lineno) {
  while (!tok.empty() && (tok.front() == ' ' || tok.front() == '\t')) tok.remove_prefix(1);
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t')) tok.remove_suffix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size())
    throw InputError(fmt::format("{}:{}: expected a number, found '{}'", where, lineno,
                                 std::string(tok.substr(0, 40))));
  if (!std::isfinite(v))
    throw InputError(fmt::format("{}:{}: non-finite value '{}'", where, lineno,
                                 std::string(tok.substr(0, 40))));
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    if (p == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, p - start));
    start = p + 1;
  }
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}
bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}
std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}
std::string join_path(const std::string& a, const std::string& b) {
  return (fs::path(a) / b).string();
}
std::string base_name(const std::string& path) {
  auto p = fs::path(path);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

std::string combined_sha256(const std::vector<std::pair<std::string, std::string>>& name_hash) {
  auto sorted = name_hash;
  std::sort(sorted.begin(), sorted.end());
  std::string text;
  for (const auto& [n, h] : sorted) text += n + " " + h + "\n";
  return sha256_hex(text);
}

int64_t count_classes(const std::vector<int64_t>& labels, const std::string& where,
                      bool allow_unlabelled) {
  int64_t mx = -1;
  for (size_t v = 0; v < labels.size(); ++v) {
    if (labels[v] < 0 && !(allow_unlabelled && labels[v] == kUnlabelled))
      throw InputError(fmt::format("{}: negative label {} at node {}", where, labels[v], v));
    if (labels[v] >= kMaxClasses)
      throw InputError(fmt::format("{}: label {} at node {}: at most {} classes are supported", where,
                                   labels[v], v, kMaxClasses));
    mx = std::max(mx, labels[v]);
  }
  return mx + 1;
}

void load_geomgcn_split_files(Graph& g, const std::string& dir, const std::string& prefix,
                              const std::string& family,
                              std::vector<std::pair<std::string, std::string>>* hashes) {
  std::vector<std::string> files;
  for (int i = 0; i < 100; ++i) {
    const auto f = join_path(dir, fmt::format("{}_split_0.6_0.2_{}.npz", prefix, i));
    if (!file_exists(f)) break;
    files.push_back(f);
  }
  if (files.empty()) return;
  SplitSet s;
  s.name = family;
  s.count = static_cast<int64_t>(files.size());
  const size_t n = static_cast<size_t>(g.num_nodes);
  for (const auto& f : files) {
    const std::string bytes = read_file(f);
    if (hashes) hashes->emplace_back(base_name(f), sha256_hex(bytes));
    auto arrays = parse_npz(bytes, f);
    for (auto [key, dst] : {std::pair<const char*, std::vector<uint8_t>*>{"train_mask", &s.train},
                            {"val_mask", &s.val},
                            {"test_mask", &s.test}}) {
      auto it = arrays.find(key);
      if (it == arrays.end()) throw InputError(fmt::format("{}: missing member '{}'", f, key));
      const auto vals = it->second.as_int64(f + "[" + key + "]");
      if (vals.size() != n)
        throw InputError(fmt::format("{}[{}]: {} entries for {} nodes", f, key, vals.size(), n));
      for (auto v : vals) {
        if (v != 0 && v != 1)
          throw InputError(fmt::format("{}[{}]: mask value {} is not 0 or 1", f, key, v));
        dst->push_back(static_cast<uint8_t>(v));
      }
    }
  }
  g.splits.push_back(std::move(s));
}

}  // namespace detail
}  // namespace adgnn

namespace adgnn {

Graph permute_nodes(const Graph& g, const std::vector<int64_t>& order, const std::string& where) {
  const int64_t n = g.num_nodes;
  if (static_cast<int64_t>(order.size()) != n)
    throw InputError(fmt::format("{}: {} entries for {} nodes", where, order.size(), n));
  std::vector<int64_t> new_of(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = order[size_t(i)];
    if (o < 0 || o >= n || new_of[size_t(o)] >= 0)
      throw InputError(fmt::format("{}: not a permutation of the {} nodes (entry {}: {})", where, n, i, o));
    new_of[size_t(o)] = i;
  }
  auto permute_rows = [&](const Csr& a, bool remap_columns) {
    Csr b;
    b.rows = a.rows;
    b.cols = a.cols;
    b.indptr.assign(size_t(n) + 1, 0);
    for (int64_t i = 0; i < n; ++i) b.indptr[size_t(i) + 1] = b.indptr[size_t(i)] + a.degree(order[size_t(i)]);
    b.indices.resize(a.indices.size());
    if (!a.values.empty()) b.values.resize(a.values.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = order[size_t(i)];
      int64_t k = b.indptr[size_t(i)];
      for (int64_t e = a.indptr[size_t(o)]; e < a.indptr[size_t(o) + 1]; ++e, ++k) {
        b.indices[size_t(k)] = remap_columns ? static_cast<int32_t>(new_of[size_t(a.indices[size_t(e)])])
                                             : a.indices[size_t(e)];
        if (!a.values.empty()) b.values[size_t(k)] = a.values[size_t(e)];
      }
    }
    return b;
  };
  Graph h;
  h.name = g.name;
  h.source = g.source;
  h.source_sha256 = g.source_sha256;
  h.directed = g.directed;
  h.num_nodes = n;
  h.num_classes = g.num_classes;
  h.adj = permute_rows(g.adj, true);
  h.features.rows = g.features.rows;
  h.features.cols = g.features.cols;
  h.features.sparse = g.features.sparse;
  if (g.features.sparse) {
    h.features.csr = permute_rows(g.features.csr, false);
  } else {
    const size_t f = static_cast<size_t>(g.features.cols);
    h.features.dense.resize(g.features.dense.size());
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(g.features.dense.begin() + static_cast<std::ptrdiff_t>(size_t(order[size_t(i)]) * f), f,
                  h.features.dense.begin() + static_cast<std::ptrdiff_t>(size_t(i) * f));
  }
  h.labels.resize(size_t(n));
  h.original_id.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = order[size_t(i)];
    h.labels[size_t(i)] = g.labels[size_t(o)];
    h.original_id[size_t(i)] = g.original_id.empty() ? o : g.original_id[size_t(o)];
  }
  for (const auto& s : g.splits) {
    SplitSet t;
    t.name = s.name;
    t.count = s.count;
    for (auto [from, to] : {std::pair{&s.train, &t.train}, {&s.val, &t.val}, {&s.test, &t.test}}) {
      to->resize(from->size());
      for (int64_t k = 0; k < s.count; ++k)
        for (int64_t i = 0; i < n; ++i)
          (*to)[size_t(k * n + i)] = (*from)[size_t(k * n + order[size_t(i)])];
    }
    h.splits.push_back(std::move(t));
  }
  return h;
}

}  // namespace adgnn
