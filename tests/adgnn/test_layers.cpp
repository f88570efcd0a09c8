// The backbone layers (adgnn/src/layers.h) in float64: equal to PyTorch Geometric's layers given
// the same weights and graph (references from tests/adgnn/pyg_reference.py, run by the ctest
// fixture `pyg_reference`), on all rows, on a subset of rows and as self-only updates; and
// gradients against central finite differences (these always run, Python or not).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/graph.h"
#include "adgnn/ops.h"
#include "adgnn/loaders.h"
#include "backbones/layer.h"
#include "ops/linear.h"
#include "ops/csr.h"
#include "depth/fdelta.h"

#ifndef ADGNN_PYG_REF_DIR
#define ADGNN_PYG_REF_DIR ""
#endif

namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;
using Arrays = std::map<std::string, at::Tensor>;

// ---- helpers ---------------------------------------------------------------------------------

// Largest |a - b| relative to max(1, max |b|); shapes must agree.
void expect_close(const at::Tensor& a, const at::Tensor& b, double tol, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what << ": undefined (no gradient reached it)";
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  if (b.numel() == 0) return;
  const at::Tensor bb = b.to(a.scalar_type());
  const double scale = std::max(1.0, bb.abs().max().item<double>());
  const double diff = (a - bb).abs().max().item<double>();
  EXPECT_LE(diff, tol * scale) << what << ": max |ours - reference| = " << diff << " (scale " << scale
                               << ")";
}

// A Graph holding the directed edges src -> dst, features x (dense), one class.
adgnn::Graph graph_of(int64_t n, const std::vector<int64_t>& src, const std::vector<int64_t>& dst,
                      const at::Tensor& x) {
  adgnn::Graph g;
  g.name = "layers-test";
  g.directed = true;
  g.num_nodes = n;
  g.adj.rows = g.adj.cols = n;
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(n));
  for (size_t e = 0; e < src.size(); ++e) rows[size_t(src[e])].push_back(int32_t(dst[e]));
  g.adj.indptr.assign(1, 0);
  for (const auto& r : rows) {
    g.adj.indices.insert(g.adj.indices.end(), r.begin(), r.end());
    g.adj.indptr.push_back(int64_t(g.adj.indices.size()));
  }
  const at::Tensor xf = x.to(torch::kFloat32).contiguous();
  g.features.rows = n;
  g.features.cols = x.size(1);
  g.features.dense.assign(xf.data_ptr<float>(), xf.data_ptr<float>() + xf.numel());
  g.labels.assign(size_t(n), 0);
  g.num_classes = 1;
  g.validate("layers-test");
  return g;
}

adgnn::MessageGraph message_graph_of(const adgnn::Graph& g) {
  return adgnn::message_graph(adgnn::to_tensors(g, torch::kCPU), torch::kFloat64);
}

Named grads_of(const at::Tensor& loss, const Named& leaves) {
  std::vector<at::Tensor> inputs;
  for (const auto& [name, t] : leaves) inputs.push_back(t);
  const auto gs = torch::autograd::grad({loss}, inputs, {}, /*retain_graph=*/false,
                                        /*create_graph=*/false, /*allow_unused=*/true);
  Named out;
  for (size_t i = 0; i < leaves.size(); ++i)
    out.emplace_back(leaves[i].first, gs[i].defined() ? gs[i] : torch::zeros_like(leaves[i].second));
  return out;
}

// ---- the configurations ------------------------------------------------------------------------

struct Config {
  std::string file;      // reference name (<file>.npz)
  std::string backbone;  // make_layer's name
  int64_t channels;
  int64_t heads;
  bool concat;
  bool classifier = false;
};

std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.file; }

adgnn::detail::LayerOptions options_of(const Config& c) {
  adgnn::detail::LayerOptions opt;
  opt.heads = c.heads;
  opt.concat_heads = c.concat;
  opt.classifier = c.classifier;
  opt.dirgnn_alpha = 0.5;
  opt.dtype = torch::kFloat64;
  opt.gen = at::make_generator<at::CPUGeneratorImpl>(17);
  return opt;
}

