// csr_aggregate against a dense float64 reference, finite-difference gradients, determinism,
// and the graph tensors built from a Graph.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "adgnn/model.h"
#include "adgnn/ops.h"
#include "halo_boundary.h"
#include "ops/kernels.h"
#include "depth/surrogate.h"

namespace {

struct RandomCsr {
  at::Tensor rowptr, col;
};

RandomCsr random_csr(int64_t n_rows, int64_t n_cols, double density, uint64_t seed) {
  torch::manual_seed(seed);
  at::Tensor mask = torch::rand({n_rows, n_cols}, torch::kFloat64) < density;
  RandomCsr c;
  std::vector<int64_t> rp{0};
  std::vector<int32_t> ci;
  auto acc = mask.accessor<bool, 2>();
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t k = 0; k < n_cols; ++k)
      if (acc[r][k]) ci.push_back(int32_t(k));
    if (r % 5 == 0 && n_cols > 0) ci.push_back(0);  // duplicate entries must add up
    rp.push_back(int64_t(ci.size()));
  }
  c.rowptr = torch::tensor(rp, torch::kInt64);
  c.col = torch::tensor(std::vector<int64_t>(ci.begin(), ci.end()), torch::kInt64).to(torch::kInt32);
  return c;
}

at::Tensor dense_of(const RandomCsr& c, const at::Tensor& w, int64_t n_cols) {
  const int64_t n = c.rowptr.numel() - 1;
  at::Tensor d = torch::zeros({n, n_cols}, torch::kFloat64);
  auto rp = c.rowptr.accessor<int64_t, 1>();
  auto ci = c.col.accessor<int32_t, 1>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = rp[r]; k < rp[r + 1]; ++k)
      d[r][ci[k]] += w.defined() ? w[k].item<double>() : 1.0;
  return d;
}

TEST(CsrAggregate, EqualsDenseReferenceOnAllAndActiveRows) {
  const auto c = random_csr(50, 40, 0.1, 1);
  const at::Tensor x = torch::randn({40, 7}, torch::kFloat64);
  const at::Tensor w = torch::rand({c.col.numel()}, torch::kFloat64);
  for (const at::Tensor& weight : {at::Tensor(), w}) {
    const at::Tensor ref = torch::mm(dense_of(c, weight, 40), x);
    EXPECT_TRUE(torch::allclose(adgnn::csr_aggregate(c.rowptr, c.col, weight, x), ref, 1e-12, 1e-12));
    const at::Tensor rows = torch::tensor({3, 17, 0, 49}, torch::kInt64);
    EXPECT_TRUE(torch::allclose(adgnn::csr_aggregate(c.rowptr, c.col, weight, x, rows),
                                ref.index_select(0, rows), 1e-12, 1e-12));
    // float32 within float tolerance
    EXPECT_TRUE(torch::allclose(adgnn::csr_aggregate(c.rowptr, c.col, weight, x.to(torch::kFloat32)),
                                ref.to(torch::kFloat32), 1e-5, 1e-5));
  }
  // No active rows: an empty result, and gradients of zero.
  const at::Tensor xg = x.clone().requires_grad_(true);
  const at::Tensor none = torch::empty({0}, torch::kInt64);
  const at::Tensor out = adgnn::csr_aggregate(c.rowptr, c.col, {}, xg, none);
  EXPECT_EQ(out.size(0), 0);
  out.sum().backward();
  EXPECT_EQ(xg.grad().abs().sum().item<double>(), 0.0);
}

// Central finite differences in float64 against the analytic gradient of sum(out * probe).
TEST(CsrAggregate, GradientsMatchFiniteDifferences) {
  const auto c = random_csr(12, 9, 0.3, 2);
  const at::Tensor rows = torch::tensor({0, 4, 5, 11, 7}, torch::kInt64);
  at::Tensor x = torch::randn({9, 3}, torch::kFloat64).requires_grad_(true);
  at::Tensor w = torch::rand({c.col.numel()}, torch::kFloat64).requires_grad_(true);
  const at::Tensor probe = torch::randn({rows.numel(), 3}, torch::kFloat64);
  auto loss = [&](const at::Tensor& xx, const at::Tensor& ww) {
    return (adgnn::csr_aggregate(c.rowptr, c.col, ww, xx, rows) * probe).sum();
  };
  loss(x, w).backward();
  const double eps = 1e-6;
  torch::NoGradGuard guard;
  for (const auto& [param, grad] : {std::pair{x, x.grad()}, std::pair{w, w.grad()}}) {
    at::Tensor flat = param.view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double v = flat[i].item<double>();
      flat[i] = v + eps;
      const double up = loss(x, w).item<double>();
      flat[i] = v - eps;
      const double down = loss(x, w).item<double>();
      flat[i] = v;
      EXPECT_NEAR(grad.view({-1})[i].item<double>(), (up - down) / (2 * eps), 1e-7) << "entry " << i;
    }
  }
}

