// The contextual-SBM generator: exact edge counts and homophily, thread-independent output,
// degree shapes, class balance, feature separation, parameter errors and presets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "adgnn/graph_file.h"
#include "adgnn/loaders.h"
#include "fixtures.h"
#include "fmt/format.h"
#include "thread_group.h"

namespace {

adgnn::CsbmParams small(double homophily, uint64_t seed = 1) {
  adgnn::CsbmParams p;
  p.nodes = 2000;
  p.classes = 5;
  p.avg_degree = 10;
  p.homophily = homophily;
  p.features = 8;
  p.seed = seed;
  p.threads = 1;
  return p;
}

// Fraction of stored (directed) entries joining two nodes of one class; on a symmetric CSR this
// is the edge homophily of the undirected edges.
double edge_homophily(const adgnn::Graph& g) {
  int64_t same = 0;
  for (int64_t u = 0; u < g.num_nodes; ++u)
    for (int64_t k = g.adj.indptr[u]; k < g.adj.indptr[u + 1]; ++k)
      same += g.labels[u] == g.labels[g.adj.indices[k]];
  return static_cast<double>(same) / static_cast<double>(g.adj.nnz());
}

// Sorted rows, no self-loops or duplicates, and every (u, v) has its (v, u).
void expect_simple_symmetric(const adgnn::Graph& g) {
  const auto& a = g.adj;
  ASSERT_EQ(a.rows, g.num_nodes);
  for (int64_t u = 0; u < a.rows; ++u)
    for (int64_t k = a.indptr[u]; k < a.indptr[u + 1]; ++k) {
      const int32_t v = a.indices[k];
      ASSERT_NE(v, u) << "self-loop at " << u;
      if (k > a.indptr[u]) {
        ASSERT_LT(a.indices[k - 1], v) << "row " << u << " unsorted or duplicate";
      }
      const auto b = a.indices.begin() + a.indptr[v], e = a.indices.begin() + a.indptr[v + 1];
      ASSERT_TRUE(std::binary_search(b, e, static_cast<int32_t>(u))) << u << "-" << v;
    }
}

std::vector<double> class_centroids(const adgnn::Graph& g) {
  const int64_t f = g.features.cols, k = g.num_classes;
  std::vector<double> c(static_cast<size_t>(k * f), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(k), 0);
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    ++count[g.labels[v]];
    for (int64_t j = 0; j < f; ++j) c[g.labels[v] * f + j] += g.features.dense[v * f + j];
  }
  for (int64_t y = 0; y < k; ++y)
    for (int64_t j = 0; j < f; ++j) c[y * f + j] /= static_cast<double>(count[y]);
  return c;
}

double mean_centroid_distance(const adgnn::Graph& g) {
  const auto c = class_centroids(g);
  const int64_t f = g.features.cols, k = g.num_classes;
  double sum = 0;
  int pairs = 0;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = a + 1; b < k; ++b, ++pairs) {
      double d = 0;
      for (int64_t j = 0; j < f; ++j) d += std::pow(c[a * f + j] - c[b * f + j], 2);
      sum += std::sqrt(d);
    }
  return sum / pairs;
}

void expect_input_error(const adgnn::CsbmParams& p, const std::string& flag) {
  try {
    adgnn::generate_csbm(p);
    ADD_FAILURE() << "no error for " << flag;
  } catch (const adgnn::InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(flag, 0), 0u) << msg;  // starts with the flag
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Csbm, ExactEdgesAndHomophily) {
  for (double h : {0.0, 0.2, 0.5, 0.9, 1.0}) {
    for (const char* dist : {"constant", "powerlaw"}) {
      SCOPED_TRACE(std::string(dist) + " h=" + std::to_string(h));
      auto p = small(h);
      p.degree_dist = dist;
      const auto g = adgnn::generate_csbm(p);
      g.validate("csbm");
      EXPECT_FALSE(g.directed);
      EXPECT_EQ(g.num_nodes, 2000);
      EXPECT_EQ(g.adj.nnz(), 2 * 10000);  // 2000 * 10 / 2 undirected edges, both directions
      expect_simple_symmetric(g);
      EXPECT_NEAR(edge_homophily(g), h, 0.01);
      const auto sym = g.symmetric();  // already simple and symmetric: unchanged
      EXPECT_EQ(sym.indptr, g.adj.indptr);
      EXPECT_EQ(sym.indices, g.adj.indices);
    }
  }
}