// PyG's name of one of our parameters (our Linear weights are the transpose of PyG's).
std::string pyg_name(const std::string& backbone, const std::string& ours) {
  if (backbone == "gcn" && ours == "weight") return "lin.weight";
  if (backbone == "dirgnn" && (ours == "conv_in.weight" || ours == "conv_out.weight"))
    return ours.substr(0, ours.find('.')) + ".lin.weight";
  return ours;
}
bool transposed(const std::string& pyg) {
  return pyg.size() >= 6 && pyg.compare(pyg.size() - 6, 6, "weight") == 0;
}

// ---- PyG equivalence -----------------------------------------------------------------------------

Arrays load_reference(const std::string& path) {
  Arrays out;
  for (const auto& [name, a] : adgnn::read_npz(path)) {
    at::Tensor t;
    if (a.kind == 'f') {
      const std::vector<double> v = a.as_double(path + ":" + name);
      t = torch::tensor(v, torch::kFloat64);
    } else {
      const std::vector<int64_t> v = a.as_int64(path + ":" + name);
      t = torch::tensor(v, torch::kInt64);
    }
    out[name] = t.reshape(a.shape);
  }
  return out;
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

class PygEquivalence : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    const Config& c = GetParam();
    const std::string dir = ADGNN_PYG_REF_DIR;
    const std::string path = dir + "/" + c.file + ".npz";
    if (dir.empty() || !std::ifstream(path).good())
      GTEST_SKIP() << "PyG reference " << path
                   << " is absent: run `ctest -R layers` (its fixture pyg_reference writes it with "
                      "the venv's python; configure with -DADGNN_PYTHON=...) or "
                      "`python tests/adgnn/pyg_reference.py "
                   << (dir.empty() ? "<dir>" : dir) << "`";
    ref_ = load_reference(path);
    ASSERT_EQ(ref_.at("channels").item<int64_t>(), c.channels);
    ASSERT_EQ(ref_.at("heads").item<int64_t>(), c.heads);
    ASSERT_EQ(ref_.at("concat").item<int64_t>() != 0, c.concat);
    x_ = ref_.at("x");
    n_ = x_.size(0);
    graph_ = message_graph_of(graph_of(n_, to_vector(ref_.at("src")), to_vector(ref_.at("dst")), x_));
    layer_ = adgnn::detail::make_layer(adgnn::parse_backbone(c.backbone), x_.size(1), c.channels, options_of(c));
    // PyG's parameters into ours, each used exactly once.
    std::set<std::string> unused;
    for (const auto& [name, t] : ref_)
      if (name.rfind("param.", 0) == 0) unused.insert(name.substr(6));
    torch::NoGradGuard no_grad;
    for (auto& [ours, p] : layer_->params()) {
      const std::string theirs = pyg_name(c.backbone, ours);
      ASSERT_TRUE(ref_.count("param." + theirs)) << "our " << ours << " has no PyG parameter " << theirs;
      at::Tensor v = ref_.at("param." + theirs);
      if (transposed(theirs)) v = v.t();
      ASSERT_EQ(p.sizes(), v.sizes()) << ours << " vs PyG " << theirs;
      ASSERT_EQ(p.scalar_type(), torch::kFloat64) << ours;
      p.copy_(v);
      unused.erase(theirs);
    }
    ASSERT_TRUE(unused.empty()) << "PyG parameter " << *unused.begin() << " has no counterpart";
  }

  // Our gradients against PyG's arrays <prefix>grad_x and <prefix>grad.<name>.
  void compare_grads(const at::Tensor& loss, const at::Tensor& x, const std::string& prefix,
                     double tol) {
    Named leaves{{"x", x}};
    for (const auto& np : layer_->params()) leaves.push_back(np);
    const Named g = grads_of(loss, leaves);
    expect_close(g[0].second, ref_.at(prefix + "grad_x"), tol, prefix + "grad_x");
    for (size_t i = 1; i < g.size(); ++i) {
      const std::string theirs = pyg_name(GetParam().backbone, g[i].first);
      const at::Tensor ours = transposed(theirs) ? g[i].second.t() : g[i].second;
      expect_close(ours, ref_.at(prefix + "grad." + theirs), tol,
                   prefix + "grad of " + g[i].first + " (PyG " + theirs + ")");
    }
  }

  void check_all_rows() {
    const at::Tensor x = x_.clone().requires_grad_(true);
    const at::Tensor out = layer_->forward(graph_, x, torch::arange(n_, torch::kInt64));
    EXPECT_EQ(out.size(1), layer_->out_dim());
    expect_close(out, ref_.at("out"), kOutTol, "out");
    compare_grads((out * ref_.at("probe")).sum(), x, "", kGradTol);
  }

  void check_subset_of_rows() {
    const at::Tensor rows = ref_.at("sub_rows");
    const at::Tensor x = x_.clone().requires_grad_(true);
    const at::Tensor out = layer_->forward(graph_, x, rows);
    ASSERT_EQ(out.size(0), rows.numel());
    expect_close(out, ref_.at("out").index_select(0, rows), kOutTol, "out[sub_rows]");
    compare_grads((out * ref_.at("probe").index_select(0, rows)).sum(), x, "sub_", kGradTol);
    // One row at a time (no in-edges, isolated, no out-edges), and no rows.
    torch::NoGradGuard no_grad;
    for (int64_t r : {int64_t(0), n_ - 1, int64_t(1), int64_t(7)}) {
      const at::Tensor one = layer_->forward(graph_, x_, torch::tensor({r}, torch::kInt64));
      expect_close(one, ref_.at("out").slice(0, r, r + 1), kOutTol, "row " + std::to_string(r));
    }
    const at::Tensor none = layer_->forward(graph_, x_, torch::empty({0}, torch::kInt64));
    EXPECT_EQ(none.size(0), 0);
  }

  static constexpr double kOutTol = 1e-10, kGradTol = 1e-9;

  Arrays ref_;
  at::Tensor x_;
  int64_t n_ = 0;
  adgnn::MessageGraph graph_;
  std::unique_ptr<adgnn::detail::Layer> layer_;
};

