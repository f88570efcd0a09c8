// GraphPart: every rank's share checked against the whole graph, recomputed independently
// (sets and the whole graph's CSRs), on a CSBM and on a hand-made graph with self-loops,
// duplicates and one-directional edges; the fingerprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "fixtures.h"

using adgnn::Csr;
using adgnn::Graph;
using adgnn::GraphPart;
using adgnn::Partition;
using adgnn::PartitionOptions;
using adgnn::test::hand_made;
using adgnn::test::small_csbm;

namespace {

// Row r of `local` with columns mapped back to global ids.
std::vector<int64_t> global_row(const Csr& local, int64_t r, const std::vector<int64_t>& gid) {
  std::vector<int64_t> out;
  for (int64_t k = local.indptr[r]; k < local.indptr[r + 1]; ++k) out.push_back(gid[local.indices[k]]);
  return out;
}
std::vector<int64_t> whole_row(const Csr& whole, int64_t u) {
  return {whole.indices.begin() + whole.indptr[u], whole.indices.begin() + whole.indptr[u + 1]};
}

std::vector<float> feature_row(const adgnn::Features& f, int64_t r) {
  if (!f.sparse) return {f.dense.begin() + r * f.cols, f.dense.begin() + (r + 1) * f.cols};
  std::vector<float> out(static_cast<size_t>(f.cols), 0.f);
  for (int64_t k = f.csr.indptr[r]; k < f.csr.indptr[r + 1]; ++k)
    out[f.csr.indices[k]] = f.csr.values.empty() ? 1.f : f.csr.values[k];
  return out;
}

void check_parts(const Graph& g, const Partition& p) {
  const int32_t P = p.parts;
  const int64_t n = g.num_nodes;
  const Csr sym = g.symmetric(), out = g.directed_simple(), in = adgnn::transpose_csr(out);
  double max_prod = 0;
  for (int64_t u = 0; u < n; ++u)
    for (int64_t k = sym.indptr[u]; k < sym.indptr[u + 1]; ++k)
      max_prod = std::max(max_prod, double(sym.degree(u)) * double(sym.degree(sym.indices[k])));
  if (sym.nnz() == 0) max_prod = 1;

  adgnn::PartBuilder builder(g, p);
  std::vector<GraphPart> parts;
  for (int32_t r = 0; r < P; ++r) parts.push_back(builder.build(r));

  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (int32_t r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(P));
    const GraphPart& gp = parts[r];
    ASSERT_EQ(gp.rank, r);
    ASSERT_EQ(gp.parts, P);
    EXPECT_EQ(gp.graph_hash, adgnn::graph_fingerprint(g));
    EXPECT_EQ(gp.global_nodes, n);
    EXPECT_EQ(gp.num_classes, g.num_classes);
    EXPECT_EQ(gp.method, p.method);
    const int64_t owned = gp.num_owned, halo = gp.num_halo(), src = owned + halo;
    ASSERT_GE(halo, 0);

    // Owned: exactly this rank's nodes, ascending.
    std::vector<int64_t> expect_owned;
    for (int64_t u = 0; u < n; ++u)
      if (p.owner[u] == r) expect_owned.push_back(u);
    ASSERT_EQ(std::vector<int64_t>(gp.global_id.begin(), gp.global_id.begin() + owned), expect_owned);
    for (int64_t i = 0; i < owned; ++i) ++seen[gp.global_id[i]];

    // Halo: exactly the non-owned symmetric neighbours of owned nodes, sorted by (owner, id).
    std::set<std::pair<int32_t, int64_t>> expect_halo;
    for (int64_t u : expect_owned)
      for (int64_t w : whole_row(sym, u))
        if (p.owner[w] != r) expect_halo.insert({p.owner[w], w});
    ASSERT_EQ(halo, static_cast<int64_t>(expect_halo.size()));
    ASSERT_EQ(static_cast<int64_t>(gp.halo_owner.size()), halo);
    ASSERT_EQ(static_cast<int64_t>(gp.halo_owner_index.size()), halo);
    int64_t h = 0;
    for (const auto& [o, w] : expect_halo) {
      EXPECT_EQ(gp.global_id[owned + h], w);
      EXPECT_EQ(gp.halo_owner[h], o);
      ++h;
    }
    ASSERT_EQ(static_cast<int32_t>(gp.recv_offset.size()), P + 1);
    EXPECT_EQ(gp.recv_offset.front(), 0);
    EXPECT_EQ(gp.recv_offset.back(), halo);
    EXPECT_EQ(gp.recv_offset[r], gp.recv_offset[r + 1]);
    for (int32_t q = 0; q < P; ++q)
      for (int64_t k = gp.recv_offset[q]; k < gp.recv_offset[q + 1]; ++k) EXPECT_EQ(gp.halo_owner[k], q);

    // Local CSRs: every row maps back to the whole graph's row, entry for entry, in order.
    for (const auto& [name, local, whole] :
         {std::tuple<const char*, const Csr*, const Csr*>{"sym", &gp.sym, &sym},
          {"out", &gp.out, &out},
          {"in", &gp.in, &in}}) {
      SCOPED_TRACE(name);
      ASSERT_EQ(local->rows, owned);
      ASSERT_EQ(local->cols, src);
      ASSERT_EQ(static_cast<int64_t>(local->indptr.size()), owned + 1);
      EXPECT_TRUE(local->values.empty());
      for (int32_t c : local->indices) {
        ASSERT_GE(c, 0);
        ASSERT_LT(c, src);
      }
      for (int64_t i = 0; i < owned; ++i)
        EXPECT_EQ(global_row(*local, i, gp.global_id), whole_row(*whole, gp.global_id[i]))
            << "row of node " << gp.global_id[i];
    }

    // Degrees of every source row, from the whole graph.
    ASSERT_EQ(static_cast<int64_t>(gp.degree.size()), src);
    ASSERT_EQ(static_cast<int64_t>(gp.in_degree.size()), src);
    ASSERT_EQ(static_cast<int64_t>(gp.out_degree.size()), src);
    for (int64_t i = 0; i < src; ++i) {
      const int64_t u = gp.global_id[i];
      EXPECT_EQ(gp.degree[i], sym.degree(u));
      EXPECT_EQ(gp.out_degree[i], out.degree(u));
      EXPECT_EQ(gp.in_degree[i], in.degree(u));
    }
    EXPECT_DOUBLE_EQ(gp.max_degree_product, max_prod);

    // Features of every source row, labels and split masks of every source row.
    ASSERT_EQ(gp.features.rows, src);
    ASSERT_EQ(gp.features.cols, g.features.cols);
    ASSERT_EQ(gp.features.sparse, g.features.sparse);
    for (int64_t i = 0; i < src; ++i)
      EXPECT_EQ(feature_row(gp.features, i), feature_row(g.features, gp.global_id[i]));
    ASSERT_EQ(static_cast<int64_t>(gp.labels.size()), src);
    for (int64_t i = 0; i < src; ++i) EXPECT_EQ(gp.labels[i], g.labels[gp.global_id[i]]);
    ASSERT_EQ(gp.splits.size(), g.splits.size());
    for (size_t s = 0; s < g.splits.size(); ++s) {
      const auto& a = gp.splits[s];
      const auto& b = g.splits[s];
      EXPECT_EQ(a.name, b.name);
      ASSERT_EQ(a.count, b.count);
      ASSERT_EQ(static_cast<int64_t>(a.train.size()), a.count * src);
      for (int64_t k = 0; k < a.count; ++k)
        for (int64_t i = 0; i < src; ++i) {
          const int64_t u = gp.global_id[i];
          EXPECT_EQ(a.train[k * src + i], b.train[k * n + u]);
          EXPECT_EQ(a.val[k * src + i], b.val[k * n + u]);
          EXPECT_EQ(a.test[k * src + i], b.test[k * n + u]);
        }
    }
  }
  for (int64_t u = 0; u < n; ++u) EXPECT_EQ(seen[u], 1) << "node " << u;