TEST(Csbm, ExplicitEdgeCountAndEdgeCases) {
  auto p = small(0.37);
  p.undirected_edges = 4321;
  auto g = adgnn::generate_csbm(p);
  EXPECT_EQ(g.adj.nnz(), 2 * 4321);
  EXPECT_EQ(std::lround(edge_homophily(g) * 4321), std::lround(0.37 * 4321));

  p.undirected_edges = 0;  // no edges at all
  g = adgnn::generate_csbm(p);
  EXPECT_EQ(g.adj.nnz(), 0);
  g.validate("csbm");

  // Dense and tiny: right at the half-of-the-pairs limit, top-up rounds must still finish.
  adgnn::CsbmParams d;
  d.nodes = 40;
  d.classes = 2;
  d.degree_dist = "powerlaw";
  d.undirected_edges = 380;  // of 780 pairs: 380 intra-class, 400 inter-class
  d.homophily = 0.48;        // 182 intra (limit 190), 198 inter (limit 200)
  d.features = 2;
  g = adgnn::generate_csbm(d);
  EXPECT_EQ(g.adj.nnz(), 2 * 380);
  expect_simple_symmetric(g);
  EXPECT_NEAR(edge_homophily(g), 182.0 / 380, 1e-9);

  // One class: every edge is intra-class.
  adgnn::CsbmParams one;
  one.nodes = 500;
  one.classes = 1;
  one.homophily = 1.0;
  one.features = 3;
  g = adgnn::generate_csbm(one);
  EXPECT_EQ(g.adj.nnz(), 5000);
  EXPECT_EQ(g.num_classes, 1);
}

TEST(Csbm, ReproducibleAcrossThreadCounts) {
  auto p = small(0.3, 42);
  p.degree_dist = "powerlaw";
  p.features = 16;
  p.threads = 1;
  const auto a = adgnn::generate_csbm(p);
  p.threads = 2;
  const auto b = adgnn::generate_csbm(p);
  p.threads = 0;
  const auto c = adgnn::generate_csbm(p);
  for (const auto* o : {&b, &c}) {
    EXPECT_EQ(a.adj.indptr, o->adj.indptr);
    EXPECT_EQ(a.adj.indices, o->adj.indices);
    EXPECT_EQ(a.labels, o->labels);
    ASSERT_EQ(a.features.dense.size(), o->features.dense.size());
    EXPECT_EQ(0, std::memcmp(a.features.dense.data(), o->features.dense.data(),
                             a.features.dense.size() * sizeof(float)));
    EXPECT_EQ(a.splits[0].train, o->splits[0].train);
    EXPECT_EQ(a.source_sha256, o->source_sha256);
  }
  p.seed = 43;
  const auto d = adgnn::generate_csbm(p);
  EXPECT_NE(a.adj.indices, d.adj.indices);
  EXPECT_NE(a.labels, d.labels);
  EXPECT_NE(a.features.dense, d.features.dense);
  EXPECT_NE(a.source_sha256, d.source_sha256);
}

TEST(Csbm, DegreeDistributions) {
  auto p = small(0.5);
  p.degree_dist = "powerlaw";
  auto g = adgnn::generate_csbm(p);
  int64_t mx = 0;
  for (int64_t u = 0; u < g.num_nodes; ++u) mx = std::max(mx, g.adj.degree(u));
  EXPECT_GT(mx, 5 * 10) << "power law: hubs far above the mean degree 10";

  p.degree_dist = "constant";
  g = adgnn::generate_csbm(p);
  mx = 0;
  int64_t mn = g.num_nodes;
  for (int64_t u = 0; u < g.num_nodes; ++u) {
    mx = std::max(mx, g.adj.degree(u));
    mn = std::min(mn, g.adj.degree(u));
  }
  EXPECT_LT(mx, 3 * 10) << "constant: Poisson-like degrees around 10";
  EXPECT_LT(mn, 10);
}