TEST_P(PygEquivalence, AllRowsOutputAndGradients) { check_all_rows(); }

// Only the requested rows are computed; they equal those rows of PyG's full output, and the
// gradients of a loss on them equal PyG's.
TEST_P(PygEquivalence, SubsetOfRows) { check_subset_of_rows(); }

// self_only(h_rows) equals PyG's layer on those rows as an edgeless graph.
TEST_P(PygEquivalence, SelfOnlyEqualsEdgelessGraph) {
  const at::Tensor h = x_.index_select(0, ref_.at("self_rows")).requires_grad_(true);
  const at::Tensor out = layer_->self_only(h);
  expect_close(out, ref_.at("self_out"), kOutTol, "self_out");
  compare_grads((out * ref_.at("self_probe")).sum(), h, "self_", kGradTol);
}

const std::vector<Config> kPygConfigs = {
    {"gcn", "gcn", 4, 1, true},
    {"gat_h2_concat", "gat", 3, 2, true},
    {"gat_h1_mean", "gat", 4, 1, false},
    {"gat_h2_mean", "gat", 3, 2, false},
    {"sage", "sage", 4, 1, true},
    {"mixhop", "mixhop", 3, 1, true},
    {"gatv2_h2_concat", "gatv2", 3, 2, true},
    {"gatv2_h2_mean", "gatv2", 3, 2, false},
    {"dirgnn", "dirgnn", 4, 1, true},
};

INSTANTIATE_TEST_SUITE_P(Backbones, PygEquivalence, ::testing::ValuesIn(kPygConfigs),
                         [](const auto& info) { return info.param.file; });

// ---- finite differences ----------------------------------------------------------------------------

// A small directed graph with a duplicate edge, a self-loop (both dropped by to_tensors), a node
// without in-edges (0), one without out-edges (1) and an isolated node (n - 1).
adgnn::MessageGraph small_graph(int64_t n, int64_t in_dim, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<int64_t> src{0, 0, 2, 2, 3, 4}, dst{2, 3, 1, 1, 3, 2};
  const at::Tensor r = torch::randint(2, n - 1, {2, 2 * n}, torch::kInt64);
  for (int64_t e = 0; e < r.size(1); ++e) {
    const int64_t u = r[0][e].item<int64_t>(), v = r[1][e].item<int64_t>();
    if (u != v) src.push_back(u), dst.push_back(v);
  }
  return message_graph_of(graph_of(n, src, dst, torch::randn({n, in_dim}, torch::kFloat64)));
}