  // Exchange plan: rank r's send[q] is, by global id and in order, rank q's halo rows owned by r;
  // halo_owner_index points at the row among the owner's owned rows.
  for (int32_t r = 0; r < P; ++r)
    for (int32_t q = 0; q < P; ++q) {
      SCOPED_TRACE("send " + std::to_string(r) + " -> " + std::to_string(q));
      ASSERT_EQ(static_cast<int32_t>(parts[r].send.size()), P);
      const auto& s = parts[r].send[q];
      if (q == r) {
        EXPECT_TRUE(s.empty());
        continue;
      }
      std::vector<int64_t> sent;
      for (int64_t i : s) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, parts[r].num_owned);
        sent.push_back(parts[r].global_id[i]);
      }
      const GraphPart& recv = parts[q];
      std::vector<int64_t> expected(recv.global_id.begin() + recv.num_owned + recv.recv_offset[r],
                                    recv.global_id.begin() + recv.num_owned + recv.recv_offset[r + 1]);
      EXPECT_EQ(sent, expected);
      for (int64_t k = recv.recv_offset[r]; k < recv.recv_offset[r + 1]; ++k) {
        const int64_t idx = recv.halo_owner_index[k];
        ASSERT_GE(idx, 0);
        ASSERT_LT(idx, parts[r].num_owned);
        EXPECT_EQ(parts[r].global_id[idx], recv.global_id[recv.num_owned + k]);
      }
    }

  // The one-call form equals the builder's.
  const GraphPart one = adgnn::build_part(g, p, P - 1);
  EXPECT_EQ(one.global_id, parts[P - 1].global_id);
  EXPECT_EQ(one.sym.indices, parts[P - 1].sym.indices);
  EXPECT_EQ(one.send, parts[P - 1].send);
}

