// One rank's share of a partitioned graph (GraphPart). Every step is a
// pass over nodes or edges with flat arrays (a global -> local index array instead of maps), so
// building a part of the 2.4M-node products-scale graph takes seconds.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "adgnn/graph_file.h"
#include "adgnn/mix64.h"
#include "adgnn/partition.h"
#include "fmt/format.h"

namespace adgnn {

namespace {

void check_partition(const Graph& g, const Partition& p) {
  if (p.parts < 1) throw InputError(fmt::format("partition: {} parts, must be >= 1", p.parts));
  if (static_cast<int64_t>(p.owner.size()) != g.num_nodes)
    throw InputError(fmt::format("partition: {} owners for a graph of {} nodes", p.owner.size(),
                                 g.num_nodes));
  for (size_t u = 0; u < p.owner.size(); ++u)
    if (p.owner[u] < 0 || p.owner[u] >= p.parts)
      throw InputError(fmt::format("partition: node {} has owner {}, outside [0, {})", u,
                                   p.owner[u], p.parts));
}

}  // namespace

uint64_t owner_digest(const int32_t* owner, int64_t first_node, int64_t count) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += mix64(mix64(static_cast<uint64_t>(first_node + i) + 0x5851F42D4C957F2Dull) ^
                 static_cast<uint64_t>(owner[i]));
  return sum;
}

std::string partition_id(const std::string& graph_hash, int32_t parts, uint64_t digest) {
  return sha256_hex(fmt::format("{}/{}/{:016x}", graph_hash, parts, digest)).substr(0, 32);
}

// The whole graph's views that every rank's share is cut from.
struct PartBuilder::Views {
  Csr sym, out, in;
  std::vector<int64_t> index_in_owner;  // per node: its position among its owner's nodes
  double max_degree_product = 1;
  std::string hash, partition_id;
};

PartBuilder::PartBuilder(const Graph& g, const Partition& p, const GraphFileReader* rows)
    : g_(g), p_(p), rows_(rows) {
  check_partition(g, p);
  v_ = std::make_unique<Views>();
  Views& v = *v_;
  v.sym = g.symmetric();
  v.out = g.directed_simple();
  v.in = transpose_csr(v.out);
  const int64_t n = g.num_nodes;
  v.index_in_owner.resize(static_cast<size_t>(n));
  std::vector<int64_t> next(static_cast<size_t>(p.parts), 0);
  for (int64_t u = 0; u < n; ++u) v.index_in_owner[u] = next[p.owner[u]]++;
  // Degree products are exact in int64; the model takes the max in floating point, which
  // rounds the same value.
  int64_t best = 0;
  for (int64_t u = 0; u < n; ++u) {
    const int64_t du = v.sym.degree(u);
    for (int64_t k = v.sym.indptr[u]; k < v.sym.indptr[u + 1]; ++k)
      best = std::max(best, du * v.sym.degree(v.sym.indices[k]));
  }
  v.max_degree_product = v.sym.nnz() > 0 ? static_cast<double>(best) : 1.0;
  if (rows) {
    v.hash = rows->info().graph_hash;
    if (v.hash.empty())
      throw InputError(fmt::format("{}: stores no graph_hash (written before it existed): write it "
                                   "again with `adgnn data convert`",
                                   rows->info().path));
  } else {
    v.hash = graph_fingerprint(g);
  }
  v.partition_id = partition_id(v.hash, p.parts, owner_digest(p.owner.data(), 0, n));
}

PartBuilder::~PartBuilder() = default;

const std::string& PartBuilder::graph_hash() const { return v_->hash; }