// Central differences of loss() in every entry of every leaf, against autograd.
void check_finite_differences(const std::function<at::Tensor()>& loss, const Named& leaves) {
  const Named analytic = grads_of(loss(), leaves);
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (size_t l = 0; l < leaves.size(); ++l) {
    at::Tensor flat = leaves[l].second.view({-1});
    const at::Tensor grad = analytic[l].second.reshape({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double v = flat[i].item<double>();
      flat[i] = v + eps;
      const double up = loss().item<double>();
      flat[i] = v - eps;
      const double down = loss().item<double>();
      flat[i] = v;
      const double numeric = (up - down) / (2 * eps), exact = grad[i].item<double>();
      EXPECT_NEAR(exact, numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << leaves[l].first << " entry " << i;
    }
  }
}

class FiniteDifferences : public ::testing::TestWithParam<Config> {};

TEST_P(FiniteDifferences, Forward) {
  const Config& c = GetParam();
  const int64_t n = 12, in_dim = 3;
  const adgnn::MessageGraph g = small_graph(n, in_dim, 11);
  auto layer = adgnn::detail::make_layer(adgnn::parse_backbone(c.backbone), in_dim, c.channels, options_of(c));
  const at::Tensor x = torch::randn({n, in_dim}, torch::kFloat64).requires_grad_(true);
  const at::Tensor rows = torch::tensor(std::vector<int64_t>{0, 1, 4, 5, 9, n - 1}, torch::kInt64);
  const at::Tensor probe = torch::randn({rows.numel(), layer->out_dim()}, torch::kFloat64);
  Named leaves{{"x", x}};
  for (const auto& np : layer->params()) leaves.push_back(np);
  check_finite_differences([&] { return (layer->forward(g, x, rows) * probe).sum(); }, leaves);
}

TEST_P(FiniteDifferences, SelfOnly) {
  const Config& c = GetParam();
  const int64_t in_dim = 3;
  torch::manual_seed(12);
  auto layer = adgnn::detail::make_layer(adgnn::parse_backbone(c.backbone), in_dim, c.channels, options_of(c));
  const at::Tensor h = torch::randn({4, in_dim}, torch::kFloat64).requires_grad_(true);
  const at::Tensor probe = torch::randn({4, layer->out_dim()}, torch::kFloat64);
  Named leaves{{"h_rows", h}};
  for (const auto& np : layer->params()) leaves.push_back(np);
  check_finite_differences([&] { return (layer->self_only(h) * probe).sum(); }, leaves);
}

// The self term of h's leading rows (a rank's owned rows of [owned; halo]) equals the self term
// of their slice, values and gradients; layers with one linear self map write h's gradient
// without the slice's zero-filled copy, which this cannot see, but they must still zero the rows
// below the leading ones.
TEST_P(FiniteDifferences, SelfOnlyLeadingEqualsASlice) {
  const Config& c = GetParam();
  const int64_t in_dim = 3, rows = 4;
  torch::manual_seed(13);
  auto layer = adgnn::detail::make_layer(adgnn::parse_backbone(c.backbone), in_dim, c.channels, options_of(c));
  const at::Tensor h0 = torch::randn({rows + 3, in_dim}, torch::kFloat64);
  const at::Tensor probe = torch::randn({rows, layer->out_dim()}, torch::kFloat64);
  std::vector<at::Tensor> out(2), grads(2);
  std::vector<std::vector<at::Tensor>> param_grads(2);
  for (int leading = 0; leading < 2; ++leading) {
    const at::Tensor h = h0.clone().requires_grad_(true);
    for (const auto& np : layer->params()) np.second.mutable_grad() = at::Tensor();
    out[leading] = leading ? layer->self_only_leading(h, rows) : layer->self_only(h.narrow(0, 0, rows));
    (out[leading] * probe).sum().backward();
    grads[leading] = h.grad();
    for (const auto& np : layer->params()) param_grads[leading].push_back(np.second.grad());
  }
  EXPECT_TRUE(torch::allclose(out[1], out[0], 1e-12, 1e-14));
  EXPECT_TRUE(torch::allclose(grads[1], grads[0], 1e-12, 1e-14)) << grads[1] << grads[0];
  EXPECT_EQ(grads[1].narrow(0, rows, 3).abs().max().item<double>(), 0.0);
  for (size_t i = 0; i < param_grads[0].size(); ++i) {
    ASSERT_EQ(param_grads[1][i].defined(), param_grads[0][i].defined()) << i;
    if (param_grads[0][i].defined()) {
      EXPECT_TRUE(torch::allclose(param_grads[1][i], param_grads[0][i], 1e-12, 1e-14)) << i;
    }
  }
  // Every row (the one-process case) is h itself.
  EXPECT_TRUE(torch::allclose(layer->self_only_leading(h0, rows + 3), layer->self_only(h0), 1e-12, 1e-14));
}

const std::vector<Config> kFdConfigs = {
    {"gcn", "gcn", 2, 1, true},
    {"gat_h1_mean", "gat", 2, 1, false},
    {"gat_h2_concat", "gat", 2, 2, true},
    {"gat_h2_mean", "gat", 2, 2, false},
    {"sage", "sage", 2, 1, true},
    {"mixhop", "mixhop", 2, 1, true},
    {"mixhop_classifier", "mixhop", 2, 1, true, /*classifier=*/true},
    {"gatv2_h2_concat", "gatv2", 2, 2, true},
    {"gatv2_h1_mean", "gatv2", 2, 1, false},
    {"dirgnn", "dirgnn", 2, 1, true},
};

INSTANTIATE_TEST_SUITE_P(Backbones, FiniteDifferences, ::testing::ValuesIn(kFdConfigs),
                         [](const auto& info) { return info.param.file; });

// The source rows a layer reads to compute a few rows: read_flags (one kernel per CSR) flags
// exactly the rows that rows_read lists (the rows and their entries' columns, sorted and unique),
// for one CSR, attention, DirGNN's two directions, and neither for MixHop's two hops; with a hub
// row of more entries than a warp has lanes, and no rows at all.
TEST(RowsRead, FlagsEqualTheListedRows) {
  const int64_t n = 60;
  std::vector<int64_t> src, dst;
  for (int64_t v = 1; v < n; ++v) src.push_back(0), dst.push_back(v);
  for (int64_t v = 1; v + 1 < n; v += 3) src.push_back(v), dst.push_back(v + 1);
  const adgnn::MessageGraph g = message_graph_of(graph_of(n, src, dst, torch::randn({n, 3}, torch::kFloat64)));
  for (const char* backbone : {"gcn", "sage", "gat", "gatv2", "dirgnn", "mixhop"}) {
    SCOPED_TRACE(backbone);
    auto layer = adgnn::detail::make_layer(adgnn::parse_backbone(backbone), 3, 4, options_of(Config{"", backbone, 4, 2, true}));
    for (const std::vector<int64_t>& r : {std::vector<int64_t>{0}, {5, 17, 40}, {2, 59}, {}}) {
      const at::Tensor rows = torch::tensor(r, torch::kInt64);
      const at::Tensor listed = layer->rows_read(g, rows), flags = layer->read_flags(g, rows);
      if (std::string(backbone) == "mixhop") {
        EXPECT_FALSE(listed.defined());
        EXPECT_FALSE(flags.defined());
        continue;
      }
      ASSERT_TRUE(listed.defined() && flags.defined());
      EXPECT_EQ(flags.numel(), g.num_src);
      EXPECT_TRUE(torch::equal(flags.nonzero().select(1, 0), listed)) << flags.nonzero().select(1, 0) << listed;
    }
  }
}

// The aggregation's own transpose: GCN-like weights a_r a_c on a symmetric CSR are, and the
// backward then sums with the forward kernel; other weights, duplicate entries, halo columns or a
// directed entry are not. Either way the gradient equals the dense float64 reference.
TEST(CsrAggregate, SelfAdjointBackwardEqualsTheDenseReference) {
  torch::manual_seed(9);
  const int64_t n = 120;
  at::Tensor mask = torch::rand({n, n}, torch::kFloat64) < 0.06;
  mask = (mask | mask.t()) & ~torch::eye(n, torch::kBool);
  std::vector<int64_t> rp{0};
  std::vector<int32_t> ci;
  auto m = mask.accessor<bool, 2>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < n; ++c)
      if (m[r][c]) ci.push_back(int32_t(c));
    rp.push_back(int64_t(ci.size()));
  }
  const at::Tensor rowptr = torch::tensor(rp, torch::kInt64);
  const at::Tensor col = torch::tensor(std::vector<int64_t>(ci.begin(), ci.end()), torch::kInt64).to(torch::kInt32);
  const at::Tensor rows_of = torch::repeat_interleave(rowptr.slice(0, 1) - rowptr.slice(0, 0, n));
  const at::Tensor a = torch::rand({n}, torch::kFloat64) + 0.5;
  const at::Tensor sym_w = a.index_select(0, rows_of) * a.index_select(0, col.to(torch::kInt64));
  const at::Tensor asym_w = torch::rand({col.numel()}, torch::kFloat64);
  EXPECT_TRUE(adgnn::detail::csr_is_self_adjoint(rowptr, col, sym_w, n));
  EXPECT_TRUE(adgnn::detail::csr_is_self_adjoint(rowptr, col, {}, n));
  EXPECT_FALSE(adgnn::detail::csr_is_self_adjoint(rowptr, col, asym_w, n));
  EXPECT_FALSE(adgnn::detail::csr_is_self_adjoint(rowptr, col, sym_w, n + 3));  // halo rows
  {  // entry (0, c) without its mirror, and a duplicate of (0, c) with one mirror
    std::vector<int32_t> c1(ci);
    std::vector<int64_t> r1(rp);
    c1.insert(c1.begin(), int32_t(ci[0]));  // row 0 gains a second entry to its first column
    for (size_t i = 1; i < r1.size(); ++i) r1[i] += 1;
    const at::Tensor dup_col = torch::tensor(std::vector<int64_t>(c1.begin(), c1.end()), torch::kInt64).to(torch::kInt32);
    EXPECT_FALSE(adgnn::detail::csr_is_self_adjoint(torch::tensor(r1, torch::kInt64), dup_col, {}, n));
  }
  at::Tensor dense = torch::zeros({n, n}, torch::kFloat64);
  const at::Tensor x = torch::randn({n, 5}, torch::kFloat64), probe = torch::randn({n, 5}, torch::kFloat64);
  const at::Tensor self_w = torch::rand({n}, torch::kFloat64);
  for (const bool sym : {true, false}) {
    const at::Tensor& w = sym ? sym_w : asym_w;
    dense.zero_().index_put_({rows_of, col.to(torch::kInt64)}, w, /*accumulate=*/true);
    const at::Tensor ref = dense + torch::diag(self_w);
    for (const at::Tensor& rows : {at::Tensor(), torch::arange(n)}) {
      SCOPED_TRACE(std::string(sym ? "symmetric" : "asymmetric") + (rows.defined() ? ", rows given" : ""));
      const at::Tensor xg = x.clone().requires_grad_(true);
      const at::Tensor out = adgnn::csr_aggregate(rowptr, col, w, xg, rows, self_w);
      EXPECT_TRUE(torch::allclose(out, ref.mm(x), 1e-12, 1e-12));
      (out * probe).sum().backward();
      EXPECT_TRUE(torch::allclose(xg.grad(), ref.t().mm(probe), 1e-12, 1e-12)) << (xg.grad() - ref.t().mm(probe)).abs().max();
    }
  }
}