void check_every_split(const Graph& g) {
  for (const char* method : {"metis", "random"})
    for (int32_t parts : {1, 2, 3, 4}) {
      SCOPED_TRACE(std::string(method) + " parts " + std::to_string(parts));
      PartitionOptions opt;
      opt.method = method;
      opt.seed = 5;
      check_parts(g, adgnn::partition_graph(g, parts, opt));
    }
}

}  // namespace

TEST(GraphPart, SmallCsbm) { check_every_split(small_csbm()); }

TEST(GraphPart, SelfLoopsDuplicatesAndOneWayEdges) { check_every_split(hand_made()); }

TEST(GraphPart, OnePartIsTheWholeGraph) {
  for (const Graph& g : {small_csbm(), hand_made()}) {
    const GraphPart gp = adgnn::build_part(g, adgnn::partition_graph(g, 1), 0);
    std::vector<int64_t> all(static_cast<size_t>(g.num_nodes));
    std::iota(all.begin(), all.end(), int64_t{0});
    EXPECT_EQ(gp.global_id, all);
    EXPECT_EQ(gp.num_halo(), 0);
    EXPECT_TRUE(gp.halo_owner.empty());
    EXPECT_EQ(gp.recv_offset, std::vector<int64_t>({0, 0}));
    ASSERT_EQ(gp.send.size(), 1u);
    EXPECT_TRUE(gp.send[0].empty());
    const Csr sym = g.symmetric();
    EXPECT_EQ(gp.sym.indptr, sym.indptr);
    EXPECT_EQ(gp.sym.indices, sym.indices);
    EXPECT_EQ(gp.out.indices, g.directed_simple().indices);
  }
}

TEST(GraphPart, HandMadeHaloByHand) {
  // Owners: 0..5 on rank 0, 6..11 on rank 1. Symmetric neighbours of rank 0's nodes owned by
  // rank 1: 0-7, 2-10, 4-9, 5-6; so rank 0's halo is {6, 7, 9, 10}; rank 1's: {0, 2, 4, 5}.
  const Graph g = hand_made();
  std::vector<int32_t> owner(12, 0);
  for (int u = 6; u < 12; ++u) owner[u] = 1;
  const Partition p = adgnn::partition_stats(g, 2, owner);
  const GraphPart a = adgnn::build_part(g, p, 0), b = adgnn::build_part(g, p, 1);
  EXPECT_EQ(a.global_id, std::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 9, 10}));
  EXPECT_EQ(a.halo_owner_index, std::vector<int64_t>({0, 1, 3, 4}));
  EXPECT_EQ(b.global_id, std::vector<int64_t>({6, 7, 8, 9, 10, 11, 0, 2, 4, 5}));
  EXPECT_EQ(a.send[1], std::vector<int64_t>({0, 2, 4, 5}));
  EXPECT_EQ(b.send[0], std::vector<int64_t>({0, 1, 3, 4}));  // local rows of 6, 7, 9, 10
  // Node 1: stored 1 -> 2 twice and 1 -> 0; symmetric neighbours {0, 2}; out {0, 2}; in {}.
  EXPECT_EQ(global_row(a.sym, 1, a.global_id), std::vector<int64_t>({0, 2}));
  EXPECT_EQ(global_row(a.out, 1, a.global_id), std::vector<int64_t>({0, 2}));
  EXPECT_EQ(global_row(a.in, 1, a.global_id), std::vector<int64_t>({0}));
  EXPECT_EQ(a.degree[1], 2);
  EXPECT_EQ(a.out_degree[1], 2);
  EXPECT_EQ(a.in_degree[1], 1);
}

TEST(GraphPart, BadRank) {
  const Graph g = hand_made();
  const Partition p = adgnn::partition_graph(g, 2);
  EXPECT_THROW(adgnn::build_part(g, p, 2), adgnn::InputError);
  EXPECT_THROW(adgnn::build_part(g, p, -1), adgnn::InputError);
}

TEST(GraphFingerprint, StableAndSensitive) {
  const Graph g = small_csbm();
  const std::string h = adgnn::graph_fingerprint(g);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h, adgnn::graph_fingerprint(small_csbm()));
  Graph renamed = g;
  renamed.name = "other";
  renamed.source = "elsewhere";
  EXPECT_EQ(adgnn::graph_fingerprint(renamed), h);
  Graph edge = g;
  edge.adj.indices[0] = (edge.adj.indices[0] + 1) % static_cast<int32_t>(g.num_nodes);
  EXPECT_NE(adgnn::graph_fingerprint(edge), h);
  Graph feat = g;
  feat.features.dense[7] += 1.0f;
  EXPECT_NE(adgnn::graph_fingerprint(feat), h);
  Graph classes = g;
  classes.num_classes += 1;
  EXPECT_NE(adgnn::graph_fingerprint(classes), h);
  Graph label = g;
  label.labels[3] = (label.labels[3] + 1) % g.num_classes;
  EXPECT_NE(adgnn::graph_fingerprint(label), h);
}
