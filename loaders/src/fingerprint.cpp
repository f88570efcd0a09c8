// The graph fingerprint: a SHA-256 over everything that defines a graph's training problem.
#include <openssl/evp.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

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

std::string fingerprint(const Graph& g, const DenseRowSource* rows) {
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
  } else if (rows) {
    // h.vec(f.dense) of the full matrix, fed in blocks of about 16 MiB.
    const int64_t cols = std::max<int64_t>(f.cols, 1);
    h.i64(f.rows * f.cols);
    const int64_t block = std::max<int64_t>(1, (int64_t{4} << 20) / cols);
    std::vector<float> buf;
    for (int64_t first = 0; first < f.rows; first += block) {
      const int64_t count = std::min(block, f.rows - first);
      buf.resize(static_cast<size_t>(count * f.cols));
      (*rows)(first, count, buf.data());
      h.bytes(buf.data(), buf.size() * sizeof(float));
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

std::string graph_fingerprint(const Graph& g) { return fingerprint(g, nullptr); }

std::string graph_fingerprint(const Graph& g, const DenseRowSource& rows) {
  if (g.features.sparse || !g.features.dense.empty())
    throw std::invalid_argument("graph_fingerprint: the row source is for dense features not held");
  return fingerprint(g, &rows);
}

}  // namespace adgnn