// The backward keeps its input rows only for the edge weights' gradient: with constant weights
// (GCN), x is not saved, so an in-place change of x after the call cannot touch the gradient
// (autograd would refuse it if x were saved); with weights that need a gradient it is saved.
TEST(CsrAggregate, KeepsItsInputOnlyForTheWeightGradient) {
  const auto c = random_csr(12, 9, 0.3, 3);
  const at::Tensor leaf = torch::randn({9, 3}, torch::kFloat64).requires_grad_(true);
  const at::Tensor w = torch::rand({c.col.numel()}, torch::kFloat64);
  const at::Tensor probe = torch::randn({12, 3}, torch::kFloat64);
  {
    at::Tensor x = leaf * 2;  // a non-leaf that the caller may change in place
    const at::Tensor out = adgnn::csr_aggregate(c.rowptr, c.col, w, x);
    {
      torch::NoGradGuard no_grad;
      x.add_(1.0);
    }
    (out * probe).sum().backward();
    const at::Tensor ref = 2 * torch::mm(dense_of(c, w, 9).t(), probe);
    EXPECT_TRUE(torch::allclose(leaf.grad(), ref, 1e-12, 1e-12));
  }
  {
    at::Tensor x = leaf * 2;
    const at::Tensor wg = w.clone().requires_grad_(true);
    const at::Tensor out = adgnn::csr_aggregate(c.rowptr, c.col, wg, x);
    {
      torch::NoGradGuard no_grad;
      x.add_(1.0);
    }
    EXPECT_THROW((out * probe).sum().backward(), c10::Error);  // x was saved for wg's gradient
  }
}

// Gradients against the dense float64 reference for a handful of rows (the backward then regroups
// their entries by source) and for many (it scans the transpose), with and without weights and
// the fused self term.
TEST(CsrAggregate, BackwardOfFewAndManyRowsEqualsTheDenseReference) {
  const auto c = random_csr(200, 200, 0.05, 5);
  const at::Tensor x = torch::randn({200, 6}, torch::kFloat64);
  const at::Tensor w = torch::rand({c.col.numel()}, torch::kFloat64);
  const at::Tensor few = torch::tensor({0, 3, 17, 120, 199}, torch::kInt64);   // < 1/8 of the rows
  const at::Tensor many = torch::arange(0, 200, 2, torch::kInt64);               // half of them
  for (const at::Tensor& rows : {few, many}) {
    for (const at::Tensor& weight : {at::Tensor(), w}) {
      for (bool self : {false, true}) {
        const at::Tensor self_w = self ? torch::rand({rows.numel()}, torch::kFloat64) : at::Tensor();
        const at::Tensor probe = torch::randn({rows.numel(), 6}, torch::kFloat64);
        at::Tensor dense = dense_of(c, weight, 200).index_select(0, rows);
        if (self) dense.index_put_({torch::arange(rows.numel()), rows}, dense.index({torch::arange(rows.numel()), rows}) + self_w);
        const at::Tensor xg = x.clone().requires_grad_(true);
        const at::Tensor out = adgnn::csr_aggregate(c.rowptr, c.col, weight, xg, rows, self_w);
        EXPECT_TRUE(torch::allclose(out, dense.mm(x), 1e-12, 1e-12));
        (out * probe).sum().backward();
        EXPECT_TRUE(torch::allclose(xg.grad(), dense.t().mm(probe), 1e-12, 1e-12))
            << rows.numel() << " rows, weights " << weight.defined() << ", self " << self;
        // The rows' entry count given (AD's model passes it): the same values and gradient bits.
        const int64_t entries = (c.rowptr.index_select(0, rows + 1) - c.rowptr.index_select(0, rows)).sum().item<int64_t>();
        const at::Tensor xh = x.clone().requires_grad_(true);
        const at::Tensor outh = adgnn::csr_aggregate(c.rowptr, c.col, weight, xh, rows, self_w, entries);
        EXPECT_TRUE(torch::equal(outh, out));
        (outh * probe).sum().backward();
        EXPECT_TRUE(torch::equal(xh.grad(), xg.grad()));
        // One self weight per CSR row instead (GCN's, the graph's): the listed rows' own, the
        // same bits; the other rows' weights (random here) are never read.
        if (!self) continue;
        const at::Tensor per_row = torch::rand({200}, torch::kFloat64).index_put_({rows}, self_w);
        for (const int64_t e : {int64_t(-1), entries}) {
          const at::Tensor xr = x.clone().requires_grad_(true);
          const at::Tensor outr = adgnn::csr_aggregate(c.rowptr, c.col, weight, xr, rows, per_row, e);
          EXPECT_TRUE(torch::equal(outr, out));
          (outr * probe).sum().backward();
          EXPECT_TRUE(torch::equal(xr.grad(), xg.grad())) << rows.numel() << " rows, entries " << e;
        }
      }
    }
  }
}

