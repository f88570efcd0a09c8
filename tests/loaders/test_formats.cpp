// Dataset readers on small fixtures written by the tests: every layout, and one test per fault.
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>

#include "adgnn/loaders.h"
#include "fixtures.h"

using adgnn::InputError;
using fixtures::npy;

namespace {

template <typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "no error raised; expected one mentioning " << fragments.front();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
  }
}

using Members = std::vector<std::pair<std::string, std::string>>;

// A 4-node graph 0->1, 1->2, 2->0, 3->3 in the CitationFull layout.
Members csr_members() {
  return {{"adj_data.npy", npy<float>("<f4", {4}, {1, 1, 1, 1})},
          {"adj_indices.npy", npy<int32_t>("<i4", {4}, {1, 2, 0, 3})},
          {"adj_indptr.npy", npy<int32_t>("<i4", {5}, {0, 1, 2, 3, 4})},
          {"adj_shape.npy", npy<int64_t>("<i8", {2}, {4, 4})},
          {"attr_data.npy", npy<double>("<f8", {3}, {0.5, 1.0, 2.0})},
          {"attr_indices.npy", npy<int32_t>("<i4", {3}, {0, 2, 1})},
          {"attr_indptr.npy", npy<int32_t>("<i4", {5}, {0, 1, 2, 2, 3})},
          {"attr_shape.npy", npy<int64_t>("<i8", {2}, {4, 3})},
          {"labels.npy", npy<int64_t>("<i8", {4}, {0, 1, 1, 2})}};
}

Members replace(Members m, const std::string& name, const std::string& bytes) {
  for (auto& [n, b] : m)
    if (n == name) b = bytes;
  return m;
}
Members drop(Members m, const std::string& name) {
  m.erase(std::remove_if(m.begin(), m.end(), [&](auto& p) { return p.first == name; }), m.end());
  return m;
}

TEST(CsrNpz, LoadsGraphFeaturesLabelsAndMasks) {
  const std::string dir = fixtures::scratch_dir();
  auto m = csr_members();
  m.push_back({"train_mask.npy", npy<uint8_t>("|b1", {4}, {1, 0, 0, 0})});
  m.push_back({"val_mask.npy", npy<uint8_t>("|b1", {4}, {0, 1, 0, 0})});
  m.push_back({"test_mask.npy", npy<uint8_t>("|b1", {4}, {0, 0, 1, 1})});
  fixtures::write(dir + "/toy.npz", fixtures::zip(m, true));
  const auto g = adgnn::load_dataset(dir + "/toy.npz");
  EXPECT_EQ(g.name, "toy");
  EXPECT_EQ(g.num_nodes, 4);
  EXPECT_EQ(g.num_classes, 3);
  EXPECT_TRUE(g.directed);
  EXPECT_EQ(g.adj.indices, (std::vector<int32_t>{1, 2, 0, 3}));
  EXPECT_TRUE(g.features.sparse);
  EXPECT_EQ(g.features.to_dense(),
            (std::vector<float>{0.5f, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0}));
  const auto sym = g.symmetric();
  EXPECT_EQ(sym.indptr, (std::vector<int64_t>{0, 2, 4, 6, 6}));  // self-loop dropped
  EXPECT_EQ(sym.indices, (std::vector<int32_t>{1, 2, 0, 2, 0, 1}));
  ASSERT_NE(g.find_splits("public"), nullptr);
  EXPECT_EQ(g.find_splits("public")->test, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(g.source_sha256.size(), 64u);
}

TEST(CsrNpz, Faults) {
  const std::string dir = fixtures::scratch_dir();
  auto load = [&](const Members& m) {
    fixtures::write(dir + "/bad.npz", fixtures::zip(m, false));
    return adgnn::load_dataset(dir + "/bad.npz");
  };
  expect_error([&] { load(drop(csr_members(), "labels.npy")); }, {"bad.npz", "missing member 'labels'"});
  expect_error([&] { load(replace(csr_members(), "labels.npy", npy<float>("<f4", {4}, {0, 1, 1, 2}))); },
               {"bad.npz[labels]", "<f4"});
  expect_error([&] { load(replace(csr_members(), "labels.npy", npy<int64_t>("<i8", {3}, {0, 1, 1}))); },
               {"bad.npz[labels]", "shape"});
  expect_error([&] { load(replace(csr_members(), "labels.npy", npy<int64_t>("<i8", {4}, {0, -1, 1, 2}))); },
               {"bad.npz[labels]", "negative label"});
  // A label of 10^9 would make 10^9 classes: refused with the limit instead of allocated.
  expect_error([&] { load(replace(csr_members(), "labels.npy", npy<int64_t>("<i8", {4}, {0, 1000000000, 1, 2}))); },
               {"bad.npz[labels]", "label 1000000000 at node 1: at most 65536 classes are supported"});
  expect_error([&] { load(replace(csr_members(), "adj_indices.npy", npy<int32_t>("<i4", {4}, {1, 2, 9, 3}))); },
               {"bad.npz[adj_indices]", "out of range"});
  expect_error([&] { load(replace(csr_members(), "adj_indptr.npy", npy<int32_t>("<i4", {4}, {0, 1, 2, 4}))); },
               {"bad.npz[adj_indptr]", "shape"});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { load(replace(csr_members(), "attr_data.npy", npy<double>("<f8", {3}, {0.5, nan, 2}))); },
               {"bad.npz", "NaN"});
  fixtures::write(dir + "/empty.npz", "");
  expect_error([&] { adgnn::load_dataset(dir + "/empty.npz"); }, {"empty.npz", "empty file"});
  fixtures::write(dir + "/other.npz", fixtures::zip({{"a.npy", npy<float>("<f4", {1}, {1})}}, false));
  expect_error([&] { adgnn::load_dataset(dir + "/other.npz"); }, {"other.npz", "unrecognised"});
}

