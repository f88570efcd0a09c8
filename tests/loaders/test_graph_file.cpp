// GraphFileReader: rows read from our HDF5 file equal the same rows of the graph read whole
// (dense features over several chunks, sparse features, labels, splits, adjacency ranges, ids in
// any order and repeated), the structure without features, and the refusals.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "adgnn/graph_file.h"
#include "adgnn/loaders.h"
#include "fixtures.h"

using adgnn::Graph;
using adgnn::GraphFileReader;

namespace {

// Rows `ids` of the whole graph, as GraphFileReader returns them.
void expect_rows(const Graph& g, const GraphFileReader& r, const std::vector<int64_t>& ids) {
  const adgnn::Features f = r.feature_rows(ids);
  ASSERT_EQ(f.rows, static_cast<int64_t>(ids.size()));
  ASSERT_EQ(f.cols, g.features.cols);
  ASSERT_EQ(f.sparse, g.features.sparse);
  const size_t cols = static_cast<size_t>(f.cols);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t v = ids[i];
    if (f.sparse) {
      const auto& a = f.csr;
      const auto& b = g.features.csr;
      ASSERT_EQ(a.degree(int64_t(i)), b.degree(v)) << "row " << v;
      for (int64_t k = 0; k < a.degree(int64_t(i)); ++k) {
        EXPECT_EQ(a.indices[a.indptr[i] + k], b.indices[b.indptr[v] + k]);
        EXPECT_EQ(a.values[a.indptr[i] + k], b.values[b.indptr[v] + k]);
      }
    } else {
      for (size_t c = 0; c < cols; ++c)
        ASSERT_EQ(f.dense[i * cols + c], g.features.dense[size_t(v) * cols + c]) << "row " << v;
    }
  }
  const std::vector<int64_t> labels = r.label_rows(ids);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(labels[i], g.labels[ids[i]]);
  const std::vector<adgnn::SplitSet> splits = r.split_rows(ids);
  ASSERT_EQ(splits.size(), g.splits.size());
  for (size_t s = 0; s < splits.size(); ++s) {
    EXPECT_EQ(splits[s].name, g.splits[s].name);
    ASSERT_EQ(splits[s].count, g.splits[s].count);
    const size_t n = size_t(g.num_nodes), k = ids.size();
    for (int64_t j = 0; j < splits[s].count; ++j)
      for (size_t i = 0; i < k; ++i) {
        EXPECT_EQ(splits[s].train[j * k + i], g.splits[s].train[j * n + ids[i]]);
        EXPECT_EQ(splits[s].val[j * k + i], g.splits[s].val[j * n + ids[i]]);
        EXPECT_EQ(splits[s].test[j * k + i], g.splits[s].test[j * n + ids[i]]);
      }
  }
}

std::vector<int64_t> scattered_ids(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids;
  for (int i = 0; i < 500; ++i) ids.push_back(int64_t(rng() % uint64_t(n)));  // repeats, any order
  ids.push_back(0);
  ids.push_back(n - 1);
  for (int64_t v = n / 2; v < n / 2 + 300; ++v) ids.push_back(v);  // a run over a chunk border
  return ids;
}

}  // namespace

TEST(GraphFile, RowsEqualTheWholeReadDenseAndSparse) {
  const std::string dir = fixtures::scratch_dir();
  // 40k x 64 floats: several 4 MiB chunks of features; 3k x 40 sparse: contiguous datasets.
  for (const Graph& g : {fixtures::random_graph(40000, 64, false, 5), fixtures::random_graph(3000, 40, true, 6)}) {
    SCOPED_TRACE(g.features.sparse ? "sparse" : "dense");
    adgnn::write_graph_h5(g, dir + "/g.h5");
    const Graph whole = adgnn::read_graph_h5(dir + "/g.h5");
    const GraphFileReader r(dir + "/g.h5");
    const adgnn::GraphFileInfo& in = r.info();
    EXPECT_EQ(in.num_nodes, g.num_nodes);
    EXPECT_EQ(in.stored_edges, g.adj.nnz());
    EXPECT_EQ(in.feature_cols, g.features.cols);
    EXPECT_EQ(in.graph_hash, adgnn::graph_fingerprint(whole));
    ASSERT_EQ(in.split_families.size(), 1u);
    EXPECT_EQ(in.split_families[0], std::make_pair(std::string("random"), int64_t{2}));
    expect_rows(whole, r, scattered_ids(g.num_nodes, 7));
    expect_rows(whole, r, {});
    // Adjacency ranges: the whole, a middle slice, an empty one.
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, g.num_nodes}, {g.num_nodes / 3, g.num_nodes / 2}, {5, 5}}) {
      const adgnn::Csr c = r.adjacency_rows(b, e);
      ASSERT_EQ(c.rows, e - b);
      for (int64_t v = b; v < e; ++v) {
        ASSERT_EQ(c.degree(v - b), g.adj.degree(v));
        for (int64_t k = 0; k < c.degree(v - b); ++k)
          EXPECT_EQ(c.indices[c.indptr[v - b] + k], g.adj.indices[g.adj.indptr[v] + k]);
      }
    }
    // The structure: everything but the features.
    Graph s = r.read_structure();
    EXPECT_EQ(s.features.rows, 0);
    EXPECT_EQ(s.features.cols, g.features.cols);
    EXPECT_EQ(s.adj.indptr, g.adj.indptr);
    EXPECT_EQ(s.adj.indices, g.adj.indices);
    EXPECT_EQ(s.labels, g.labels);
    ASSERT_EQ(s.splits.size(), 1u);
    EXPECT_EQ(s.splits[0].train, g.splits[0].train);
    EXPECT_EQ(s.splits[0].test, g.splits[0].test);
    EXPECT_GT(in.memory_bytes(), g.adj.nnz() * 4);
  }
}

TEST(GraphFile, Refusals) {
  const std::string dir = fixtures::scratch_dir();
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const adgnn::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { GraphFileReader r(dir + "/none.h5"); }).find("none.h5"), std::string::npos);
  fixtures::write(dir + "/text.h5", "not hdf5");
  EXPECT_NE(message([&] { GraphFileReader r(dir + "/text.h5"); }).find("not an HDF5 file"), std::string::npos);
  adgnn::write_arrays_h5(dir + "/arrays.h5", {}, {{"format", "other"}});
  EXPECT_NE(message([&] { GraphFileReader r(dir + "/arrays.h5"); }).find("not an adgnn graph file"), std::string::npos);
  adgnn::write_graph_h5(fixtures::random_graph(100, 3, false, 1), dir + "/g.h5");
  const GraphFileReader r(dir + "/g.h5");
  EXPECT_NE(message([&] { r.feature_rows({0, 100}); }).find("outside [0, 100)"), std::string::npos);
  EXPECT_NE(message([&] { r.adjacency_rows(50, 101); }).find("outside [0, 100)"), std::string::npos);
}
