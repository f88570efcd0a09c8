// The graph fingerprint: a SHA-256 over everything that defines a graph's training problem.
#include <omp.h>
#include <openssl/evp.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "adgnn/graph_file.h"
#include "adgnn/loaders.h"

namespace adgnn {

namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("graph_fingerprint: cannot initialise SHA-256");
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void bytes(const void* p, size_t n) {
    if (n > 0 && EVP_DigestUpdate(ctx_, p, n) != 1)
      throw std::runtime_error("graph_fingerprint: SHA-256 update failed");
  }
  void i64(int64_t v) { bytes(&v, sizeof v); }
  // Length-prefixed, so that adjacent fields can never shift into each other.
  template <class T>
  void vec(const std::vector<T>& v) {
    i64(static_cast<int64_t>(v.size()));
    bytes(v.data(), v.size() * sizeof(T));
  }
  void str(const std::string& s) {
    i64(static_cast<int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, md, &len) != 1)
      throw std::runtime_error("graph_fingerprint: SHA-256 final failed");
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

namespace {

std::string fingerprint(const Graph& g) {
  Sha256 h;
  h.str("adgnn-graph-fingerprint-2");
  h.i64(g.num_nodes);
  h.i64(g.adj.rows);
  h.i64(g.adj.cols);
  h.vec(g.adj.indptr);
  h.vec(g.adj.indices);
  h.vec(g.adj.values);
  const Features& f = g.features;
  h.i64(f.rows);
  h.i64(f.cols);
  h.i64(f.sparse ? 1 : 0);
  if (f.sparse) {
    h.vec(f.csr.indptr);
    h.vec(f.csr.indices);
    // No values means every entry is 1, which our HDF5 format stores explicitly: both hash alike.
    if (f.csr.values.empty() && f.csr.nnz() > 0) {
      h.vec(std::vector<float>(static_cast<size_t>(f.csr.nnz()), 1.0f));
    } else {
      h.vec(f.csr.values);
    }
  } else {
    h.vec(f.dense);
  }
  h.vec(g.labels);
  h.i64(g.num_classes);
  h.i64(static_cast<int64_t>(g.splits.size()));
  // In name order, the order our HDF5 format lists them in.
  std::vector<const SplitSet*> splits;
  for (const SplitSet& s : g.splits) splits.push_back(&s);
  std::sort(splits.begin(), splits.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const SplitSet* sp : splits) {
    const SplitSet& s = *sp;
    h.str(s.name);
    h.i64(s.count);
    h.vec(s.train);
    h.vec(s.val);
    h.vec(s.test);
  }
  return h.hex();
}

}  // namespace

std::string graph_fingerprint(const Graph& g) { return fingerprint(g); }

std::string graph_fingerprint(const GraphFileReader& file, const DenseRowSource* features, int threads) {
  const GraphFileInfo& in = file.info();
  const int64_t n = in.num_nodes;
  // Blocks of rows of about 4 MiB of each array.
  auto blocks = [n](int64_t row_bytes, auto&& fn) {
    const int64_t block = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(row_bytes, 1));
    for (int64_t first = 0; first < n; first += block) fn(first, std::min(n, first + block));
  };
  auto ids = [](int64_t first, int64_t last) {
    std::vector<int64_t> v(static_cast<size_t>(last - first));
    std::iota(v.begin(), v.end(), first);
    return v;
  };
  Sha256 h;
  h.str("adgnn-graph-fingerprint-2");
  h.i64(n);
  h.i64(n);
  h.i64(n);
  // indptr, then indices, then the (never stored) values, each length-prefixed like vec().
  h.i64(n + 1);
  h.i64(file.adjacency_offsets(0, 0)[0]);
  blocks(8, [&](int64_t first, int64_t last) {
    const std::vector<int64_t> offsets = file.adjacency_offsets(first, last);
    h.bytes(offsets.data() + 1, (offsets.size() - 1) * sizeof(int64_t));
  });
  h.i64(in.stored_edges);
  blocks(64, [&](int64_t first, int64_t last) {
    const Csr rows = file.adjacency_rows(first, last);
    h.bytes(rows.indices.data(), rows.indices.size() * sizeof(int32_t));
  });
  h.i64(0);
  h.i64(n);
  h.i64(in.feature_cols);
  h.i64(in.sparse_features ? 1 : 0);
  if (in.sparse_features) {
    // Sparse features are small: whole.
    const Features f = file.feature_rows(ids(0, n));
    h.vec(f.csr.indptr);
    h.vec(f.csr.indices);
    h.vec(f.csr.values);
  } else if (features) {
    // Windows of about 64 MiB made by all threads (blocks of rows each), hashed in order.
    h.i64(n * in.feature_cols);
    const int64_t cols = std::max<int64_t>(in.feature_cols, 1);
    const int64_t block = std::max<int64_t>(1, (int64_t{1} << 20) / cols), window = 16 * block;
    std::vector<float> buf;
    const int team = threads > 0 ? threads : std::max(1, omp_get_num_procs());
    for (int64_t first = 0; first < n; first += window) {
      const int64_t count = std::min(window, n - first);
      buf.resize(static_cast<size_t>(count * in.feature_cols));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
      for (int64_t b = 0; b < count; b += block)
        (*features)(first + b, std::min(block, count - b), buf.data() + b * in.feature_cols);
      h.bytes(buf.data(), buf.size() * sizeof(float));
    }
  } else {
    h.i64(n * in.feature_cols);
    blocks(in.feature_cols * 4, [&](int64_t first, int64_t last) {
      const Features f = file.feature_rows(ids(first, last));
      h.bytes(f.dense.data(), f.dense.size() * sizeof(float));
    });
  }
  const std::vector<int64_t> all = ids(0, n);
  h.vec(file.label_rows(all));
  h.i64(in.num_classes);
  const std::vector<SplitSet> splits = file.split_rows(all);  // in name order
  h.i64(static_cast<int64_t>(splits.size()));
  for (const SplitSet& s : splits) {
    h.str(s.name);
    h.i64(s.count);
    h.vec(s.train);
    h.vec(s.val);
    h.vec(s.test);
  }
  return h.hex();
}

}  // namespace adgnn