// linear() and linear_relu(): addmm's (and relu(addmm)'s) values and gradients (their own
// backward; on the GPU the bias gradient is the column-sum kernel, cuda/test_linear_cuda.cpp),
// with and without an input that needs a gradient.
TEST(Linear, EqualsAddmmWithGradients) {
  torch::manual_seed(4);
  const auto o = torch::dtype(torch::kFloat64);
  const at::Tensor x0 = torch::randn({31, 6}, o), w0 = torch::randn({6, 5}, o), b0 = torch::randn({5}, o);
  const at::Tensor probe = torch::randn({31, 5}, o);
  for (const bool x_grad : {true, false}) {
    std::vector<at::Tensor> grads[2];
    at::Tensor out[2];
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(x_grad), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      out[ours] = ours ? adgnn::detail::linear(x, w, b) : torch::addmm(b, x, w);
      (out[ours] * probe).sum().backward();
      grads[ours] = {x_grad ? x.grad() : torch::zeros({1}, o), w.grad(), b.grad()};
    }
    EXPECT_TRUE(torch::equal(out[0], out[1]));
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], 1e-12, 1e-14)) << i;
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(x_grad), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      out[ours] = ours ? adgnn::detail::linear_relu(x, w, b) : torch::relu(torch::addmm(b, x, w));
      (out[ours] * probe).sum().backward();
      grads[ours] = {x_grad ? x.grad() : torch::zeros({1}, o), w.grad(), b.grad()};
    }
    EXPECT_TRUE(torch::equal(out[0], out[1]));
    EXPECT_GT((out[0] == 0).sum().item<int64_t>(), 0);  // the ReLU did cut some
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], 1e-12, 1e-14)) << "relu " << i;
  }
}