// The backward caches the CSR's transpose, holding the CSR's tensors; release_graph_caches drops
// it (and every other cached entry): the tensors are this test's alone again, and the next
// backward rebuilds the transpose with the same gradient.
TEST(CsrAggregate, ReleasingTheCachesDropsTheTransposeAndRebuildsIt) {
  const auto c = random_csr(120, 120, 0.06, 9);
  const at::Tensor rowptr = c.rowptr.clone(), col = c.col.clone();  // this test's own handles
  const at::Tensor w = torch::rand({col.numel()}, torch::kFloat64);
  const at::Tensor x0 = torch::randn({120, 4}, torch::kFloat64);
  at::Tensor grads[2];
  for (int k = 0; k < 2; ++k) {
    at::Tensor x = x0.clone().requires_grad_(true);
    const at::Tensor rows = torch::arange(0, 120, 2, torch::kInt64);  // not every row: the transposed backward
    adgnn::csr_aggregate(rowptr, col, w, x, rows).sum().backward();
    grads[k] = x.grad();
    EXPECT_GT(rowptr.use_count(), 1) << "the transpose's cache entry holds the row pointer";
    adgnn::release_graph_caches();
    EXPECT_EQ(rowptr.use_count(), 1);
    EXPECT_EQ(col.use_count(), 1);
  }
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
}

TEST(CsrAggregate, DeterministicAcrossThreadCounts) {
  const auto c = random_csr(3000, 3000, 0.004, 3);
  const at::Tensor x = torch::randn({3000, 16});
  const at::Tensor g = torch::randn({3000, 16});
  std::vector<at::Tensor> outs, grads;
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    at::Tensor xx = x.clone().requires_grad_(true);
    at::Tensor out = adgnn::csr_aggregate(c.rowptr, c.col, {}, xx);
    out.backward(g);
    outs.push_back(out.detach());
    grads.push_back(xx.grad());
  }
  EXPECT_TRUE(torch::equal(outs[0], outs[1]));
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
}