GraphPart PartBuilder::build(int32_t rank) const {
  const Graph& g = g_;
  const Partition& p = p_;
  const Views& v = *v_;
  const int32_t parts = p.parts;
  if (rank < 0 || rank >= parts)
    throw InputError(fmt::format("--rank {}: outside [0, {})", rank, parts));
  const int64_t n = g.num_nodes;

  GraphPart gp;
  gp.rank = rank;
  gp.parts = parts;
  gp.graph_hash = v.hash;
  gp.graph_name = g.name;
  gp.graph_source_sha256 = g.source_sha256;
  gp.partition_id = v.partition_id;
  gp.method = p.method;
  gp.global_nodes = n;
  gp.num_classes = g.num_classes;
  gp.max_degree_product = v.max_degree_product;

  // local[u]: u's local source row; -1 = not needed here, -2 = halo row not yet placed.
  std::vector<int32_t> local(static_cast<size_t>(n), -1);
  int64_t owned = 0;
  for (int64_t u = 0; u < n; ++u)
    if (p.owner[u] == rank) {
      local[u] = static_cast<int32_t>(owned++);
      gp.global_id.push_back(u);
    }
  gp.num_owned = owned;

  // Halo: the symmetric neighbours of owned rows owned elsewhere, counted per owner, then placed
  // by one ascending scan of the node ids, which sorts them by (owner, global id).
  std::vector<int64_t> halo_per_owner(static_cast<size_t>(parts), 0);
  for (int64_t i = 0; i < owned; ++i) {
    const int64_t u = gp.global_id[i];
    for (int64_t k = v.sym.indptr[u]; k < v.sym.indptr[u + 1]; ++k) {
      const int32_t w = v.sym.indices[k];
      if (local[w] == -1) {
        local[w] = -2;
        ++halo_per_owner[p.owner[w]];
      }
    }
  }
  gp.recv_offset.assign(static_cast<size_t>(parts) + 1, 0);
  for (int32_t q = 0; q < parts; ++q) gp.recv_offset[q + 1] = gp.recv_offset[q] + halo_per_owner[q];
  const int64_t halo = gp.recv_offset[parts];
  gp.global_id.resize(static_cast<size_t>(owned + halo));
  gp.halo_owner.resize(static_cast<size_t>(halo));
  gp.halo_owner_index.resize(static_cast<size_t>(halo));
  if (halo > 0) {
    std::vector<int64_t> fill(gp.recv_offset.begin(), gp.recv_offset.end() - 1);
    for (int64_t u = 0; u < n; ++u)
      if (local[u] == -2) {
        const int32_t q = p.owner[u];
        const int64_t h = fill[q]++;
        gp.global_id[owned + h] = u;
        gp.halo_owner[h] = q;
        gp.halo_owner_index[h] = v.index_in_owner[u];
        local[u] = static_cast<int32_t>(owned + h);
      }
  }
  const int64_t sources = owned + halo;

  // Owned rows of a whole-graph CSR with columns mapped to local source rows. Directed
  // neighbours are symmetric neighbours, so every column maps.
  auto slice = [&](const Csr& whole, const char* what) {
    Csr c;
    c.rows = owned;
    c.cols = sources;
    c.indptr.assign(static_cast<size_t>(owned) + 1, 0);
    for (int64_t i = 0; i < owned; ++i) c.indptr[i + 1] = c.indptr[i] + whole.degree(gp.global_id[i]);
    c.indices.resize(static_cast<size_t>(c.indptr[owned]));
    int64_t pos = 0;
    for (int64_t i = 0; i < owned; ++i) {
      const int64_t u = gp.global_id[i];
      for (int64_t k = whole.indptr[u]; k < whole.indptr[u + 1]; ++k) {
        const int32_t l = local[whole.indices[k]];
        if (l < 0)
          throw std::logic_error(fmt::format("build_part: {} entry ({}, {}) has no local column",
                                             what, u, whole.indices[k]));
        c.indices[pos++] = l;
      }
    }
    return c;
  };
  gp.sym = slice(v.sym, "symmetric");
  gp.out = slice(v.out, "out");
  gp.in = slice(v.in, "in");

  gp.degree.resize(static_cast<size_t>(sources));
  gp.in_degree.resize(static_cast<size_t>(sources));
  gp.out_degree.resize(static_cast<size_t>(sources));
  for (int64_t i = 0; i < sources; ++i) {
    const int64_t u = gp.global_id[i];
    gp.degree[i] = v.sym.degree(u);
    gp.out_degree[i] = v.out.degree(u);
    gp.in_degree[i] = v.in.degree(u);
  }

  // send[q]: owned rows with a symmetric neighbour owned by q, i.e. exactly q's halo rows owned
  // here; owned rows are visited in ascending global id, so the lists come out in q's order.
  gp.send.assign(static_cast<size_t>(parts), {});
  std::vector<int64_t> last(static_cast<size_t>(parts), -1);
  for (int64_t i = 0; i < owned; ++i) {
    const int64_t u = gp.global_id[i];
    for (int64_t k = v.sym.indptr[u]; k < v.sym.indptr[u + 1]; ++k) {
      const int32_t q = p.owner[v.sym.indices[k]];
      if (q != rank && last[q] != i) {
        last[q] = i;
        gp.send[q].push_back(i);
      }
    }
  }

  // Features of every source row: read from the file, or dense rows copied, sparse rows sliced.
  const Features& f = g.features;
  if (rows_) gp.features = rows_->feature_rows(gp.global_id);
  gp.features.cols = f.cols;
  gp.features.sparse = f.sparse;
  if (!rows_ && f.rows == n) {
    gp.features.rows = sources;
    if (f.sparse) {
      Csr& c = gp.features.csr;
      c.rows = sources;
      c.cols = f.csr.cols;
      c.indptr.assign(static_cast<size_t>(sources) + 1, 0);
      for (int64_t i = 0; i < sources; ++i)
        c.indptr[i + 1] = c.indptr[i] + f.csr.degree(gp.global_id[i]);
      c.indices.reserve(static_cast<size_t>(c.indptr[sources]));
      if (!f.csr.values.empty()) c.values.reserve(static_cast<size_t>(c.indptr[sources]));
      for (int64_t i = 0; i < sources; ++i) {
        const int64_t u = gp.global_id[i], b = f.csr.indptr[u], e = f.csr.indptr[u + 1];
        c.indices.insert(c.indices.end(), f.csr.indices.begin() + b, f.csr.indices.begin() + e);
        if (!f.csr.values.empty())
          c.values.insert(c.values.end(), f.csr.values.begin() + b, f.csr.values.begin() + e);
      }
    } else {
      const size_t cols = static_cast<size_t>(f.cols);
      gp.features.dense.resize(static_cast<size_t>(sources) * cols);
      for (int64_t i = 0; i < sources; ++i)
        std::memcpy(&gp.features.dense[static_cast<size_t>(i) * cols],
                    &f.dense[static_cast<size_t>(gp.global_id[i]) * cols], cols * sizeof(float));
    }
  }

  if (static_cast<int64_t>(g.labels.size()) == n) {
    gp.labels.resize(static_cast<size_t>(sources));
    for (int64_t i = 0; i < sources; ++i) gp.labels[i] = g.labels[gp.global_id[i]];
  }

  // Split masks are [split][node]: each split's row restricted to the source rows.
  for (const SplitSet& s : g.splits) {
    SplitSet o;
    o.name = s.name;
    o.count = s.count;
    auto restrict_mask = [&](const std::vector<uint8_t>& m, std::vector<uint8_t>& out) {
      if (static_cast<int64_t>(m.size()) != s.count * n) return;  // absent mask stays absent
      out.resize(static_cast<size_t>(s.count * sources));
      for (int64_t k = 0; k < s.count; ++k)
        for (int64_t i = 0; i < sources; ++i) out[k * sources + i] = m[k * n + gp.global_id[i]];
    };
    restrict_mask(s.train, o.train);
    restrict_mask(s.val, o.val);
    restrict_mask(s.test, o.test);
    gp.splits.push_back(std::move(o));
  }
  return gp;
}

GraphPart build_part(const Graph& g, const Partition& p, int32_t rank) {
  if (rank < 0 || rank >= p.parts)  // before the whole-graph views are built
    throw InputError(fmt::format("--rank {}: outside [0, {})", rank, p.parts));
  return PartBuilder(g, p).build(rank);
}

}  // namespace adgnn