// Column sums (the bias gradients) come in the accumulation type: float32 for bfloat16 rows,
// summed without rounding to bfloat16 (1 + 2^-9 + 2^-9 needs float32's bits).
TEST(Linear, ColumnSumsAreInTheAccumulationType) {
  const auto bf = torch::dtype(torch::kBFloat16);
  const at::Tensor x = torch::tensor({1.0, 0.001953125, 0.001953125}, bf).reshape({3, 1}).repeat({1, 3});
  const at::Tensor sums = adgnn::detail::column_sums(x);
  ASSERT_EQ(sums.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(sums, torch::full({3}, 1.00390625, torch::kFloat32))) << sums;
  const at::Tensor out = torch::tensor({1.0, 0.0, 2.0}, bf).reshape({3, 1}).repeat({1, 3});
  const auto [masked, msums] = adgnn::detail::relu_grad_column_sums(x, out);
  EXPECT_EQ(masked.scalar_type(), torch::kBFloat16);
  ASSERT_EQ(msums.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(msums, torch::full({3}, 1.001953125, torch::kFloat32))) << msums;
  EXPECT_EQ(adgnn::detail::column_sums(torch::randn({4, 3}, torch::kFloat64)).scalar_type(), torch::kFloat64);
}

// A float32 bias of bfloat16 rows gets its gradient as the float32 column sums, not rounded to
// bfloat16 on the way (1 + 2^-9 + 2^-9 needs float32's bits): linear, linear_relu, bias_add.
TEST(Linear, Bf16RowsGiveAFloat32BiasItsUnroundedGradient) {
  const auto bf = torch::dtype(torch::kBFloat16);
  const at::Tensor x = torch::ones({3, 2}, bf);
  const at::Tensor g = torch::tensor({1.0, 0.001953125, 0.001953125}, bf).reshape({3, 1}).repeat({1, 4});
  for (int op = 0; op < 3; ++op) {
    const at::Tensor w = torch::full({2, 4}, 0.5, torch::kFloat32).requires_grad_(true);
    const at::Tensor b = torch::full({4}, 10.0, torch::kFloat32).requires_grad_(true);  // the ReLU passes all
    const at::Tensor out = op == 0   ? adgnn::detail::linear(x, w, b)
                           : op == 1 ? adgnn::detail::linear_relu(x, w, b)
                                     : adgnn::detail::bias_add(x.mm(w.to(torch::kBFloat16)), b);
    ASSERT_EQ(out.scalar_type(), torch::kBFloat16) << op;
    EXPECT_TRUE(torch::equal(out, torch::full({3, 4}, 11.0, bf))) << op;
    out.backward(g);
    ASSERT_EQ(b.grad().scalar_type(), torch::kFloat32) << op;
    EXPECT_TRUE(torch::equal(b.grad(), torch::full({4}, 1.00390625, torch::kFloat32))) << op << b.grad();
  }
}