TEST(Csbm, BalancedLabelsFeaturesAndSplits) {
  auto p = small(0.5);
  p.nodes = 2003;  // 5 classes of 400 or 401
  p.features = 16;
  p.separation = 0.5;
  const auto near = adgnn::generate_csbm(p);
  std::vector<int64_t> count(5, 0);
  for (auto y : near.labels) ++count[y];
  EXPECT_EQ(*std::min_element(count.begin(), count.end()), 400);
  EXPECT_EQ(*std::max_element(count.begin(), count.end()), 401);
  EXPECT_EQ(near.features.rows, 2003);
  EXPECT_EQ(near.features.cols, 16);
  EXPECT_FALSE(near.features.sparse);

  p.separation = 4.0;
  const auto far = adgnn::generate_csbm(p);
  EXPECT_EQ(near.labels, far.labels);  // only the features change
  const double dn = mean_centroid_distance(near), df = mean_centroid_distance(far);
  EXPECT_GT(df, 2 * dn);
  EXPECT_NEAR(df, 4.0, 1.5);  // RMS distance between class means = separation

  p.separation = 0.0;
  p.noise = 0.0;
  const auto flat = adgnn::generate_csbm(p);
  for (float x : flat.features.dense) ASSERT_EQ(x, 0.0f);

  ASSERT_EQ(far.splits.size(), 1u);
  const auto& s = far.splits[0];
  EXPECT_EQ(s.name, "random");
  EXPECT_EQ(s.count, 1);
  int64_t tr = 0, va = 0, te = 0;
  for (int64_t v = 0; v < 2003; ++v) {
    EXPECT_EQ(s.train[v] + s.val[v] + s.test[v], 1) << v;
    tr += s.train[v];
    va += s.val[v];
    te += s.test[v];
  }
  EXPECT_EQ(tr, 2003 * 6 / 10);
  EXPECT_EQ(va, 2003 * 2 / 10);
  EXPECT_EQ(te, 2003 - tr - va);
  EXPECT_EQ(far.name, "csbm");
  EXPECT_NE(far.source.find("nodes=2003"), std::string::npos) << far.source;
  EXPECT_EQ(far.source_sha256, adgnn::sha256_hex(far.source));
}

TEST(Csbm, ParameterErrors) {
  auto p = small(0.5);
  p.homophily = 1.5;
  expect_input_error(p, "--homophily 1.5");
  p.homophily = std::nan("");
  expect_input_error(p, "--homophily");
  p = small(0.5);
  p.nodes = 0;
  expect_input_error(p, "--nodes 0");
  p = small(0.5);
  p.classes = 0;
  expect_input_error(p, "--classes 0");
  p.classes = 2001;
  expect_input_error(p, "--classes 2001");
  p = small(0.5);
  p.avg_degree = -1;
  expect_input_error(p, "--avg-degree -1");
  p.avg_degree = 1500;  // 1.5M edges > half of the 2M pairs
  expect_input_error(p, "--avg-degree 1500");
  p = small(0.5);
  p.undirected_edges = 1500000;
  expect_input_error(p, "--edges 1500000");
  p = small(0.5);
  p.degree_dist = "zipf";
  expect_input_error(p, "--degree-dist zipf");
  p = small(0.5);
  p.degree_dist = "powerlaw";
  p.powerlaw_exponent = 2.0;
  expect_input_error(p, "--exponent 2");
  p = small(0.5);
  p.features = 0;
  expect_input_error(p, "--features 0");
  p = small(0.5);
  p.noise = -0.1;
  expect_input_error(p, "--noise -0.1");
  p = small(0.5);
  p.separation = INFINITY;
  expect_input_error(p, "--separation");
  p = small(0.5);
  p.threads = -2;
  expect_input_error(p, "--threads -2");
  // Feasible in total but not per kind: 50 classes of 40 nodes have 39,000 intra-class pairs.
  p = small(1.0);
  p.classes = 50;
  p.avg_degree = 40;  // 40,000 intra-class edges wanted
  expect_input_error(p, "--homophily 1");
  p = small(0.5);
  p.classes = 1;  // no inter-class pairs
  expect_input_error(p, "--homophily 0.5");
}