TEST(PlatonovNpz, DenseFeaturesEdgesAndFortranMasks) {
  const std::string dir = fixtures::scratch_dir() + "/toy";
  // 3 nodes, 2 splits; masks (2, 3) stored column-major: byte (s, n) at n * 2 + s.
  const std::vector<uint8_t> train_f{1, 0, 0, 1, 0, 0};  // split0: {0}, split1: {1}
  const std::vector<uint8_t> val_f{0, 1, 1, 0, 0, 0};    // split0: {1}, split1: {0}
  const std::vector<uint8_t> test_f{0, 0, 0, 0, 1, 1};   // split0: {2}, split1: {2}
  fixtures::write(dir + "/toy_filtered.npz",
                  fixtures::zip({{"node_features.npy", npy<float>("<f4", {3, 2}, {1, 0, 0, 1, 1, 1})},
                                 {"node_labels.npy", npy<int64_t>("<i8", {3}, {0, 1, 0})},
                                 {"edges.npy", npy<int64_t>("<i8", {2, 2}, {0, 1, 1, 2})},
                                 {"train_masks.npy", npy<uint8_t>("|b1", {2, 3}, train_f, true)},
                                 {"val_masks.npy", npy<uint8_t>("|b1", {2, 3}, val_f, true)},
                                 {"test_masks.npy", npy<uint8_t>("|b1", {2, 3}, test_f, true)}},
                                true));
  const auto g = adgnn::load_dataset(dir);
  EXPECT_EQ(g.name, "toy");
  EXPECT_FALSE(g.features.sparse);
  EXPECT_FALSE(g.directed);
  EXPECT_EQ(g.adj.nnz(), 2);
  const auto* s = g.find_splits("platonov");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->train, (std::vector<uint8_t>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(s->val, (std::vector<uint8_t>{0, 1, 0, 1, 0, 0}));
  fixtures::write(dir + "/toy_filtered.npz",
                  fixtures::zip({{"node_features.npy", npy<float>("<f4", {3, 2}, {1, 0, 0, 1, 1, 1})},
                                 {"node_labels.npy", npy<int64_t>("<i8", {3}, {0, 1, 0})},
                                 {"edges.npy", npy<int64_t>("<i8", {2, 2}, {0, 1, 1, 7})}},
                                true));
  expect_error([&] { adgnn::load_dataset(dir); }, {"toy_filtered.npz[edges]", "out of range"});
}

const char* kWebkbNodes =
    "node_id\tfeature\tlabel\n"
    "0\t1,0,0,1\t2\n"
    "1\t0,0,0,0\t0\n"
    "2\t0,1,1,0\t1\n";
const char* kFilmNodes =
    "node_id\tfeature(feature_amount:5)\tlabel\n"
    "2\t1,5,5\t0\n"
    "0\t0\t1\n"
    "1\t2,3\t1\n";
const char* kEdges = "node_id\tnode_id\n0\t1\n1\t2\n2\t2\n0\t1\n";

TEST(GeomGcn, DenseAndIndexListFeaturesWithSplitFiles) {
  const std::string dir = fixtures::scratch_dir() + "/webkb";
  fixtures::write(dir + "/out1_node_feature_label.txt", kWebkbNodes);
  fixtures::write(dir + "/out1_graph_edges.txt", kEdges);
  for (int i = 0; i < 2; ++i)
    fixtures::write(dir + "/webkb_split_0.6_0.2_" + std::to_string(i) + ".npz",
                    fixtures::zip({{"train_mask.npy", npy<uint8_t>("|u1", {3}, {1, 0, 0})},
                                   {"val_mask.npy", npy<uint8_t>("|b1", {3}, {0, 1, 0})},
                                   {"test_mask.npy", npy<uint8_t>("|u1", {3}, {0, 0, 1})}},
                                  true));
  auto g = adgnn::load_dataset(dir);
  EXPECT_EQ(g.name, "webkb");
  EXPECT_EQ(g.features.cols, 4);
  EXPECT_EQ(g.features.nnz(), 4);
  EXPECT_EQ(g.labels, (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(g.adj.nnz(), 4);  // duplicates and self-loops are kept as stored
  ASSERT_NE(g.find_splits("geom-gcn"), nullptr);
  EXPECT_EQ(g.find_splits("geom-gcn")->count, 2);

  std::vector<int64_t> labels;
  const auto film = adgnn::parse_geomgcn_nodes(kFilmNodes, "film.txt", labels);
  EXPECT_EQ(film.cols, 6);  // indices run to 5: max + 1 beats the declared amount
  EXPECT_EQ(labels, (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(film.csr.indices, (std::vector<int32_t>{0, 2, 3, 1, 5}));  // duplicate 5 collapsed
}

TEST(GeomGcn, Faults) {
  std::vector<int64_t> labels;
  expect_error([&] { adgnn::parse_geomgcn_nodes("", "n.txt", labels); }, {"n.txt", "empty file"});
  expect_error([&] { adgnn::parse_geomgcn_nodes("node_id\tfeature\tlabel\n0\t1,x\t0\n", "n.txt", labels); },
               {"n.txt:2", "'x'"});
  expect_error([&] { adgnn::parse_geomgcn_nodes("node_id\tfeature\tlabel\n0\t1,0\t0\n0\t1,1\t0\n", "n.txt", labels); },
               {"n.txt", "listed twice"});
  expect_error([&] { adgnn::parse_geomgcn_nodes("node_id\tfeature\tlabel\n0\t1,0\t0\n1\t1\t0\n", "n.txt", labels); },
               {"n.txt:3", "feature values"});
  expect_error([&] { adgnn::parse_geomgcn_nodes("node_id\tfeature\tlabel\n0\t1,0\n", "n.txt", labels); },
               {"n.txt:2", "3 tab-separated"});
  expect_error([&] { adgnn::parse_edge_list("h\th\n0\t5\n", "e.txt", 3, true, '\t'); },
               {"e.txt:2", "out of range"});
  expect_error([&] { adgnn::parse_edge_list("h\th\n0\tnan\n", "e.txt", 3, true, '\t'); },
               {"e.txt:2", "integer"});
  const std::string dir = fixtures::scratch_dir() + "/missing";
  fixtures::write(dir + "/out1_graph_edges.txt", kEdges);
  expect_error([&] { adgnn::load_geomgcn(dir); }, {"out1_node_feature_label.txt", "cannot open"});
}

void write_ogb(const std::string& dir, const std::string& edges) {
  fixtures::write(dir + "/raw/edge.csv.gz", fixtures::gzip(edges));
  fixtures::write(dir + "/raw/node-feat.csv.gz", fixtures::gzip("0.5,1\n-1,2e-3\n3,4\n"));
  fixtures::write(dir + "/raw/node-label.csv.gz", fixtures::gzip("1\n0\n1\n"));
  fixtures::write(dir + "/raw/num-node-list.csv.gz", fixtures::gzip("3\n"));
  fixtures::write(dir + "/split/time/train.csv.gz", fixtures::gzip("0\n"));
  fixtures::write(dir + "/split/time/valid.csv.gz", fixtures::gzip("1\n"));
  fixtures::write(dir + "/split/time/test.csv.gz", fixtures::gzip("2\n"));
}

TEST(Ogb, NodePropertyLayout) {
  const std::string dir = fixtures::scratch_dir() + "/ogbn-toy";
  write_ogb(dir, "0,1\n2,1\n");
  const auto g = adgnn::load_dataset(dir);
  EXPECT_EQ(g.name, "ogbn-toy");
  EXPECT_EQ(g.num_nodes, 3);
  EXPECT_EQ(g.num_classes, 2);
  EXPECT_TRUE(g.directed);
  EXPECT_EQ(g.features.dense, (std::vector<float>{0.5f, 1, -1, 2e-3f, 3, 4}));
  EXPECT_EQ(g.adj.indices, (std::vector<int32_t>{1, 1}));
  const auto* s = g.find_splits("time");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->val, (std::vector<uint8_t>{0, 1, 0}));
}

TEST(Ogb, Faults) {
  const std::string dir = fixtures::scratch_dir() + "/ogbn-bad";
  write_ogb(dir, "0,1\n2,9\n");
  expect_error([&] { adgnn::load_ogb(dir); }, {"edge.csv.gz:2", "out of range"});
  write_ogb(dir, "0,1\n");
  const std::string gz = fixtures::gzip("0.5,1\n-1,2\n3,4\n");
  fixtures::write(dir + "/raw/node-feat.csv.gz", gz.substr(0, gz.size() - 6));
  expect_error([&] { adgnn::load_ogb(dir); }, {"node-feat.csv.gz", "truncated gzip"});
  fixtures::write(dir + "/raw/node-feat.csv.gz", fixtures::gzip("0.5,1\nnan,2\n3,4\n"));
  expect_error([&] { adgnn::load_ogb(dir); }, {"node-feat.csv.gz:2", "nan"});
  fixtures::write(dir + "/raw/node-feat.csv.gz", fixtures::gzip("0.5,1\n1,2\n"));
  expect_error([&] { adgnn::load_ogb(dir); }, {"node-feat.csv.gz", "2 feature rows for 3 nodes"});
  fixtures::write(dir + "/raw/node-feat.csv.gz", fixtures::gzip("0.5,1\n1,2\n3,4\n"));
  fixtures::write(dir + "/raw/num-node-list.csv.gz", fixtures::gzip("4\n"));
  expect_error([&] { adgnn::load_ogb(dir); }, {"num-node-list.csv.gz", "4 nodes"});
  std::filesystem::remove(dir + "/raw/num-node-list.csv.gz");
  std::filesystem::remove(dir + "/split/time/test.csv.gz");
  expect_error([&] { adgnn::load_ogb(dir); }, {"split/time/test.csv.gz"});
}

// csv.gz files are streamed: an edge file of about 12 MiB decompressed (three decompression
// blocks), written as two concatenated gzip members with CRLF lines and no final newline, reads
// as the edges it lists; the source hash is of the compressed bytes; empty and corrupt files fail
// with the loader's messages.
TEST(Ogb, StreamsLargeMultiMemberFiles) {
  const std::string dir = fixtures::scratch_dir() + "/ogbn-big";
  std::string a, b;
  const int64_t edges = 1200000;
  for (int64_t i = 0; i < edges; ++i) (i < edges / 2 ? a : b) += std::to_string(i % 3) + "," + std::to_string((i + 1) % 3) + "\r\n";
  b.resize(b.size() - 2);  // the last line has no newline
  write_ogb(dir, "");
  const std::string gz = fixtures::gzip(a) + fixtures::gzip(b);
  fixtures::write(dir + "/raw/edge.csv.gz", gz);
  const auto g = adgnn::load_ogb(dir);
  ASSERT_EQ(g.adj.nnz(), edges);
  EXPECT_EQ(g.adj.degree(0), edges / 3);
  EXPECT_EQ(g.adj.indices[0], 1);
  // The same edges in one member hash differently (the hash is of the file's bytes).
  fixtures::write(dir + "/raw/edge.csv.gz", fixtures::gzip(a + b));
  const auto g1 = adgnn::load_ogb(dir);
  EXPECT_EQ(g1.adj.indices, g.adj.indices);
  EXPECT_NE(g1.source_sha256, g.source_sha256);
  fixtures::write(dir + "/raw/edge.csv.gz", "");
  expect_error([&] { adgnn::load_ogb(dir); }, {"edge.csv.gz", "empty file"});
  std::string bad = gz;
  bad[bad.size() - 6] ^= 0x55;  // the second member's CRC-32: caught after its data
  fixtures::write(dir + "/raw/edge.csv.gz", bad);
  expect_error([&] { adgnn::load_ogb(dir); }, {"edge.csv.gz", "gzip data"});
}

// OGB's binary raw layout (raw/data.npz, raw/node-label.npz), as ogbn-papers100M ships: node
// labels are floats with NaN for unlabelled nodes, which load as kUnlabelled, stay out of every
// split, survive our HDF5 format and are not counted by the statistics; an unlabelled node in a
// split is refused. OGB's own folder name (ogbn_papers100M) resolves from ogbn-papers100M and
// papers100M.
TEST(Ogb, BinaryLayoutWithUnlabelledNodes) {
  const std::string root = fixtures::scratch_dir();
  const std::string dir = root + "/ogbn_papers100M";
  // 4 nodes, edges 0->1, 1->2, 2->3, 3->0; node 3 unlabelled.
  const std::vector<int64_t> edges{0, 1, 2, 3, 1, 2, 3, 0};
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};
  fixtures::write(dir + "/raw/data.npz",
                  fixtures::zip({{"edge_index.npy", fixtures::npy<int64_t>("<i8", {2, 4}, edges)},
                                 {"node_feat.npy", fixtures::npy<float>("<f4", {4, 2}, x)},
                                 {"num_nodes_list.npy", fixtures::npy<int64_t>("<i8", {1}, {4})},
                                 {"num_edges_list.npy", fixtures::npy<int64_t>("<i8", {1}, {4})}},
                                true));
  const double nan = std::nan("");
  fixtures::write(dir + "/raw/node-label.npz",
                  fixtures::zip({{"node_label.npy", fixtures::npy<double>("<f8", {4, 1}, {2, 0, 1, nan})}}, false));
  fixtures::write(dir + "/split/time/train.csv.gz", fixtures::gzip("0\n1\n"));
  fixtures::write(dir + "/split/time/valid.csv.gz", fixtures::gzip("2\n"));
  fixtures::write(dir + "/split/time/test.csv.gz", fixtures::gzip(""));
  EXPECT_EQ(adgnn::resolve_dataset("ogbn-papers100M", root), dir);
  EXPECT_EQ(adgnn::resolve_dataset("papers100M", root), dir);
  const adgnn::Graph g = adgnn::load_dataset("papers100M", root);
  EXPECT_EQ(g.num_nodes, 4);
  EXPECT_EQ(g.labels, (std::vector<int64_t>{2, 0, 1, adgnn::kUnlabelled}));
  EXPECT_EQ(g.num_classes, 3);
  EXPECT_EQ(g.features.dense, x);
  EXPECT_EQ(g.adj.indices, (std::vector<int32_t>{1, 2, 3, 0}));
  EXPECT_EQ(g.find_splits("time")->train, (std::vector<uint8_t>{1, 1, 0, 0}));
  // Statistics count edges between labelled nodes only: 0-1, 1-2 (none alike).
  const adgnn::GraphStats st = adgnn::compute_stats(g);
  EXPECT_EQ(st.class_sizes, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(st.edge_homophily, 0.0);
  adgnn::write_graph_h5(g, root + "/g.h5");
  EXPECT_EQ(adgnn::read_graph_h5(root + "/g.h5").labels, g.labels);
  // An unlabelled node in a split is refused, naming it.
  fixtures::write(dir + "/split/time/test.csv.gz", fixtures::gzip("3\n"));
  expect_error([&] { adgnn::load_dataset(dir); }, {"node 3 is unlabelled", "'time'"});
  // A label that is no class id.
  fixtures::write(dir + "/raw/node-label.npz",
                  fixtures::zip({{"node_label.npy", fixtures::npy<double>("<f8", {4}, {2, 0.5, 1, nan})}}, false));
  expect_error([&] { adgnn::load_dataset(dir); }, {"node-label.npz", "node 1", "not a class id"});
}

TEST(Resolve, ByNameAliasAndPath) {
  const std::string root = fixtures::scratch_dir();
  write_ogb(root + "/ogbn-arxiv", "0,1\n");
  EXPECT_EQ(adgnn::resolve_dataset("arxiv", root), root + "/ogbn-arxiv");
  EXPECT_EQ(adgnn::load_dataset("ogbn-arxiv", root).num_nodes, 3);
  expect_error([&] { adgnn::resolve_dataset("nosuch", root); }, {"--dataset nosuch", "not found"});
  expect_error([&] { adgnn::resolve_dataset("x/y.npz", root); }, {"--dataset x/y.npz", "no such file"});
  expect_error([&] { adgnn::load_dataset(root); }, {"no dataset recognised"});
}

}  // namespace