// Of x's leading rows only: the product and the bias / ReLU as of the slice, x's gradient of x's
// shape with zeros below them.
TEST(Linear, LeadingRowsEqualASlice) {
  torch::manual_seed(5);
  const auto o = torch::dtype(torch::kFloat64);
  const at::Tensor x0 = torch::randn({31, 6}, o), w0 = torch::randn({6, 5}, o), b0 = torch::randn({5}, o);
  const int64_t rows = 20;
  const at::Tensor probe = torch::randn({rows, 5}, o);
  for (const bool relu : {false, true}) {
    std::vector<at::Tensor> grads[2];
    at::Tensor out[2];
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      if (ours) {
        out[ours] = relu ? adgnn::detail::linear_relu(x, w, b, rows) : adgnn::detail::linear(x, w, b, rows);
      } else {
        out[ours] = torch::addmm(b, x.narrow(0, 0, rows), w);
        if (relu) out[ours] = torch::relu(out[ours]);
      }
      (out[ours] * probe).sum().backward();
      grads[ours] = {x.grad(), w.grad(), b.grad()};
    }
    EXPECT_TRUE(torch::equal(out[0], out[1])) << relu;
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], 1e-12, 1e-14)) << relu << i;
    EXPECT_EQ(grads[1][0].narrow(0, rows, 31 - rows).abs().max().item<double>(), 0.0);
  }
}