TEST(Csbm, Presets) {
  const auto names = adgnn::csbm_presets();
  for (const char* want : {"arxiv-scale", "products-scale", "demo"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;

  const auto arxiv = adgnn::csbm_preset("arxiv-scale");
  EXPECT_EQ(arxiv.name, "arxiv-scale");
  EXPECT_EQ(arxiv.nodes, 169343);
  EXPECT_EQ(arxiv.undirected_edges, 1166243);
  EXPECT_EQ(arxiv.features, 128);
  EXPECT_EQ(arxiv.classes, 40);
  EXPECT_DOUBLE_EQ(arxiv.homophily, 0.65);
  EXPECT_EQ(arxiv.degree_dist, "powerlaw");

  const auto products = adgnn::csbm_preset("products-scale");
  EXPECT_EQ(products.name, "products-scale");
  EXPECT_EQ(products.nodes, 2449029);
  EXPECT_EQ(products.undirected_edges, 61859140);
  EXPECT_EQ(products.features, 100);
  EXPECT_EQ(products.classes, 47);
  EXPECT_DOUBLE_EQ(products.homophily, 0.81);
  EXPECT_EQ(products.degree_dist, "powerlaw");
  EXPECT_EQ(products.communities, 64);

  const auto papers = adgnn::csbm_preset("papers100m-scale");  // OGB's sizes of ogbn-papers100M
  EXPECT_EQ(papers.nodes, 111059956);
  EXPECT_EQ(papers.undirected_edges, 1615685872);
  EXPECT_EQ(papers.classes, 172);
  EXPECT_EQ(papers.features, 128);

  try {
    adgnn::csbm_preset("cora-scale");
    ADD_FAILURE() << "unknown preset accepted";
  } catch (const adgnn::InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("--preset cora-scale: unknown", 0), 0u) << msg;
    EXPECT_NE(msg.find("arxiv-scale"), std::string::npos) << msg;
  }

  auto demo = adgnn::csbm_preset("demo");
  EXPECT_EQ(demo.name, "demo");
  demo.threads = 1;
  const auto g = adgnn::generate_csbm(demo);
  g.validate("demo");
  EXPECT_EQ(g.name, "demo");
  EXPECT_EQ(g.num_nodes, demo.nodes);
  EXPECT_EQ(g.num_classes, demo.classes);
  EXPECT_EQ(g.features.cols, demo.features);
  EXPECT_EQ(g.adj.nnz(), std::llround(demo.nodes * demo.avg_degree));
  EXPECT_LT(demo.homophily, 1.0 / static_cast<double>(demo.classes));  // heterophilic
  EXPECT_NEAR(edge_homophily(g), demo.homophily, 0.01);
  expect_simple_symmetric(g);
}

// A preset at another node count keeps its average degree (its exact edge count does not carry
// over) and its other parameters; its communities are at most one per node. The graph made at
// that size has the degree.
TEST(Csbm, PresetAtOtherNodeCountsKeepsItsDegree) {
  const auto arxiv = adgnn::csbm_preset("arxiv-scale");
  const double degree = 2.0 * 1166243 / 169343;
  const auto big = adgnn::csbm_at_nodes(arxiv, 4000000);
  EXPECT_EQ(big.nodes, 4000000);
  EXPECT_EQ(big.undirected_edges, -1);
  EXPECT_DOUBLE_EQ(big.avg_degree, degree);
  EXPECT_EQ(big.communities, arxiv.communities);
  EXPECT_EQ(big.features, arxiv.features);
  EXPECT_DOUBLE_EQ(big.homophily, arxiv.homophily);
  // Fewer nodes: communities of at least the preset's size.
  EXPECT_EQ(adgnn::csbm_at_nodes(arxiv, 10).communities, 1);
  EXPECT_EQ(adgnn::csbm_at_nodes(arxiv, 20000).communities, 64 * 20000 / 169343);
  EXPECT_EQ(adgnn::csbm_at_nodes(arxiv, 169343).communities, 64);
  auto demo = adgnn::csbm_preset("demo");  // given by its degree: kept as it is
  EXPECT_DOUBLE_EQ(adgnn::csbm_at_nodes(demo, 500).avg_degree, demo.avg_degree);

  auto small = adgnn::csbm_at_nodes(arxiv, 20000);
  // Generates as resized, with no override: 7 communities (64 of 313 nodes hold too few pairs).
  small.features = 4;
  small.threads = 1;
  const auto g = adgnn::generate_csbm(small);
  g.validate("arxiv-scale at 20000 nodes");
  EXPECT_NEAR(double(g.adj.nnz()) / double(g.num_nodes), degree, 0.01 * degree);
}

// The generator's two halves (the structure, then feature rows on demand) make the graph
// generate_csbm makes, for any number of processes (played by threads): each holds its range of
// rows, and the file they write together (features made chunk by chunk as they are written, rows
// and chunks split between processes) reads back as the whole graph, with its fingerprint; also
// unchunked (deflate 0).
TEST(Csbm, AnyNumberOfProcessesMakeTheSameGraphAndFile) {
  adgnn::CsbmParams p;
  p.nodes = 30000;  // 30k x 64 floats: several 4 MiB chunks
  p.features = 64;
  p.communities = 4;
  p.locality = 0.9;
  p.seed = 12;
  p.threads = 2;
  const adgnn::Graph whole = adgnn::generate_csbm(p);
  const std::string hash = adgnn::graph_fingerprint(whole);
  const std::string dir = fixtures::scratch_dir();
  for (int P : {1, 2, 3, 4}) {
    SCOPED_TRACE(fmt::format("{} processes", P));
    std::vector<adgnn::CsbmGraph> shares(static_cast<size_t>(P));
    fixtures::ThreadGroups groups(P);
    groups.run([&](adgnn::ProcessGroup& g) {
      shares[g.rank()] = adgnn::generate_csbm_structure(p, g);
      const adgnn::CsbmGraph& mine = shares[g.rank()];
      for (int deflate : {1, 0}) {
        adgnn::H5WriteOptions opt;
        opt.deflate_level = deflate;
        opt.threads = 1;
        adgnn::write_graph_h5(mine.graph, mine.first_row, mine.features,
                              fmt::format("{}/p{}-d{}.h5", dir, P, deflate), g, opt);
      }
    });
    for (int r = 0; r < P; ++r) {
      const adgnn::CsbmGraph& s = shares[r];
      const int64_t lo = p.nodes * r / P, hi = p.nodes * (r + 1) / P;
      EXPECT_EQ(s.first_row, lo);
      ASSERT_EQ(s.graph.adj.rows, hi - lo);
      EXPECT_TRUE(s.graph.features.dense.empty());
      EXPECT_EQ(s.graph.labels, whole.labels);
      EXPECT_TRUE(std::equal(s.graph.adj.indices.begin(), s.graph.adj.indices.end(),
                             whole.adj.indices.begin() + whole.adj.indptr[lo]));
      EXPECT_EQ(s.graph.adj.nnz(), whole.adj.indptr[hi] - whole.adj.indptr[lo]);
      std::vector<float> rows(2 * 64);
      s.features(777, 2, rows.data());
      EXPECT_TRUE(std::equal(rows.begin(), rows.end(), whole.features.dense.begin() + 777 * 64));
    }
    for (int deflate : {1, 0}) {
      const std::string file = fmt::format("{}/p{}-d{}.h5", dir, P, deflate);
      EXPECT_EQ(adgnn::stored_graph_hash(file), hash) << file;
      const adgnn::Graph back = adgnn::read_graph_h5(file);
      EXPECT_EQ(adgnn::graph_fingerprint(back), hash) << file;
      EXPECT_EQ(back.adj.indptr, whole.adj.indptr);
      EXPECT_EQ(back.features.dense, whole.features.dense);
      EXPECT_EQ(adgnn::graph_fingerprint(adgnn::GraphFileReader(file)), hash);
    }
  }
}

// A process whose rows do not continue the previous one's fails every process with one error
// naming it, and no file is left.
TEST(Csbm, SharedWriterRefusesRowsOutOfOrder) {
  adgnn::CsbmParams p;
  p.nodes = 2000;
  p.features = 8;
  p.threads = 1;
  const std::string dir = fixtures::scratch_dir(), out = dir + "/bad.h5";
  fixtures::ThreadGroups groups(2);
  std::vector<std::string> errors(2);
  groups.run([&](adgnn::ProcessGroup& g) {
    const adgnn::CsbmGraph c = adgnn::generate_csbm_structure(p, g);
    try {
      adgnn::write_graph_h5(c.graph, c.first_row + (g.rank() == 1 ? 1 : 0), c.features, out, g);
    } catch (const adgnn::InputError& e) {
      errors[g.rank()] = e.what();
    }
  });
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_NE(errors[0].find("do not continue"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("process 1"), std::string::npos) << errors[0];
  EXPECT_FALSE(std::filesystem::exists(out));
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("bad.h5.tmp"), std::string::npos);
}

// Locality: an exact share of each kind of edge has both ends in one community (blocks of
// consecutive ids); the other edges still join any two nodes, so at least that share (plus the
// chance ones) is local. The edge count and homophily stay exact, the graph simple and
// symmetric, the output thread-independent; without communities the graph is the one it was.
TEST(Csbm, CommunitiesKeepTheirShareOfTheEdges) {
  for (double locality : {0.0, 0.5, 0.95}) {
    SCOPED_TRACE(locality);
    auto p = small(0.4);
    p.nodes = 4000;
    p.communities = 4;
    p.locality = locality;
    const adgnn::Graph g = adgnn::generate_csbm(p);
    expect_simple_symmetric(g);
    EXPECT_EQ(g.adj.nnz(), 2 * 20000);
    EXPECT_EQ(std::lround(edge_homophily(g) * 20000), std::lround(0.4 * 20000));
    int64_t local = 0;
    for (int64_t u = 0; u < g.num_nodes; ++u)
      for (int64_t k = g.adj.indptr[u]; k < g.adj.indptr[u + 1]; ++k) local += u / 1000 == g.adj.indices[k] / 1000;
    const double share = double(local) / double(g.adj.nnz());
    // Chance edges land in one of 4 blocks a quarter of the time.
    EXPECT_GE(share, locality - 1e-9);
    EXPECT_NEAR(share, locality + (1 - locality) * 0.25, 0.02);
    p.threads = 3;
    EXPECT_EQ(adgnn::generate_csbm(p).adj.indices, g.adj.indices);
    if (locality == 0.0) {
      auto plain = small(0.4);
      plain.nodes = 4000;
      const adgnn::Graph q = adgnn::generate_csbm(plain);
      EXPECT_EQ(q.adj.indices, g.adj.indices);
      EXPECT_EQ(q.source, g.source);
    } else {
      EXPECT_NE(g.source.find("communities=4 locality="), std::string::npos) << g.source;
    }
  }
  auto p = small(0.5);
  p.communities = 0;
  expect_input_error(p, "--communities 0");
  p.communities = 4;
  p.locality = 1.5;
  expect_input_error(p, "--locality 1.5");
  p.communities = 500;  // 4 nodes per community cannot hold 95% of 10,000 edges
  p.locality = 0.95;
  expect_input_error(p, "--locality 0.95");
}