TEST(GraphTensors, SymmetricAndDirectedViews) {
  adgnn::Graph g;
  g.num_nodes = 4;
  g.adj.rows = g.adj.cols = 4;
  g.adj.indptr = {0, 2, 3, 4, 5};
  g.adj.indices = {1, 1, 2, 2, 3};  // 0->1 twice, 1->2, 2->2 loop, 3->3 loop
  g.features.rows = 4;
  g.features.cols = 2;
  g.features.sparse = true;
  g.features.csr.rows = 4;
  g.features.csr.cols = 2;
  g.features.csr.indptr = {0, 1, 1, 2, 2};
  g.features.csr.indices = {1, 0};
  g.labels = {0, 1, 1, 0};
  g.num_classes = 2;
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  EXPECT_TRUE(torch::equal(t.rowptr, torch::tensor({0, 1, 3, 4, 4}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(t.col.to(torch::kInt64), torch::tensor({1, 0, 2, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(t.out_rowptr, torch::tensor({0, 1, 2, 2, 2}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(t.in_rowptr, torch::tensor({0, 0, 1, 2, 2}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(t.degree, torch::tensor({1.f, 2.f, 1.f, 0.f})));
  EXPECT_TRUE(torch::equal(t.x, torch::tensor({0.f, 1.f, 0.f, 0.f, 1.f, 0.f, 0.f, 0.f}).view({4, 2})));
}

// The training loss (ops/cross_entropy.cpp; the GPU kernel is compared with this in
// cuda/test_cross_entropy_cuda.cpp).
TEST(CrossEntropySum, EqualsTorchCrossEntropyAndItsGradient) {
  torch::manual_seed(7);
  const at::Tensor logits = torch::randn({50, 6}, torch::kFloat64).requires_grad_(true);
  const at::Tensor rows = torch::tensor({3, 0, 7, 49, 12, 12, 30}, torch::kInt64);
  const at::Tensor labels = torch::tensor({1, 5, 0, 2, 3, 4, 5}, torch::kInt64);
  const at::Tensor ours = adgnn::cross_entropy_sum(logits, rows, labels);
  const at::Tensor g_ours = torch::autograd::grad({ours}, {logits})[0];
  const at::Tensor ref = torch::nn::functional::cross_entropy(
      logits.index_select(0, rows), labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  const at::Tensor g_ref = torch::autograd::grad({ref}, {logits})[0];
  EXPECT_NEAR(ours.item<double>(), ref.item<double>(), 1e-12 * std::abs(ref.item<double>()));
  EXPECT_TRUE(torch::allclose(g_ours, g_ref, 1e-12, 1e-14));
  // Scaled (the mean over the training nodes): scale times the sum, and times its gradient.
  const at::Tensor scaled = adgnn::cross_entropy_sum(logits, rows, labels, 0.125);
  EXPECT_NEAR(scaled.item<double>(), 0.125 * ref.item<double>(), 1e-12 * std::abs(ref.item<double>()));
  EXPECT_TRUE(torch::allclose(torch::autograd::grad({scaled}, {logits})[0], 0.125 * g_ref, 1e-12, 1e-14));
}

// training_loss adds L_reg where the pass computed one (it carries a gradient) and leaves out the
// zero that stands for it otherwise.
TEST(CrossEntropySum, TrainingLossAddsTheRegulariserWhereThereIsOne) {
  torch::manual_seed(8);
  adgnn::ForwardOutput out;
  out.logits = torch::randn({20, 4}, torch::kFloat64).requires_grad_(true);
  const at::Tensor rows = torch::tensor({0, 5, 9}, torch::kInt64), labels = torch::tensor({3, 0, 1}, torch::kInt64);
  const double ce = adgnn::cross_entropy_sum(out.logits, rows, labels, 1.0 / 3).item<double>();
  out.reg_loss = torch::zeros({}, torch::kFloat64);
  EXPECT_DOUBLE_EQ(adgnn::training_loss(out, rows, labels, 1.0 / 3).item<double>(), ce);
  const at::Tensor w = torch::full({}, 0.5, torch::kFloat64).requires_grad_(true);
  out.reg_loss = w * 3;  // 1.5, with a gradient
  const at::Tensor loss = adgnn::training_loss(out, rows, labels, 1.0 / 3);
  EXPECT_NEAR(loss.item<double>(), ce + 1.5, 1e-14);
  loss.backward();
  EXPECT_DOUBLE_EQ(w.grad().item<double>(), 3.0);
}

}  // namespace

// The halo plan's read bits of the asked layers only, on the CPU: each (owned row, peer)
// word and each halo row's word against the definition, entry by entry, for every layer, layers
// >= 2 and layers 2-3; undefined computed-layer masks (plain models) read as every layer.
TEST(HaloKernels, ReadBitsOfTheAskedLayersEqualTheDefinition) {
  namespace k = adgnn::kernels;
  torch::manual_seed(5);
  const int64_t owned = 300, halo = 500, entries = 4000, P = 3;
  const adgnn::testing::RandomBoundary b = adgnn::testing::random_boundary(owned, halo, entries, P);
  // Most rows computed at layer 1 only (bit 0), a few deeper: AD's deeper layers.
  const at::Tensor deep = torch::rand({owned + halo}) < 0.05;
  const at::Tensor comp = torch::where(deep, torch::randint(2, 16, {owned + halo}, torch::kInt64), 1);
  const at::Tensor comp_owned = comp.slice(0, 0, owned).contiguous(), comp_halo = comp.slice(0, owned).contiguous();
  for (const bool plain : {false, true}) {
    for (const uint64_t layers : {~uint64_t(0), ~uint64_t(1), uint64_t(6)}) {
      SCOPED_TRACE(std::string(plain ? "plain, " : "") + "layers " + std::to_string(layers));
      const auto [want_peer, want_halo] = adgnn::testing::read_bits_by_definition(
          b, owned, P, plain ? at::Tensor() : comp_owned, plain ? at::Tensor() : comp_halo, layers);
      at::Tensor peer_bits = torch::zeros({owned * P}, torch::kInt64), halo_bits = torch::zeros({halo}, torch::kInt64);
      k::halo_read_bits(b.boundary, b.halo_owner, P, plain ? at::Tensor() : comp_owned,
                        plain ? at::Tensor() : comp_halo, peer_bits, halo_bits, layers);
      EXPECT_TRUE(torch::equal(peer_bits, want_peer));
      EXPECT_TRUE(torch::equal(halo_bits, want_halo));
      // Layers >= 2 leave most words empty here: the entries the kernels skip.
      if (!plain && layers == ~uint64_t(1)) {
        EXPECT_GT(halo_bits.eq(0).sum().item<int64_t>(), halo / 2);
        EXPECT_GT(halo_bits.ne(0).sum().item<int64_t>(), 0);
      }
    }
  }
}