// f_delta evaluated once per mirrored pair equals the MLP on every entry's own input (values and
// the gradients of z and of the four parameters, float64), on a CSR with a self-loop, a
// duplicated entry, directed entries without a mirror either way round, halo columns beyond
// the destination rows, and an empty row.
TEST(FDelta, PairsEqualEveryEntrysOwnEvaluation) {
  // 5 destination rows, 7 source rows; row 4 is empty.
  const at::Tensor rowptr = torch::tensor(std::vector<int64_t>{0, 4, 6, 9, 10, 10}, torch::kInt64);
  const std::vector<int64_t> cols{0, 1, 2, 1, 0, 3, 0, 5, 6, 2}, rows{0, 0, 0, 0, 1, 1, 2, 2, 2, 3};
  const at::Tensor col = torch::tensor(cols, torch::kInt64).to(torch::kInt32);
  torch::manual_seed(5);
  const int64_t H = 4, K = 3;
  const at::Tensor z0 = torch::randn({7, H}, torch::kFloat64);
  z0[6].copy_(z0[2]);  // an entry whose difference is exactly zero (|d|' = 0 in both)
  const at::Tensor probe = torch::randn({10}, torch::kFloat64);
  std::vector<at::Tensor> ours_p, ref_p;
  for (int i = 0; i < 2; ++i) {
    std::vector<at::Tensor>& p = i == 0 ? ours_p : ref_p;
    torch::manual_seed(6);
    p = {z0.clone(), torch::randn({2 * H, K}, torch::kFloat64), torch::randn({K}, torch::kFloat64),
         torch::randn({K, 1}, torch::kFloat64), torch::randn({1}, torch::kFloat64)};
    for (at::Tensor& t : p) t.requires_grad_(true);
  }
  const at::Tensor ours =
      adgnn::detail::fdelta_entry_logits(rowptr, col, ours_p[0], ours_p[1], ours_p[2], ours_p[3], ours_p[4],
                                          adgnn::detail::FDeltaPrecision::kFp32);
  const at::Tensor zu = ref_p[0].index_select(0, torch::tensor(cols, torch::kInt64));
  const at::Tensor zv = ref_p[0].index_select(0, torch::tensor(rows, torch::kInt64));
  const at::Tensor ref =
      torch::addmm(ref_p[4], torch::relu(torch::addmm(ref_p[2], torch::cat({zu * zv, (zu - zv).abs()}, 1), ref_p[1])),
                   ref_p[3]).squeeze(1);
  ASSERT_EQ(ours.sizes(), ref.sizes());
  EXPECT_TRUE(torch::allclose(ours, ref, 1e-12, 1e-12)) << ours << ref;
  (ours * probe).sum().backward();
  (ref * probe).sum().backward();
  for (size_t i = 0; i < ours_p.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(ours_p[i].grad().defined());
    EXPECT_TRUE(torch::allclose(ours_p[i].grad(), ref_p[i].grad(), 1e-12, 1e-12)) << ours_p[i].grad() << ref_p[i].grad();
  }
}

}  // namespace
