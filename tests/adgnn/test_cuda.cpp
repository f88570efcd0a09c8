// CUDA kernels and models against the CPU reference (runs on the GPU machine; skips elsewhere).
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <atomic>
#include <cmath>
#include <iostream>
#include <thread>

#include "adgnn/model.h"
#include "adgnn/ops.h"
#include "adgnn/trainer.h"
#include "depth/depth_benefit.h"
#include "halo_boundary.h"
#include "ops/kernels.h"
#include "backbones/layer.h"
#include "ops/linear.h"
#include "ops/csr.h"
#include "depth/fdelta.h"
#include "depth/surrogate.h"

#ifdef ADGNN_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

bool have_gpu() { return adgnn::cuda_kernels_built() && at::hasCUDA() && torch::cuda::device_count() > 0; }
#define REQUIRE_GPU()                                                                      \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device or no CUDA kernels in this build (CPU " \
                                   "machine); these tests run on the GPU machine"

adgnn::Graph graph(int64_t nodes, uint64_t seed) {
  adgnn::CsbmParams p;
  p.nodes = nodes;
  p.classes = 4;
  p.avg_degree = 8;
  p.degree_dist = "powerlaw";
  p.homophily = 0.4;
  p.features = 16;
  p.seed = seed;
  return adgnn::generate_csbm(p);
}

// Plain LibTorch reference in float64: gather + index_add_ over the computed rows' entries.
struct Reference {
  at::Tensor out, grad_x, grad_w;
};
Reference reference(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                    const at::Tensor& x, const at::Tensor& rows, const at::Tensor& probe) {
  const at::Tensor counts = rowptr.index_select(0, rows + 1) - rowptr.index_select(0, rows);
  const at::Tensor out_row = torch::repeat_interleave(counts);
  const at::Tensor first = (counts.cumsum(0) - counts).index_select(0, out_row);
  const at::Tensor entry = rowptr.index_select(0, rows).index_select(0, out_row) +
                           torch::arange(out_row.numel(), torch::kInt64) - first;
  const at::Tensor src = col.index_select(0, entry).to(torch::kInt64);
  at::Tensor xx = x.to(torch::kFloat64).detach().requires_grad_(true);
  at::Tensor ww = w.to(torch::kFloat64).detach().requires_grad_(true);
  const at::Tensor msg = xx.index_select(0, src) * ww.index_select(0, entry).unsqueeze(1);
  Reference r;
  r.out = torch::zeros({rows.numel(), x.size(1)}, torch::kFloat64).index_add(0, out_row, msg);
  (r.out * probe.to(torch::kFloat64)).sum().backward();
  r.grad_x = xx.grad();
  r.grad_w = ww.grad();
  return r;
}

// Widths that take every kernel path: vectorised (multiples of 4 / 2) and scalar, fewer lanes
// than a warp (1..31 vectors) and several passes of a warp (> 32 vectors); both precisions.
class CudaAggregate : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(CudaAggregate, ForwardAndBackwardEqualTheLibTorchReference) {
  REQUIRE_GPU();
  const auto [width, dbl] = GetParam();
  const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
  // Power-law degrees: rows with far more entries than a warp loads at once, and empty rows.
  const auto g = graph(3000, 1);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  torch::manual_seed(width);
  const at::Tensor x = torch::randn({g.num_nodes, width}, torch::kFloat64);
  const at::Tensor w = torch::rand({t.col.numel()}, torch::kFloat64);
  const at::Tensor all = torch::arange(g.num_nodes, torch::kInt64);
  const at::Tensor some = std::get<0>(torch::randperm(g.num_nodes, torch::kInt64).slice(0, 0, 700).sort());
  const double tol = dbl ? 1e-12 : 1e-4;
  const at::Tensor few = std::get<0>(torch::randperm(g.num_nodes, torch::kInt64).slice(0, 0, 150).sort());
  for (const at::Tensor& rows : {all, some, few, torch::empty({0}, torch::kInt64)}) {
    const at::Tensor probe = torch::randn({rows.numel(), width}, torch::kFloat64);
    const Reference ref = reference(t.rowptr, t.col, w, x, rows, probe);
    const auto d = c10::Device("cuda");
    at::Tensor xx = x.to(d, dtype).detach().requires_grad_(true);
    at::Tensor ww = w.to(d, dtype).detach().requires_grad_(true);
    const bool full = rows.numel() == g.num_nodes;
    const at::Tensor out = adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), ww, xx,
                                                full ? at::Tensor() : rows.to(d));
    (out * probe.to(d, dtype)).sum().backward();
    SCOPED_TRACE("rows " + std::to_string(rows.numel()));
    EXPECT_TRUE(torch::allclose(out.cpu().to(torch::kFloat64), ref.out, tol, tol));
    EXPECT_TRUE(torch::allclose(xx.grad().cpu().to(torch::kFloat64), ref.grad_x, tol, tol));
    EXPECT_TRUE(torch::allclose(ww.grad().cpu().to(torch::kFloat64), ref.grad_w, tol, tol));
    // Without weights (all ones) the same kernels run with w = nullptr.
    at::Tensor xu = x.to(d, dtype).detach().requires_grad_(true);
    const at::Tensor ones = torch::ones({t.col.numel()}, torch::kFloat64);
    const Reference ref1 = reference(t.rowptr, t.col, ones, x, rows, probe);
    const at::Tensor out1 = adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), {}, xu,
                                                 full ? at::Tensor() : rows.to(d));
    (out1 * probe.to(d, dtype)).sum().backward();
    EXPECT_TRUE(torch::allclose(out1.cpu().to(torch::kFloat64), ref1.out, tol, tol));
    EXPECT_TRUE(torch::allclose(xu.grad().cpu().to(torch::kFloat64), ref1.grad_x, tol, tol));
    if (full || rows.numel() == 0) continue;
    // The rows' entry count given (as AD's model does): few rows regroup their entries in the
    // backward without a device wait (on graphs of any size here); the same gradients.
    const int64_t saved_min = adgnn::kernels::regroup_min_entries();
    adgnn::kernels::regroup_min_entries() = 0;
    const int64_t entries = (t.rowptr.index_select(0, rows + 1) - t.rowptr.index_select(0, rows)).sum().item<int64_t>();
    at::Tensor xh = x.to(d, dtype).detach().requires_grad_(true);
    at::Tensor wh = w.to(d, dtype).detach().requires_grad_(true);
    const at::Tensor outh = adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), wh, xh, rows.to(d), {}, entries);
    (outh * probe.to(d, dtype)).sum().backward();
    adgnn::kernels::regroup_min_entries() = saved_min;
    EXPECT_TRUE(torch::allclose(outh.cpu().to(torch::kFloat64), ref.out, tol, tol));
    EXPECT_TRUE(torch::allclose(xh.grad().cpu().to(torch::kFloat64), ref.grad_x, tol, tol));
    EXPECT_TRUE(torch::allclose(wh.grad().cpu().to(torch::kFloat64), ref.grad_w, tol, tol));
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, CudaAggregate,
                         ::testing::Combine(::testing::Values<int64_t>(1, 3, 16, 33, 40, 128, 256, 260),
                                            ::testing::Bool()));

// A CSR of n rows with hubs (seeded): rows 0, 1 and 2 have `first` entries, the others
// 1 + (r * 7919) % spread, each row's columns distinct and sorted, and column 7 is read by rows
// 3 .. 3 + col7_readers - 1.
struct HubCsr {
  at::Tensor rowptr, col;
};
HubCsr hub_csr(int64_t n, std::array<int64_t, 3> first, int64_t spread, int64_t col7_readers, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<at::Tensor> cols;
  std::vector<int64_t> ptr{0};
  for (int64_t r = 0; r < n; ++r) {
    const int64_t deg = r < 3 ? first[size_t(r)] : 1 + (r * 7919) % spread;
    at::Tensor c = torch::randperm(n, torch::kInt64).slice(0, 0, deg);
    if (r >= 3 && r < 3 + col7_readers) c[0] = 7;
    cols.push_back(std::get<0>(c.sort()));
    ptr.push_back(ptr.back() + deg);
  }
  return {torch::tensor(ptr, torch::kInt64), torch::cat(cols).to(torch::kInt32)};
}

// Rows with >= kLongRow (1024) entries are summed by a whole block (spmm_long_rows): a CSR with
// hub rows of 5000, 1024 and 1023 entries (the last stays on one warp) and a column that 5000
// rows read (a long row of the transpose, the backward's), every width path, both precisions,
// with and without the self term, computed rows with and without the hubs; twice, same bits; and
// a third time with the rows' positions given (rows_pos, as AD's model does): the same bits.
TEST(Cuda, LongRowsEqualTheReferenceAndAreDeterministic) {
  REQUIRE_GPU();
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, 1024, 1023}, 11, 5000, 3);
  const at::Tensor &rowptr = h.rowptr, &col = h.col;
  const auto d = c10::Device("cuda");
  const at::Tensor all = torch::arange(n, torch::kInt64);
  const at::Tensor hubs = std::get<0>(torch::cat({torch::tensor({0, 1, 2, 7}, torch::kInt64),
                                                  torch::arange(100, 900, torch::kInt64)}).sort());
  const at::Tensor no_hubs = torch::arange(3000, 3500, torch::kInt64);
  for (const int64_t width : {1, 47, 128, 260}) {
    for (const bool dbl : {false, true}) {
      const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
      const double tol = dbl ? 1e-11 : 2e-4;
      const at::Tensor x = torch::randn({n, width}, torch::kFloat64);
      const at::Tensor w = torch::rand({col.numel()}, torch::kFloat64);
      for (const at::Tensor& rows : {all, hubs, no_hubs}) {
        for (const bool self : {false, true}) {
          SCOPED_TRACE("width " + std::to_string(width) + (dbl ? " double" : " float") + ", rows " +
                       std::to_string(rows.numel()) + (self ? ", self term" : ""));
          const at::Tensor probe = torch::randn({rows.numel(), width}, torch::kFloat64);
          const at::Tensor sw = torch::rand({rows.numel()}, torch::kFloat64);
          const Reference ref = reference(rowptr, col, w, x, rows, probe);
          at::Tensor ref_out = ref.out, ref_gx = ref.grad_x;
          if (self) {
            ref_out = ref_out + sw.unsqueeze(1) * x.index_select(0, rows);
            ref_gx = ref_gx.index_add(0, rows, sw.unsqueeze(1) * probe);
          }
          const bool full = rows.numel() == n;
          at::Tensor outs[3], grads[3];
          const at::Tensor pos =
              torch::full({n}, -1, torch::kInt32).index_put_({rows}, torch::arange(rows.numel(), torch::kInt32));
          for (int rep = 0; rep < (full ? 2 : 3); ++rep) {
            at::Tensor xx = x.to(d, dtype).detach().requires_grad_(true);
            outs[rep] = adgnn::csr_aggregate(rowptr.to(d), col.to(d), w.to(d, dtype), xx,
                                             full ? at::Tensor() : rows.to(d),
                                             self ? sw.to(d, dtype) : at::Tensor(), -1,
                                             rep == 2 ? pos.to(d) : at::Tensor());
            (outs[rep] * probe.to(d, dtype)).sum().backward();
            grads[rep] = xx.grad().cpu();
          }
          EXPECT_TRUE(torch::allclose(outs[0].cpu().to(torch::kFloat64), ref_out, tol, tol));
          EXPECT_TRUE(torch::allclose(grads[0].to(torch::kFloat64), ref_gx, tol, tol));
          EXPECT_TRUE(torch::equal(outs[0], outs[1]));
          EXPECT_TRUE(torch::equal(grads[0], grads[1]));
          if (!full) {
            EXPECT_TRUE(torch::equal(outs[0], outs[2]));
            EXPECT_TRUE(torch::equal(grads[0], grads[2]));
          }
        }
      }
    }
  }
}

// A call over every row sums the rows in descending order of length (kernels::row_schedule;
// the long rows first, to spmm_long_rows), forward and over the transpose. Outputs and gradients
// against float64 on the CPU: hub rows, every width path, both precisions, weights, the self
// term, every row and computed rows with their positions (the backward over the transpose in
// length order).
TEST(Cuda, LengthOrderedRowsMatchTheCpuReference) {
  REQUIRE_GPU();
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, 1024, 1023}, 11, 5000, 5);
  const auto d = c10::Device("cuda");
  const at::Tensor rowptr = h.rowptr.to(d), col = h.col.to(d);  // one cache entry for every call
  const at::Tensor some = std::get<0>(torch::randperm(n, torch::kInt64).slice(0, 0, 2000).sort()).to(d);
  const at::Tensor pos =
      torch::full({n}, -1, torch::kInt32).index_put_({some.cpu()}, torch::arange(2000, torch::kInt32)).to(d);
  for (const int64_t width : {1, 47, 128}) {
    for (const bool dbl : {false, true}) {
      const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
      const double tol = dbl ? 1e-11 : 2e-4;  // Cuda.LongRowsEqualTheReferenceAndAreDeterministic's, same hubs
      const at::Tensor x = torch::randn({n, width}, dtype).to(d);
      const at::Tensor w = torch::rand({col.numel()}, dtype).to(d);
      for (const bool all : {true, false}) {
        for (const bool self : {false, true}) {
          SCOPED_TRACE("width " + std::to_string(width) + (dbl ? " double" : " float") +
                       (all ? ", every row" : ", 2000 rows") + (self ? ", self term" : ""));
          const int64_t rows = all ? n : 2000;
          const at::Tensor probe = torch::randn({rows, width}, dtype).to(d);
          const at::Tensor sw = torch::rand({rows}, dtype).to(d);
          at::Tensor xx = x.detach().clone().requires_grad_(true);
          const at::Tensor out = adgnn::csr_aggregate(rowptr, col, w, xx, all ? at::Tensor() : some,
                                                      self ? sw : at::Tensor(), -1, all ? at::Tensor() : pos);
          (out * probe).sum().backward();
          at::Tensor x64 = x.cpu().to(torch::kFloat64).requires_grad_(true);
          const at::Tensor out64 =
              adgnn::csr_aggregate(h.rowptr, h.col, w.cpu().to(torch::kFloat64), x64, all ? at::Tensor() : some.cpu(),
                                   self ? sw.cpu().to(torch::kFloat64) : at::Tensor());
          (out64 * probe.cpu().to(torch::kFloat64)).sum().backward();
          EXPECT_TRUE(torch::allclose(out.cpu().to(torch::kFloat64), out64, tol, tol))
              << (out.cpu().to(torch::kFloat64) - out64).abs().max();
          EXPECT_TRUE(torch::allclose(xx.grad().cpu().to(torch::kFloat64), x64.grad(), tol, tol))
              << (xx.grad().cpu().to(torch::kFloat64) - x64.grad()).abs().max();
        }
      }
    }
  }
  // A dense graph, every row long (1,099 >= kLongRow entries), each column read by every other
  // row: the row kernel has no rows left in the length order, the long-row kernel writes them
  // all (forward and over the transpose), against the dense product.
  {
    const int64_t m = 1100;
    const at::Tensor r = torch::arange(m, torch::kInt64).repeat_interleave(m), c = torch::arange(m, torch::kInt64).repeat(m);
    const at::Tensor off = r != c;
    const at::Tensor dense_ptr = (torch::arange(m + 1, torch::kInt64) * (m - 1)).to(d);
    const at::Tensor dense_col = c.index({off}).to(torch::kInt32).to(d);
    const at::Tensor x = torch::randn({m, 128}, torch::kFloat32).to(d);
    const at::Tensor probe = torch::randn({m, 128}, torch::kFloat32).to(d);
    const at::Tensor w = torch::rand({dense_col.numel()}, torch::kFloat32).to(d);
    at::Tensor xx = x.detach().clone().requires_grad_(true);
    const at::Tensor out = adgnn::csr_aggregate(dense_ptr, dense_col, w, xx);
    (out * probe).sum().backward();
    const at::Tensor dense = torch::zeros({m, m}, torch::kFloat64)
                                 .index_put_({r.index({off}), c.index({off})}, w.cpu().to(torch::kFloat64));
    EXPECT_TRUE(torch::allclose(out.cpu().to(torch::kFloat64), dense.mm(x.cpu().to(torch::kFloat64)), 1e-3, 1e-3))
        << "every row long";
    EXPECT_TRUE(torch::allclose(xx.grad().cpu().to(torch::kFloat64), dense.t().mm(probe.cpu().to(torch::kFloat64)),
                                1e-3, 1e-3))
        << "every row long";
  }
  // The order itself: descending entry count, ties by index; the long rows (5000 and 1024
  // entries) lead it.
  const adgnn::kernels::RowSchedule schedule = adgnn::kernels::row_schedule(h.rowptr);
  EXPECT_EQ(schedule.n_long, 2);
  const at::Tensor order = schedule.order;
  const at::Tensor len = (h.rowptr.slice(0, 1) - h.rowptr.slice(0, 0, -1)).index_select(0, order);
  EXPECT_TRUE((len.slice(0, 1) <= len.slice(0, 0, -1)).all().item<bool>());
  EXPECT_TRUE(((len.slice(0, 1) < len.slice(0, 0, -1)) | (order.slice(0, 1) > order.slice(0, 0, -1))).all().item<bool>());
  EXPECT_EQ(std::get<0>(order.sort()).equal(torch::arange(n, torch::kInt64)), true);
}

// The CSR of the tests below: n = 6000 rows, hubs of 5000, 1024 and 1023 entries, column 7 read
// by 5000 rows; on the host (h) and the GPU.
struct HubCsrOnGpu {
  int64_t n;
  HubCsr h;
  at::Tensor rowptr, col;
};
HubCsrOnGpu skipping_hub_csr() {
  HubCsrOnGpu c{6000, hub_csr(6000, {5000, 1024, 1023}, 11, 5000, 7), {}, {}};
  c.rowptr = c.h.rowptr.to(c10::Device("cuda"));
  c.col = c.h.col.to(c10::Device("cuda"));
  return c;
}

// The backward over the transpose when few rows were computed (< 1/8: AD's deeper layers) first
// flags the source rows that read one (the computed rows' columns), writes the others as zeros
// without walking their entries, and sums the flagged ones (long rows of the transpose in
// chunks). The gradient against float64 on the CPU: computed rows with and without the hubs
// (skipping_hub_csr; column 7 is a long row of the transpose), every width path, both
// precisions, with and without the self term, the rows' positions given or not.
TEST(Cuda, SkippingUnreadRowsMatchesTheCpuReference) {
  REQUIRE_GPU();
  const HubCsrOnGpu g = skipping_hub_csr();
  const int64_t n = g.n;
  const HubCsr& h = g.h;
  const auto d = c10::Device("cuda");
  const at::Tensor &rowptr = g.rowptr, &col = g.col;
  const at::Tensor hubs = std::get<0>(torch::cat({torch::tensor({0, 1, 2, 7}, torch::kInt64),
                                                  torch::arange(3000, 3400, torch::kInt64)}).sort());
  const at::Tensor no_hubs = torch::arange(100, 600, torch::kInt64);
  for (const int64_t width : {1, 47, 128}) {
    for (const bool dbl : {false, true}) {
      const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
      const at::Tensor x = torch::randn({n, width}, dtype).to(d);
      const at::Tensor w = torch::rand({col.numel()}, dtype).to(d);
      for (const bool with_hubs : {true, false}) {
        const at::Tensor rows = (with_hubs ? hubs : no_hubs).to(d);
        const int64_t m = rows.numel();
        ASSERT_LT(m * 8, n);
        const at::Tensor pos =
            torch::full({n}, -1, torch::kInt32).index_put_({rows.cpu()}, torch::arange(m, torch::kInt32)).to(d);
        const at::Tensor probe = torch::randn({m, width}, dtype).to(d);
        const at::Tensor sw = torch::rand({m}, dtype).to(d);
        for (const bool self : {false, true}) {
          for (const bool given_pos : {false, true}) {
            SCOPED_TRACE("width " + std::to_string(width) + (dbl ? " double" : " float") +
                         (with_hubs ? ", hubs computed" : ", no hubs") + (self ? ", self term" : "") +
                         (given_pos ? ", rows_pos given" : ""));
            at::Tensor xx = x.detach().clone().requires_grad_(true);
            const at::Tensor out = adgnn::csr_aggregate(rowptr, col, w, xx, rows, self ? sw : at::Tensor(), -1,
                                                        given_pos ? pos : at::Tensor());
            (out * probe).sum().backward();
            // Against float64 on the CPU: rows that read no computed row have a zero gradient.
            at::Tensor x64 = x.cpu().to(torch::kFloat64).requires_grad_(true);
            const at::Tensor out64 =
                adgnn::csr_aggregate(h.rowptr, h.col, w.cpu().to(torch::kFloat64), x64, rows.cpu(),
                                     self ? sw.cpu().to(torch::kFloat64) : at::Tensor());
            (out64 * probe.cpu().to(torch::kFloat64)).sum().backward();
            EXPECT_TRUE(torch::allclose(xx.grad().cpu().to(torch::kFloat64), x64.grad(), dbl ? 1e-12 : 1e-5,
                                        dbl ? 1e-12 : 1e-5));
            EXPECT_GT(x64.grad().abs().sum(1).eq(0).sum().item<int64_t>(), 0);
          }
        }
      }
    }
  }
}

// The block-per-row kernels load unconditionally, reading row 0 for the entries they skip; a
// backward where no row was computed has a gradient input of no rows (the launch replaces it by
// a row of zeros): every gradient is zero, and nothing reads past that input.
TEST(Cuda, NoComputedRowsGiveZeroGradients) {
  REQUIRE_GPU();
  const HubCsrOnGpu g = skipping_hub_csr();
  const int64_t n = g.n;
  const auto d = c10::Device("cuda");
  const at::Tensor &rowptr = g.rowptr, &col = g.col;
  const at::Tensor none = torch::empty({0}, torch::kInt64).to(d);
  for (const int64_t width : {47, 128}) {
    SCOPED_TRACE("width " + std::to_string(width));
    at::Tensor x = torch::randn({n, width}, torch::kFloat32).to(d).requires_grad_(true);
    const at::Tensor w = torch::rand({col.numel()}, torch::kFloat32).to(d);
    const at::Tensor out = adgnn::csr_aggregate(rowptr, col, w, x, none, at::Tensor());
    ASSERT_EQ(out.size(0), 0);
    out.sum().backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().abs().sum().item<float>(), 0.0f);
  }
}

// In a call over few rows (< 1/8), rows with >= kMidRow (128) entries are summed by a block
// each, forward and backward (over the flagged transpose). On a CSR with rows of 1-400 entries,
// hubs of 5000 and 700, and column 7 read by 3000 rows: the same bits twice (the second with the
// rows' positions given, as AD's model does) and float64 on the CPU. Computed rows with and
// without the mid-length ones, both precisions, widths on the vector and the scalar path, the
// self term.
TEST(Cuda, MidRowsOnBlocksEqualTheReference) {
  REQUIRE_GPU();
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, 700, 130}, 400, 3000, 13);
  const at::Tensor len = h.rowptr.slice(0, 1) - h.rowptr.slice(0, 0, -1);
  const at::Tensor mid_rows = ((len >= adgnn::kernels::kMidRow) & (len < adgnn::kernels::kLongRow)).nonzero().squeeze(1);
  ASSERT_GT(mid_rows.numel(), 100);
  const auto d = c10::Device("cuda");
  const at::Tensor rowptr = h.rowptr.to(d), col = h.col.to(d);
  const at::Tensor short_rows = (len < 64).nonzero().squeeze(1).slice(0, 0, 500);
  const at::Tensor with_mid = std::get<0>(torch::_unique(
      torch::cat({torch::tensor({0, 1, 2}, torch::kInt64), mid_rows.slice(0, 0, 300), short_rows.slice(0, 0, 200)}), true));
  for (const int64_t width : {128, 47}) {
    for (const bool dbl : {false, true}) {
      const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
      const at::Tensor x = torch::randn({n, width}, dtype).to(d);
      const at::Tensor w = torch::rand({col.numel()}, dtype).to(d);
      for (const bool mid : {true, false}) {
        const at::Tensor rows = (mid ? with_mid : short_rows).to(d);
        const int64_t m = rows.numel();
        ASSERT_LT(m * 8, n);
        const at::Tensor probe = torch::randn({m, width}, dtype).to(d), sw = torch::rand({m}, dtype).to(d);
        const at::Tensor pos =
            torch::full({n}, -1, torch::kInt32).index_put_({rows.cpu()}, torch::arange(m, torch::kInt32)).to(d);
        for (const bool self : {false, true}) {
          SCOPED_TRACE("width " + std::to_string(width) + (dbl ? " double" : " float") +
                       (mid ? ", mid-length rows computed" : ", short rows") + (self ? ", self term" : ""));
          at::Tensor out[2], grad[2];
          for (int k = 0; k < 2; ++k) {  // twice, the second with rows_pos (as the model)
            at::Tensor xx = x.detach().clone().requires_grad_(true);
            out[k] = adgnn::csr_aggregate(rowptr, col, w, xx, rows, self ? sw : at::Tensor(), -1,
                                          k == 1 ? pos : at::Tensor());
            (out[k] * probe).sum().backward();
            grad[k] = xx.grad();
          }
          EXPECT_TRUE(torch::equal(out[0], out[1]));
          EXPECT_TRUE(torch::equal(grad[0], grad[1]));
          const double tol = dbl ? 1e-11 : 2e-4;
          at::Tensor x64 = x.cpu().to(torch::kFloat64).requires_grad_(true);
          const at::Tensor out64 = adgnn::csr_aggregate(h.rowptr, h.col, w.cpu().to(torch::kFloat64), x64, rows.cpu(),
                                                        self ? sw.cpu().to(torch::kFloat64) : at::Tensor());
          (out64 * probe.cpu().to(torch::kFloat64)).sum().backward();
          EXPECT_TRUE(torch::allclose(out[0].cpu().to(torch::kFloat64), out64, tol, tol));
          EXPECT_TRUE(torch::allclose(grad[0].cpu().to(torch::kFloat64), x64.grad(), tol, tol));
        }
      }
    }
  }
#ifdef ADGNN_HAVE_CUDA_KERNELS
  // Only the computed (forward: 301, ranked longest first by each block) or flagged (backward:
  // thousands, in the list's order) rows of the thousands with >= kMidRow entries got a block;
  // the GEMMs' stream counters are still zero (the lists keep their own).
  EXPECT_EQ(adgnn::kernels::nonzero_stream_counters(), 0);
#endif
  // The schedule's counts: the order's first n_mid rows are those with >= kMidRow entries; the
  // transpose (the backward's) has mid rows too.
  const adgnn::kernels::RowSchedule t_schedule = adgnn::kernels::transpose_entries(h.rowptr, h.col, n, true).schedule;
  EXPECT_GT(t_schedule.n_mid, t_schedule.n_long);
  EXPECT_GT(t_schedule.n_mid, 1000);
  const adgnn::kernels::RowSchedule schedule = adgnn::kernels::row_schedule(h.rowptr);
  EXPECT_EQ(schedule.n_long, 1);
  EXPECT_EQ(schedule.n_mid, (len >= adgnn::kernels::kMidRow).sum().item<int64_t>());
  EXPECT_TRUE((len.index_select(0, schedule.order.slice(0, 0, schedule.n_mid)) >= adgnn::kernels::kMidRow).all().item<bool>());
}

// The mid-row test graph: n = 20,000 rows, rows 0 .. m_mid - 1 with 130-299 entries (>= kMidRow),
// the others 1-20, random columns; the computed rows are those m_mid and 100 short ones (a few-row
// call: under 1/8).
struct MidCsr {
  at::Tensor rowptr, col, rows;
};
MidCsr mid_rows_csr(int64_t m_mid, uint64_t seed) {
  constexpr int64_t n = 20000;
  torch::manual_seed(seed);
  const at::Tensor r = torch::arange(n, torch::kInt64);
  const at::Tensor deg = torch::where(r < m_mid, 130 + r % 170, 1 + r % 20);
  MidCsr c;
  c.rowptr = torch::cat({torch::zeros({1}, torch::kInt64), deg.cumsum(0)});
  c.col = torch::randint(n, {deg.sum().item<int64_t>()}, torch::kInt64).to(torch::kInt32);
  c.rows = torch::cat({torch::arange(m_mid, torch::kInt64), torch::arange(5000, 5100, torch::kInt64)});
  return c;
}

// A few-row call's float64 inputs on the CPU (x, the weights, a probe of the output's shape) and
// its reference: the output and x's gradient of sum(out * probe).
struct FewRowReference {
  at::Tensor x, w, probe, out, grad;
};
FewRowReference few_row_reference(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                                  int64_t width) {
  FewRowReference r;
  r.x = torch::randn({rowptr.numel() - 1, width}, torch::kFloat64);
  r.w = torch::rand({col.numel()}, torch::kFloat64);
  r.probe = torch::randn({rows.numel(), width}, torch::kFloat64);
  at::Tensor x64 = r.x.clone().requires_grad_(true);
  r.out = adgnn::csr_aggregate(rowptr, col, r.w, x64, rows, at::Tensor());
  (r.out * r.probe).sum().backward();
  r.grad = x64.grad();
  return r;
}

// A call over few rows gives blocks to its computed blocked rows only, longest first when at most
// 512 are listed (each block of 512 threads ranks the list), else in the list's own order; the grid
// is capped at four blocks per SM (528 on an H200), so blocks take several rows.
// Here 500 or 1,500 computed rows of 130-299 entries among 20,000 rows (>= kMidRow: a block
// each) and 100 short ones: ranked (past the grid on a GPU of under 125 SMs), and unranked past
// the grid. The forward (the listed rows; the backward's
// transpose has no blocked rows here: Cuda.MidRowsOnBlocksEqualTheReference covers its listed
// path) and the backward equal float64 on the CPU, at width 128 and 47 and in both precisions;
// the same bits twice (the list's order comes from atomics). Each call reuses the list's
// counters, so a count left non-zero by one would make the next ones append past their lists.
TEST(Cuda, ListedRowsPastTheGridEqualTheReference) {
  REQUIRE_GPU();
  const auto d = c10::Device("cuda");
  for (const int64_t m_mid : {500, 1500}) {
    const MidCsr c = mid_rows_csr(m_mid, 17);
    const at::Tensor &rowptr = c.rowptr, &col = c.col, &rows = c.rows;
    const int64_t n = rowptr.numel() - 1;
    ASSERT_LT(rows.numel() * 8, n);
    const at::Tensor rowptr_d = rowptr.to(d), col_d = col.to(d);  // one cache entry for every call
    for (const int64_t width : {128, 47}) {
      for (const bool dbl : {false, true}) {
        SCOPED_TRACE(std::to_string(m_mid) + " listed rows, width " + std::to_string(width) +
                     (dbl ? " double" : " float"));
        const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
        const double tol = dbl ? 1e-11 : 2e-4;
        const FewRowReference ref = few_row_reference(rowptr, col, rows, width);
        at::Tensor out[2], grad[2];
        for (int k = 0; k < 2; ++k) {
          at::Tensor xx = ref.x.to(d, dtype).requires_grad_(true);
          out[k] = adgnn::csr_aggregate(rowptr_d, col_d, ref.w.to(d, dtype), xx, rows.to(d), at::Tensor());
          (out[k] * ref.probe.to(d, dtype)).sum().backward();
          grad[k] = xx.grad();
        }
        EXPECT_TRUE(torch::equal(out[0], out[1]));
        EXPECT_TRUE(torch::equal(grad[0], grad[1]));
        EXPECT_TRUE(torch::allclose(out[0].cpu().to(torch::kFloat64), ref.out, tol, tol));
        EXPECT_TRUE(torch::allclose(grad[0].cpu().to(torch::kFloat64), ref.grad, tol, tol));
      }
    }
  }
}

// A few-row call splits its listed rows of more than kRowChunk (2,048) entries into chunks, each
// a block's partial sum, added in chunk order by the block that completes the row. Hubs of
// 2,049 (two chunks, the second of one entry), 4,096 (exactly two), 5,000, 12,345 and 30,001
// (15 chunks) entries and one of exactly 2,048 (one item, not split) among 20,000 rows of 1-20
// entries; the computed rows: the hubs and 100 short rows. Forward and backward equal float64 on
// the CPU at width 128 and 47 in both precisions; the same bits twice.
TEST(Cuda, ChunkedHubRowsEqualTheReference) {
  REQUIRE_GPU();
  const auto d = c10::Device("cuda");
  constexpr int64_t n = 20000;
  const std::vector<int64_t> hubs{2049, 4096, 5000, 12345, 30001, 2048};
  ASSERT_EQ(hubs.back(), adgnn::kernels::kRowChunk);  // the hub of exactly kRowChunk entries
  at::Tensor deg = torch::arange(n, torch::kInt64) % 20 + 1;
  for (size_t h = 0; h < hubs.size(); ++h) deg[int64_t(h)] = hubs[h];
  torch::manual_seed(23);
  const at::Tensor rowptr = torch::cat({torch::zeros({1}, torch::kInt64), deg.cumsum(0)});
  const at::Tensor col = torch::randint(n, {deg.sum().item<int64_t>()}, torch::kInt64).to(torch::kInt32);
  const at::Tensor rows = torch::cat({torch::arange(int64_t(hubs.size()), torch::kInt64), torch::arange(5000, 5100, torch::kInt64)});
  ASSERT_LT(rows.numel() * 8, n);
  const at::Tensor rowptr_d = rowptr.to(d), col_d = col.to(d), rows_d = rows.to(d);
  for (const int64_t width : {128, 47}) {
    for (const bool dbl : {false, true}) {
      SCOPED_TRACE("width " + std::to_string(width) + (dbl ? " double" : " float"));
      const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
      const double tol = dbl ? 1e-11 : 5e-4;
      const FewRowReference ref = few_row_reference(rowptr, col, rows, width);
      at::Tensor out[2], grad[2];
      for (int k = 0; k < 2; ++k) {
        at::Tensor xx = ref.x.to(d, dtype).requires_grad_(true);
        out[k] = adgnn::csr_aggregate(rowptr_d, col_d, ref.w.to(d, dtype), xx, rows_d, at::Tensor());
        (out[k] * ref.probe.to(d, dtype)).sum().backward();
        grad[k] = xx.grad();
      }
      EXPECT_TRUE(torch::equal(out[0], out[1]));
      EXPECT_TRUE(torch::equal(grad[0], grad[1]));
      EXPECT_TRUE(torch::allclose(out[0].cpu().to(torch::kFloat64), ref.out, tol, tol))
          << (out[0].cpu().to(torch::kFloat64) - ref.out).abs().max();
      EXPECT_TRUE(torch::allclose(grad[0].cpu().to(torch::kFloat64), ref.grad, tol, tol));
    }
  }
}

// The few-row calls' list counters are non-zero between a call's two launches, and trainings may
// run as host threads on one stream (`adgnn train --run-workers`): so each thread keeps its own.
// Two threads interleave 30 few-row calls each on the default stream; every output equals the one
// of a single call, bit for bit.
TEST(Cuda, ListedRowsFromTwoHostThreads) {
  REQUIRE_GPU();
  const MidCsr c = mid_rows_csr(900, 19);
  const int64_t n = c.rowptr.numel() - 1;
  const auto d = c10::Device("cuda");
  const at::Tensor rowptr = c.rowptr.to(d), col = c.col.to(d), rows = c.rows.to(d);
  const at::Tensor x = torch::randn({n, 128}, torch::kFloat32).to(d);
  const at::Tensor w = torch::rand({col.numel()}, torch::kFloat32).to(d);
  const at::Tensor expected = adgnn::csr_aggregate(rowptr, col, w, x, rows, at::Tensor());
  std::atomic<int> mismatches{0};
  auto work = [&] {
    for (int k = 0; k < 30; ++k)
      if (!torch::equal(adgnn::csr_aggregate(rowptr, col, w, x, rows, at::Tensor()), expected)) ++mismatches;
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// The backward of at most kMaxListRows computed rows sums each source row's gradient from a
// list of the computed entries that read it: the same bits on a second run (the lists' order in
// memory comes from atomics) and from the kernel called directly (the path taken), and float64
// on the CPU. Computed rows with the hubs (5000, 1024 and 1023 entries; column 7, read by 200 of
// them) and without; 40 computed rows of which 32 read one column and 33 another (the lists'
// limit); a hand-made CSR with a column repeated in one row, 3 and 40 times (over 32 with 4
// computed rows: the warp walks the transpose), an empty computed row and computed rows that no
// computed row reads (their self term alone); every width path, both precisions, with and
// without the self term and the positions.
TEST(Cuda, ReaderListsMatchTheCpuReference) {
  REQUIRE_GPU();
  struct Case {
    std::string name;
    at::Tensor rowptr, col, rows;
  };
  std::vector<Case> cases;
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, 1024, 1023}, 11, 5000, 17);
  cases.push_back({"hubs and 200 readers of column 7", h.rowptr, h.col,
                   torch::cat({torch::tensor({0, 1, 2}, torch::kInt64), torch::arange(3000, 3200, torch::kInt64)})});
  cases.push_back({"short rows", h.rowptr, h.col, torch::arange(5500, 5700, torch::kInt64)});
  {  // 2000 rows; rows 0-39 computed: each reads 1000 + r, rows 0-31 read 500, 0-32 read 600, all 700.
    std::vector<int64_t> ptr{0};
    std::vector<int32_t> cols;
    for (int32_t r = 0; r < 2000; ++r) {
      if (r < 40) {
        if (r < 32) cols.push_back(500);
        if (r < 33) cols.push_back(600);
        cols.push_back(700);
        cols.push_back(1000 + r);
      } else {
        cols.push_back((r + 1) % 2000);
      }
      ptr.push_back(int64_t(cols.size()));
    }
    cases.push_back({"32, 33 and 40 computed readers", torch::tensor(ptr, torch::kInt64),
                     torch::tensor(cols, torch::kInt32), torch::arange(40, torch::kInt64)});
  }
  // 64 rows: row 0 reads 5 three times and 9 forty times; row 3 reads 0, 5 and 3 (itself); row 10 is empty;
  // row 20 reads 30; the others read (r + 1) % 64. Computed: 0, 3, 10, 20 (0 and 3 read by row 3
  // and row 0 is not read by row 0; 10 and 20 read by none of them).
  {
    std::vector<int64_t> ptr{0};
    std::vector<int32_t> cols;
    for (int32_t r = 0; r < 64; ++r) {
      std::vector<int32_t> first{5, 5, 5};
      first.insert(first.end(), 40, 9);
      const std::vector<int32_t> c = r == 0 ? first
                                     : r == 3 ? std::vector<int32_t>{0, 3, 5}
                                     : r == 10 ? std::vector<int32_t>{}
                                     : r == 20 ? std::vector<int32_t>{30}
                                               : std::vector<int32_t>{(r + 1) % 64};
      cols.insert(cols.end(), c.begin(), c.end());
      ptr.push_back(int64_t(cols.size()));
    }
    cases.push_back({"repeated columns, an empty row, unread rows", torch::tensor(ptr, torch::kInt64),
                     torch::tensor(cols, torch::kInt32), torch::tensor({0, 3, 10, 20}, torch::kInt64)});
  }
  const auto d = c10::Device("cuda");
  for (const Case& c : cases) {
    const int64_t rows_n = c.rowptr.numel() - 1, m = c.rows.numel();
    ASSERT_LT(m * 8, rows_n);
    ASSERT_LE(m, adgnn::kernels::kMaxListRows);
    const int64_t entries =
        (c.rowptr.index_select(0, c.rows + 1) - c.rowptr.index_select(0, c.rows)).sum().item<int64_t>();
    const at::Tensor rowptr = c.rowptr.to(d), col = c.col.to(d), rows = c.rows.to(d);
    const at::Tensor pos =
        torch::full({rows_n}, -1, torch::kInt32).index_put_({c.rows}, torch::arange(m, torch::kInt32)).to(d);
    if (c.name.rfind("32", 0) == 0) {  // the computed readers of each source row
      std::vector<at::Tensor> read;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = c.rows[i].item<int64_t>();
        read.push_back(c.col.slice(0, c.rowptr[r].item<int64_t>(), c.rowptr[r + 1].item<int64_t>()).to(torch::kInt64));
      }
      const at::Tensor readers = torch::bincount(torch::cat(read), {}, rows_n);
      EXPECT_EQ((readers > 32).sum().item<int64_t>(), 2);  // columns 600 and 700
    }
    for (const int64_t width : {1, 47, 128, 260}) {
      for (const bool dbl : {false, true}) {
        const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
        const at::Tensor x = torch::randn({rows_n, width}, dtype).to(d);
        const at::Tensor w = torch::rand({col.numel()}, dtype).to(d);
        const at::Tensor probe = torch::randn({m, width}, dtype).to(d), sw = torch::rand({m}, dtype).to(d);
        for (const bool self : {false, true}) {
          for (const bool given_pos : {false, true}) {
            SCOPED_TRACE(c.name + ", width " + std::to_string(width) + (dbl ? " double" : " float") +
                         (self ? ", self term" : "") + (given_pos ? ", rows_pos given" : ""));
            at::Tensor grad[2];
            for (int k = 0; k < 2; ++k) {
              at::Tensor xx = x.detach().clone().requires_grad_(true);
              const at::Tensor out = adgnn::csr_aggregate(rowptr, col, w, xx, rows, self ? sw : at::Tensor(),
                                                          entries, given_pos ? pos : at::Tensor());
              (out * probe).sum().backward();
              grad[k] = xx.grad();
            }
            EXPECT_TRUE(torch::equal(grad[0], grad[1]));
#ifdef ADGNN_HAVE_CUDA_KERNELS
            const at::Tensor direct = adgnn::kernels::aggregate_backward_x_lists_cuda(
                rowptr, col, adgnn::kernels::transpose_entries(rowptr, col, rows_n), w, probe, rows,
                given_pos ? pos : at::Tensor(), rows_n, self ? sw : at::Tensor(), entries);
            EXPECT_TRUE(torch::equal(direct, grad[0]));
#endif
            at::Tensor x64 = x.cpu().to(torch::kFloat64).requires_grad_(true);
            const at::Tensor out64 = adgnn::csr_aggregate(c.rowptr, c.col, w.cpu().to(torch::kFloat64), x64, c.rows,
                                                          self ? sw.cpu().to(torch::kFloat64) : at::Tensor());
            (out64 * probe.cpu().to(torch::kFloat64)).sum().backward();
            const double tol = dbl ? 1e-12 : 1e-5;
            EXPECT_TRUE(torch::allclose(grad[0].cpu().to(torch::kFloat64), x64.grad(), tol, tol));
            EXPECT_GT(x64.grad().abs().sum(1).eq(0).sum().item<int64_t>(), 0);
          }
        }
      }
    }
  }
}

// A self weight per CSR row (GCN's, read at the listed rows) gives the bits of the same weights
// gathered per output row, through every CUDA path, and float64 on the CPU: forward with and
// without blocked rows; for 203 computed rows the backward by reader lists (with long lists on
// blocks), by the flagged transpose scan (no entry count) and by regrouping; for 2,000 rows (not
// few) the plain scan (all three runs).
TEST(Cuda, SelfWeightsPerRowEqualPerOutputRow) {
  REQUIRE_GPU();
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, 1024, 1023}, 400, 3000, 19);
  const auto d = c10::Device("cuda");
  const at::Tensor rowptr = h.rowptr.to(d), col = h.col.to(d);
  const at::Tensor few = std::get<0>(torch::cat({torch::tensor({0, 1, 2}, torch::kInt64),
                                                 torch::arange(3000, 3200, torch::kInt64)}).sort());
  const at::Tensor many = torch::arange(0, n, 3, torch::kInt64);
  const at::Tensor per_row = torch::rand({n}, torch::kFloat64).to(d);
  const int64_t saved_min = adgnn::kernels::regroup_min_entries();
  for (const bool dbl : {false, true}) {
    const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
    const at::Tensor x = torch::randn({n, 128}, dtype).to(d), w = torch::rand({col.numel()}, dtype).to(d);
    const at::Tensor sw = per_row.to(dtype);
    for (const at::Tensor& rows_cpu : {few, many}) {
      const at::Tensor rows = rows_cpu.to(d);
      const int64_t m = rows.numel();
      const int64_t entries = (h.rowptr.index_select(0, rows_cpu + 1) - h.rowptr.index_select(0, rows_cpu)).sum().item<int64_t>();
      const at::Tensor probe = torch::randn({m, 128}, dtype).to(d);
      at::Tensor x64 = x.cpu().to(torch::kFloat64).requires_grad_(true);
      const at::Tensor out64 = adgnn::csr_aggregate(h.rowptr, h.col, w.cpu().to(torch::kFloat64), x64, rows_cpu,
                                                    sw.cpu().to(torch::kFloat64).index_select(0, rows_cpu));
      (out64 * probe.cpu().to(torch::kFloat64)).sum().backward();
      const double tol = dbl ? 1e-11 : 2e-4;
      // (backward: lists; no entry count: flagged scan; regrouping)
      for (int path = 0; path < 3; ++path) {
        SCOPED_TRACE(std::string(dbl ? "double" : "float") + ", " + std::to_string(m) + " rows, path " +
                     std::to_string(path));
        adgnn::kernels::regroup_min_entries() = path == 2 ? 0 : saved_min;
        at::Tensor out[2], grad[2];
        for (int by_row = 0; by_row < 2; ++by_row) {
          at::Tensor xx = x.detach().clone().requires_grad_(true);
          out[by_row] = adgnn::csr_aggregate(rowptr, col, w, xx, rows, by_row ? sw : sw.index_select(0, rows),
                                             path == 1 ? -1 : entries);
          (out[by_row] * probe).sum().backward();
          grad[by_row] = xx.grad();
        }
        adgnn::kernels::regroup_min_entries() = saved_min;
        EXPECT_TRUE(torch::equal(out[0], out[1]));
        EXPECT_TRUE(torch::equal(grad[0], grad[1])) << (grad[0] - grad[1]).abs().max();
        EXPECT_TRUE(torch::allclose(out[1].cpu().to(torch::kFloat64), out64, tol, tol));
        EXPECT_TRUE(torch::allclose(grad[1].cpu().to(torch::kFloat64), x64.grad(), tol, tol));
      }
    }
  }
}

TEST(Cuda, AggregateIsDeterministicAndEqualsTheCpuKernels) {
  REQUIRE_GPU();
  const auto g = graph(3000, 1);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const at::Tensor x = torch::randn({g.num_nodes, 128});
  const at::Tensor rows = std::get<0>(torch::randperm(g.num_nodes, torch::kInt64).slice(0, 0, 900).sort());
  const at::Tensor probe = torch::randn({900, 128});
  at::Tensor grad[2][2], out[2];
  for (int rep = 0; rep < 2; ++rep) {
    const auto d = c10::Device("cuda");
    at::Tensor xx = x.to(d).requires_grad_(true);
    out[rep] = adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), {}, xx, rows.to(d));
    (out[rep] * probe.to(d)).sum().backward();
    grad[rep][0] = xx.grad().cpu();
  }
  // Same bits twice: no atomics, a fixed summation order (forward and backward).
  EXPECT_TRUE(torch::equal(out[0], out[1]));
  EXPECT_TRUE(torch::equal(grad[0][0], grad[1][0]));
  at::Tensor xc = x.clone().requires_grad_(true);
  const at::Tensor cpu = adgnn::csr_aggregate(t.rowptr, t.col, {}, xc, rows);
  (cpu * probe).sum().backward();
  EXPECT_TRUE(torch::allclose(cpu, out[0].cpu(), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(xc.grad(), grad[0][0], 1e-5, 1e-5));
}

// GCN's weights on one process's symmetric graph: the backward sums with the forward kernel. Values
// and gradients equal the float64 reference with the self-loop term, every row given as undefined
// or as the list of all rows, at widths 128 (vectorised) and 37 (scalar), with the same bits twice.
TEST(Cuda, SelfAdjointBackwardEqualsTheReference) {
  REQUIRE_GPU();
  const auto g = graph(3000, 2);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const auto mg = adgnn::message_graph(t, torch::kFloat64);
  const auto d = c10::Device("cuda");
  const at::Tensor rowptr = mg.rowptr.to(d), col = mg.col.to(d), w = mg.gcn_weight.to(d);
  const at::Tensor self_w = mg.gcn_self_weight;
  EXPECT_TRUE(adgnn::detail::csr_is_self_adjoint(rowptr, col, w, g.num_nodes));
  const at::Tensor all = torch::arange(g.num_nodes, torch::kInt64);
  for (const int64_t F : {int64_t(128), int64_t(37)})
    for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
      SCOPED_TRACE(std::to_string(F) + (dtype == torch::kFloat64 ? " float64" : " float32"));
      const at::Tensor x = torch::randn({g.num_nodes, F}, torch::kFloat64), probe = torch::randn({g.num_nodes, F}, torch::kFloat64);
      Reference ref = reference(mg.rowptr, mg.col, mg.gcn_weight, x, all, probe);
      const at::Tensor ref_out = ref.out + self_w.unsqueeze(1) * x;
      const at::Tensor ref_grad = ref.grad_x + self_w.unsqueeze(1) * probe;
      const double tol = dtype == torch::kFloat64 ? 1e-10 : 1e-4;
      for (const bool rows_given : {false, true}) {
        at::Tensor grads[2];
        for (int rep = 0; rep < 2; ++rep) {
          const at::Tensor xx = x.to(d, dtype).requires_grad_(true);
          const at::Tensor out = adgnn::csr_aggregate(rowptr, col, w.to(dtype), xx, rows_given ? all.to(d) : at::Tensor(),
                                                      self_w.to(d, dtype));
          EXPECT_TRUE(torch::allclose(out.cpu().to(torch::kFloat64), ref_out, tol, tol));
          (out * probe.to(d, dtype)).sum().backward();
          grads[rep] = xx.grad().cpu();
        }
        EXPECT_TRUE(torch::allclose(grads[0].to(torch::kFloat64), ref_grad, tol, tol))
            << rows_given << ": " << (grads[0].to(torch::kFloat64) - ref_grad).abs().max();
        EXPECT_TRUE(torch::equal(grads[0], grads[1]));
      }
    }
}

// Widths: 37 (the scalar kernel; a partial second pass of a warp's lanes), 100 and 128 (float4 /
// double2 vectors: products-scale's features, the hidden width), and 128 starting one element
// past an aligned address (the scalar kernel again), on both devices; 1001 rows, and 20011 (more
// rows than one pass of the kernel's grid, at most 8 blocks per SM, covers: groups stride).
struct DropoutInput {
  at::Tensor cpu, gpu;
};
std::vector<DropoutInput> dropout_inputs(torch::ScalarType dtype) {
  std::vector<DropoutInput> in;
  for (int64_t cols : {37, 100, 128}) {
    const at::Tensor x = torch::randn({1001, cols}, torch::dtype(dtype));
    in.push_back({x, x.cuda()});
  }
  const at::Tensor x = torch::randn({1001, 128}, torch::dtype(dtype));
  const auto misaligned = [&](torch::Device d) {
    return torch::empty({x.numel() + 1}, x.options().device(d)).narrow(0, 1, x.numel()).view(x.sizes()).copy_(x);
  };
  in.push_back({misaligned(torch::kCPU), misaligned(torch::kCUDA)});
  const at::Tensor tall = torch::randn({20011, 128}, torch::dtype(dtype));
  in.push_back({tall, tall.cuda()});
  return in;
}

// max |a - b| <= tol * max |b|, with the numbers in the message.
::testing::AssertionResult close_to_scale(const at::Tensor& a, const at::Tensor& b, double tol) {
  const double diff = (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  if (diff <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max difference " << diff << " > " << tol << " x " << scale;
}

using adgnn::detail::FDeltaPrecision;

// f_delta's logits at every entry of (rowptr, col) and the gradients of z, w1, b1, w2 and b2 (on
// the host) under a fixed probe, on `dev` in `precision`.
struct FDeltaCase {
  at::Tensor rowptr, col, z, w1, b1, w2, b2, probe;
  at::Tensor run(const c10::Device& dev, FDeltaPrecision precision, std::vector<at::Tensor>& grads) const {
    std::vector<at::Tensor> in;
    for (const at::Tensor* v : {&z, &w1, &b1, &w2, &b2}) in.push_back(v->to(dev).clone().requires_grad_(true));
    const at::Tensor logit = adgnn::detail::fdelta_entry_logits(rowptr.to(dev), col.to(dev), in[0], in[1], in[2],
                                                                in[3], in[4], precision);
    (logit * probe.to(dev)).sum().backward();
    grads.clear();
    for (const at::Tensor& v : in) grads.push_back(v.grad().cpu());
    return logit.cpu();
  }
};
FDeltaCase fdelta_case(const at::Tensor& rowptr, const at::Tensor& col, int64_t nodes, int64_t H, bool dbl) {
  const auto dtype = dbl ? torch::kFloat64 : torch::kFloat32;
  torch::manual_seed(H);
  FDeltaCase c;
  c.rowptr = rowptr;
  c.col = col;
  c.z = torch::randn({nodes, H}, dtype);
  // The MLP 2H -> H -> 1 as the model's: the hidden-gradient kernel's vectorised paths (one and
  // two vectors per lane at width 128) and its scalar one (width 7).
  c.w1 = torch::randn({2 * H, H}, dtype) / std::sqrt(double(2 * H));
  c.b1 = torch::randn({H}, dtype);
  c.w2 = torch::randn({H, 1}, dtype) / 4;
  c.b2 = torch::randn({1}, dtype);
  c.probe = torch::randn({col.numel()}, dtype);
  return c;
}

// The GPU against the CPU in fp32 / float64 (tolerance tol), deterministic (the same bits
// twice); then, for float32 at width 128, TF32 and bfloat16 within their tolerances of float32
// yet not equal to it (they did run in that precision), the precision setting left as it was.
void expect_fdelta_gpu_equals_cpu(const FDeltaCase& c, bool dbl, bool low_precision) {
  const auto d = c10::Device("cuda");
  std::vector<at::Tensor> g_cpu, g_gpu;
  const at::Tensor cpu = c.run(c10::Device("cpu"), FDeltaPrecision::kFp32, g_cpu);
  const at::Tensor gpu = c.run(d, FDeltaPrecision::kFp32, g_gpu);
  const double tol = dbl ? 1e-10 : 1e-4;
  EXPECT_TRUE(torch::allclose(gpu, cpu, tol, tol));
  for (size_t i = 0; i < g_cpu.size(); ++i) {
    const double scale = std::max(1.0, g_cpu[i].abs().max().item<double>());
    EXPECT_TRUE(torch::allclose(g_gpu[i], g_cpu[i], tol, tol * scale))
        << "gradient " << i << " (z, w1, b1, w2, b2): " << (g_gpu[i] - g_cpu[i]).abs().max();
  }
  std::vector<at::Tensor> g_again;
  EXPECT_TRUE(torch::equal(c.run(d, FDeltaPrecision::kFp32, g_again), gpu));
  for (size_t i = 0; i < g_gpu.size(); ++i) EXPECT_TRUE(torch::equal(g_again[i], g_gpu[i])) << i;
  if (!low_precision) return;
  const auto before = at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL);
  std::vector<at::Tensor> g_tf;
  const at::Tensor tf = c.run(d, FDeltaPrecision::kTf32, g_tf);
  EXPECT_EQ(at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL), before);
  EXPECT_FALSE(torch::equal(tf, gpu));
  EXPECT_TRUE(torch::allclose(tf, gpu, 2e-2, 2e-2)) << (tf - gpu).abs().max();
  EXPECT_TRUE(torch::allclose(g_tf[1], g_gpu[1], 2e-2, 2e-2 * g_gpu[1].abs().max().item<double>()))
      << (g_tf[1] - g_gpu[1]).abs().max();
  // bfloat16 (8 significant bits) per pair: logits within 2% of float32's largest; float32 out;
  // deterministic. The gradients only within 15% of each one's largest entry (measured: 3-4%, on
  // an H200): rounding the hidden layer flips the relu of its entries near zero, and a random
  // probe's gradient sums over thousands of pairs cancel to a fraction of their terms, so those
  // flips weigh more than the rounding. A wrong index or operand misses by ~100%; the kernels'
  // bfloat16 arithmetic is checked exactly by Cuda.FDeltaBf16KernelsEqualTheirDefinitions.
  std::vector<at::Tensor> g_bf, g_bf_again;
  const at::Tensor bf = c.run(d, FDeltaPrecision::kBf16, g_bf);
  EXPECT_EQ(bf.scalar_type(), torch::kFloat32);
  EXPECT_EQ(at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL), before);
  EXPECT_FALSE(torch::equal(bf, gpu));
  EXPECT_TRUE(close_to_scale(bf, gpu, 2e-2));
  for (size_t i = 0; i < g_bf.size(); ++i) {
    EXPECT_EQ(g_bf[i].scalar_type(), torch::kFloat32);
    EXPECT_TRUE(close_to_scale(g_bf[i], g_gpu[i], 0.15)) << "bf16 gradient " << i << " (z, w1, b1, w2, b2)";
  }
  EXPECT_TRUE(torch::equal(c.run(d, FDeltaPrecision::kBf16, g_bf_again), bf));
  for (size_t i = 0; i < g_bf.size(); ++i) EXPECT_TRUE(torch::equal(g_bf_again[i], g_bf[i])) << i;
}

// f_delta per mirrored pair on the GPU: the pair kernels (width 128: vectorised; 7: scalar;
// float32 and float64) equal the CPU's, logits and the gradients of z and the four parameters (the
// fused output layer, hidden-gradient and per-node input-gradient kernels), with the same bits
// twice; TF32 and bfloat16 stay close to float32.
TEST(Cuda, FDeltaEqualsTheCpuAndLowPrecisionStaysClose) {
  REQUIRE_GPU();
  const auto g = graph(3000, 4);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  for (const int64_t H : {int64_t(128), int64_t(7)}) {
    for (const bool dbl : {false, true}) {
      SCOPED_TRACE("width " + std::to_string(H) + (dbl ? " float64" : " float32"));
      expect_fdelta_gpu_equals_cpu(fdelta_case(t.rowptr, t.col, g.num_nodes, H, dbl), dbl, !dbl && H == 128);
    }
  }
}

// The same where nodes have kPairHubMin or more pairs (the input gradient's block-per-node path):
// a directed CSR (most entries their own pair) whose row 0 has 5000 entries, rows 1 and 2 about
// kPairHubMin (around the threshold once their transposed pairs are counted), and whose column 7
// is read by 5000 rows (its pairs through the transpose).
TEST(Cuda, FDeltaHubsEqualTheCpu) {
  REQUIRE_GPU();
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {5000, adgnn::kernels::kPairHubMin, adgnn::kernels::kPairHubMin - 2}, 5, 5000, 4);
  const at::Tensor &rowptr = h.rowptr, &col = h.col;
  for (const int64_t H : {int64_t(128), int64_t(7)}) {
    for (const bool dbl : {false, true}) {
      SCOPED_TRACE("width " + std::to_string(H) + (dbl ? " float64" : " float32"));
      expect_fdelta_gpu_equals_cpu(fdelta_case(rowptr, col, n, H, dbl), dbl, false);
    }
  }
}

// The bfloat16 storage kernels against their definitions, on a CSR with two hubs (row 0's 3000
// entries, column 7 read by 3000 rows; every entry a pair; both per-node gradient paths): the
// input is float32's rounded to bfloat16 (the same bits), the output layer and the hidden
// gradient's sums equal float64's over the stored values (1e-5), the hidden gradient is
// float32's g w2 rounded (the same bits), and z's gradient from a bfloat16 input gradient equals
// the CPU's in float64 over its values.
TEST(Cuda, FDeltaBf16KernelsEqualTheirDefinitions) {
  REQUIRE_GPU();
#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
  const int64_t n = 6000;
  const HubCsr h = hub_csr(n, {3000, 5, 4}, 5, 3000, 5);
  const auto d = c10::Device("cuda");
  const at::Tensor &rowptr = h.rowptr, &col = h.col;
  const at::Tensor row = torch::repeat_interleave(rowptr.slice(0, 1) - rowptr.slice(0, 0, -1)).to(torch::kInt32);
  const int64_t P = col.numel();
  adgnn::kernels::PairGradIndex ix;
  ix.rowptr = rowptr;
  ix.col = col;
  const adgnn::kernels::Transposed t = adgnn::kernels::transpose_entries(rowptr, col, n);
  ix.t_rowptr = t.rowptr;
  ix.t_pair = t.entry;
  ix.t_other = t.row;
  adgnn::kernels::PairGradIndex ixd{ix.rowptr.to(d), ix.col.to(d), ix.t_rowptr.to(d), ix.t_pair.to(d), ix.t_other.to(d), {}};
  const at::Tensor per_node = (t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1)) + (rowptr.slice(0, 1) - rowptr.slice(0, 0, -1));
  ixd.long_nodes = (per_node >= adgnn::kernels::kPairHubMin).nonzero().squeeze(1).to(d);
  ASSERT_GE(ixd.long_nodes.numel(), 2);  // rows 0 and 7 (and any other that reaches kPairHubMin)
  for (const int64_t H : {int64_t(128), int64_t(7)}) {
    SCOPED_TRACE("width " + std::to_string(H));
    const at::Tensor z = torch::randn({n, H}).to(d);
    const at::Tensor x = adgnn::kernels::pair_features_cuda(row.to(d), col.to(d), z, torch::kBFloat16);
    ASSERT_EQ(x.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(x, adgnn::kernels::pair_features_cuda(row.to(d), col.to(d), z, torch::kFloat32)
                                    .to(torch::kBFloat16)));
    const at::Tensor hidden = torch::randn({P, H}).to(d).to(torch::kBFloat16);
    const at::Tensor w2 = torch::randn({H}).to(d), b2 = torch::randn({1}).to(d), g = torch::randn({P}).to(d);
    const at::Tensor h64 = hidden.to(torch::kFloat64), relu64 = h64.clamp_min(0);
    const at::Tensor logit = adgnn::kernels::fdelta_relu_dot_cuda(hidden, w2, b2);
    EXPECT_EQ(logit.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::allclose(logit.to(torch::kFloat64), relu64.mv(w2.to(torch::kFloat64)) + b2.to(torch::kFloat64),
                                1e-5, 1e-5));
    // Rows are taken R at a time: a count that is not a multiple, each row's sum unchanged;
    // and more rows than one pass of the grid covers (the loop's later iterations).
    for (const int64_t cut : {1, 2, 3, 5})
      EXPECT_TRUE(torch::equal(adgnn::kernels::fdelta_relu_dot_cuda(hidden.narrow(0, 0, P - cut).contiguous(), w2, b2),
                               logit.narrow(0, 0, P - cut)));
    const at::Tensor many = torch::randn({300001, H}).to(d).to(torch::kBFloat16);
    EXPECT_TRUE(torch::allclose(adgnn::kernels::fdelta_relu_dot_cuda(many, w2, b2).to(torch::kFloat64),
                                many.to(torch::kFloat64).clamp_min(0).mv(w2.to(torch::kFloat64)) + b2.to(torch::kFloat64),
                                1e-5, 1e-5));
    const adgnn::kernels::FDeltaHiddenGrad hg = adgnn::kernels::fdelta_hidden_grad_cuda(g, w2, hidden);
    ASSERT_EQ(hg.out.scalar_type(), torch::kBFloat16);
    const at::Tensor out32 = (g.unsqueeze(1) * w2.unsqueeze(0)) * (hidden.to(torch::kFloat32) > 0);
    EXPECT_TRUE(torch::equal(hg.out, out32.to(torch::kBFloat16)));
    EXPECT_TRUE(torch::allclose(hg.b1.to(torch::kFloat64), out32.to(torch::kFloat64).sum(0), 1e-5, 1e-4));
    EXPECT_TRUE(torch::allclose(hg.w2.to(torch::kFloat64), relu64.t().mv(g.to(torch::kFloat64)), 1e-5, 1e-4));
    const at::Tensor gx = torch::randn({P, 2 * H}).to(d).to(torch::kBFloat16);
    const at::Tensor gz = adgnn::kernels::pair_grad_sums_cuda(ixd, z, gx);
    ASSERT_EQ(gz.scalar_type(), torch::kFloat32);
    const at::Tensor ref = adgnn::kernels::pair_grad_sums_cpu(ix, z.cpu().to(torch::kFloat64), gx.cpu().to(torch::kFloat64));
    EXPECT_TRUE(close_to_scale(gz.cpu(), ref, 1e-5));
  }
#endif
}


// AD's straight-through band term on the GPU (one kernel for its backward) against the CPU's
// ATen formula: the gradients of next, eps and tau, attached to `next` and as a separate term,
// with and without eps's gradient, float32 and float64, widths 128 (the model's) and 7, and band
// rows from a few to 20,000 (layer 1's band holds most nodes).
TEST(Cuda, BandTermGradientsEqualTheCpu) {
  REQUIRE_GPU();
  const auto d = c10::Device("cuda");
  for (const bool dbl : {false, true}) {
    for (const int64_t W : {int64_t(128), int64_t(7)}) {
      // Band rows 6 and 2,000 (a grid of at most 64 blocks whose last block sums tau's gradient;
      // at 2,000 its warps take several rows each) and 20,000 (a warp per row, ATen's sum).
      for (const int64_t n : {int64_t(9), int64_t(3000), int64_t(30000)}) {
        SCOPED_TRACE(std::string(dbl ? "float64" : "float32") + " width " + std::to_string(W) + " rows " +
                     std::to_string(n));
        const auto dt = dbl ? torch::kFloat64 : torch::kFloat32;
        torch::manual_seed(W + n);
        const at::Tensor next0 = torch::randn({n, W}, dt), eps0 = torch::rand({n}, dt), tau0 = torch::rand({}, dt) / 4;
        const at::Tensor band = std::get<0>(torch::randperm(n, torch::kInt64).slice(0, 0, n * 2 / 3).sort());
        const at::Tensor diff = torch::randn({band.numel(), W}, dt), probe = torch::randn({n, W}, dt);
        const double kappa = 0.05;
        for (const bool eps_grad : {true, false}) {
          for (const bool as_term : {false, true}) {
            std::vector<at::Tensor> grads[2];
            for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
              const c10::Device dev = on_gpu ? d : c10::Device("cpu");
              // Fresh leaves (to() of a CPU tensor to the CPU is the tensor itself).
              const at::Tensor next = next0.to(dev).clone().requires_grad_(true);
              const at::Tensor tau = tau0.to(dev).clone().requires_grad_(true);
              const at::Tensor eps = eps0.to(dev).clone().requires_grad_(eps_grad);
              const at::Tensor out =
                  as_term ? next.index_add(0, band.to(dev),
                                           adgnn::detail::band_straight_through_term(eps, tau, band.to(dev), diff.to(dev), kappa))
                          : adgnn::detail::band_straight_through(next, eps, tau, band.to(dev), diff.to(dev), kappa);
              (out * probe.to(dev)).sum().backward();
              grads[on_gpu] = {next.grad().cpu(), tau.grad().cpu(), eps_grad ? eps.grad().cpu() : torch::zeros({1}, dt)};
            }
            const double tol = dbl ? 1e-10 : 1e-4;
            for (size_t i = 0; i < 3; ++i)
              EXPECT_TRUE(close_to_scale(grads[1][i], grads[0][i], tol))
                  << (as_term ? "term " : "attached ") << (eps_grad ? "eps grad, " : "") << "gradient " << i
                  << " (next, tau, eps)";
            EXPECT_GT(grads[1][1].abs().item<double>(), 0.0);
          }
        }
      }
    }
  }
}

#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
// The grids that finish their sums in their last block count the blocks in per-stream counters
// that the last block sets back to zero, instead of a memset before each launch: the same calls
// many times in a row, interleaved (column sums, band term, small GEMMs' weight gradients over
// several row chunks, one of them with more tiles than the first counter buffer holds), on the
// default stream and on another, give the same bits every time and leave every counter at zero;
// the first results equal float64.
TEST(Cuda, LastBlockCountersResetThemselves) {
  REQUIRE_GPU();
  torch::manual_seed(5);
  const auto o = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  const at::Tensor x = torch::randn({37, 128}, o);  // few rows: the last block finishes the sum
  const at::Tensor a = torch::randn({3000, 64}, o), g = torch::randn({3000, 128}, o);  // 12 chunks
  const at::Tensor a2 = torch::randn({600, 640}, o), g2 = torch::randn({600, 512}, o);  // 80 tiles
  const at::Tensor eps = torch::randn({500}, o), tau = torch::zeros({}, o);
  const at::Tensor band = torch::arange(0, 500, 3, o.dtype(torch::kInt64)), grad = torch::randn({500, 16}, o);
  const at::Tensor diff = torch::randn({band.numel(), 16}, o);
  auto run = [&] {
    return std::array<at::Tensor, 4>{
        adgnn::kernels::column_sums_cuda(x), adgnn::kernels::small_linear_grad_w_cuda(a, g),
        adgnn::kernels::band_term_grads_cuda(eps, tau, band, grad, diff, 0.5, true, false).tau,
        adgnn::kernels::small_linear_grad_w_cuda(a2, g2)};
  };
  const std::array<at::Tensor, 4> first = run();
  EXPECT_EQ(adgnn::kernels::nonzero_stream_counters(), 0);
  auto f64 = [](const at::Tensor& t) { return t.cpu().to(torch::kFloat64); };
  EXPECT_TRUE(torch::allclose(f64(first[0]), f64(x).sum(0), 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(f64(first[1]), f64(a).t().mm(f64(g)), 1e-3, 1e-3));
  EXPECT_TRUE(torch::allclose(f64(first[3]), f64(a2).t().mm(f64(g2)), 1e-3, 1e-3));
  for (int stream = 0; stream < 3; ++stream) {
    // default, a pool stream, the default again
    const c10::cuda::CUDAStream s =
        stream == 1 ? c10::cuda::getStreamFromPool() : c10::cuda::getDefaultCUDAStream();
    c10::cuda::CUDAStreamGuard guard(s);
    for (int rep = 0; rep < 5; ++rep) {
      const std::array<at::Tensor, 4> again = run();
      for (size_t k = 0; k < again.size(); ++k)
        EXPECT_TRUE(torch::equal(again[k], first[k])) << "stream " << stream << ", call " << rep << ", kernel " << k;
    }
    EXPECT_EQ(adgnn::kernels::nonzero_stream_counters(), 0) << "stream " << stream;
  }
}
#endif

// Column sums (the bias gradients of linear layers): the row-parallel kernel's vectorised paths
// (one, two and four vectors per lane), its scalar ones (widths 47, 7) and ATen's for wider rows
// equal a float64 sum on the host, with the same bits on a second call, also through a ReLU
// (masked); up to 8,192 rows the kernel's last block finishes the sum (8,000: a full grid of 64
// blocks), above it ATen's sum does; linear()'s gradients equal addmm's, linear_relu()'s
// relu(addmm)'s.
TEST(Cuda, ColumnSumsAndLinearEqualATen) {
  REQUIRE_GPU();
  torch::manual_seed(2);
  for (const int64_t C : {int64_t(128), int64_t(256), int64_t(512), int64_t(40), int64_t(47), int64_t(7),
                          int64_t(2000)})
    for (const int64_t rows : {int64_t(0), int64_t(1), int64_t(37), int64_t(8000), int64_t(8193), int64_t(70001)})
      for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(C) + (dtype == torch::kFloat64 ? " float64" : ""));
        const at::Tensor x = torch::randn({rows, C}, torch::dtype(dtype));
        const at::Tensor ref = x.to(torch::kFloat64).sum(0);
        const at::Tensor got = adgnn::detail::column_sums(x.cuda());
        ASSERT_EQ(got.sizes(), ref.sizes());
        const double tol = dtype == torch::kFloat64 ? 1e-10 : 2e-3;
        EXPECT_TRUE(torch::allclose(got.cpu().to(torch::kFloat64), ref, tol, tol)) << (got.cpu() - ref).abs().max();
        EXPECT_TRUE(torch::equal(adgnn::detail::column_sums(x.cuda()), got));
        // Through a ReLU: the masked gradient and its column sums in one pass.
        const at::Tensor out = torch::relu(torch::randn({rows, C}, torch::dtype(dtype)));
        const at::Tensor masked_ref = at::threshold_backward(x, out, 0);
        const auto [masked, msums] = adgnn::detail::relu_grad_column_sums(x.cuda(), out.cuda());
        EXPECT_TRUE(torch::equal(masked.cpu(), masked_ref));
        EXPECT_TRUE(torch::allclose(msums.cpu().to(torch::kFloat64), masked_ref.to(torch::kFloat64).sum(0), tol, tol));
      }
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    const auto o = torch::dtype(dtype).device(torch::kCUDA);
    const at::Tensor x0 = torch::randn({5003, 64}, o), w0 = torch::randn({64, 128}, o), b0 = torch::randn({128}, o);
    const at::Tensor probe = torch::randn({5003, 128}, o);
    std::vector<at::Tensor> grads[2];
    at::Tensor out[2];
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      out[ours] = ours ? adgnn::detail::linear(x, w, b) : torch::addmm(b, x, w);
      (out[ours] * probe).sum().backward();
      grads[ours] = {x.grad(), w.grad(), b.grad()};
    }
    const double tol = dtype == torch::kFloat64 ? 1e-10 : 1e-4;
    EXPECT_TRUE(torch::equal(out[0], out[1]));
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], tol, tol * 100)) << i << (grads[1][i] - grads[0][i]).abs().max();
    // linear_relu (cuBLASLt's ReLU epilogue; the fused masked column sums) against relu(addmm).
    for (int ours = 0; ours < 2; ++ours) {
      const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                       b = b0.clone().requires_grad_(true);
      out[ours] = ours ? adgnn::detail::linear_relu(x, w, b) : torch::relu(torch::addmm(b, x, w));
      (out[ours] * probe).sum().backward();
      grads[ours] = {x.grad(), w.grad(), b.grad()};
    }
    EXPECT_TRUE(torch::allclose(out[1], out[0], tol, tol)) << (out[1] - out[0]).abs().max();
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], tol, tol * 100)) << "relu " << i << (grads[1][i] - grads[0][i]).abs().max();
  }
}

TEST(Cuda, DropoutMasksEqualTheCpuOnes) {
  REQUIRE_GPU();
  const at::Tensor h = torch::ones({1001, 37});
  const at::Tensor ids1001 = torch::arange(5000, 6001, torch::kInt64);
  EXPECT_TRUE(torch::equal(adgnn::dropout_rows(h, ids1001, 0.3, 11, 7, 2),
                           adgnn::dropout_rows(h.cuda(), ids1001.cuda(), 0.3, 11, 7, 2).cpu()));
  // Values and gradients: the same mask applied in backward, float and double, ids on the host.
  for (auto dtype : {torch::kFloat32, torch::kFloat64})
    for (const DropoutInput& in : dropout_inputs(dtype)) {
      const at::Tensor& x = in.cpu;
      const at::Tensor ids = torch::arange(5000, 5000 + x.size(0), torch::kInt64);
      const at::Tensor probe = torch::randn(x.sizes(), torch::dtype(dtype));
      at::Tensor xc = in.cpu.detach().requires_grad_(true), xg = in.gpu.detach().requires_grad_(true);
      const at::Tensor oc = adgnn::dropout_rows(xc, ids, 0.3, 11, 7, 2);
      const at::Tensor og = adgnn::dropout_rows(xg, ids, 0.3, 11, 7, 2);
      (oc * probe).sum().backward();
      (og * probe.cuda()).sum().backward();
      EXPECT_TRUE(torch::equal(oc.detach(), og.detach().cpu())) << dtype << " width " << x.size(1);
      EXPECT_TRUE(torch::equal(xc.grad(), xg.grad().cpu())) << dtype << " width " << x.size(1);
      EXPECT_GT((oc == 0).sum().item<int64_t>(), 0);
    }
}

// The flat dropout kernel (unflagged inputs of rows of >= 8 vectors) against the CPU, bit for bit
// (the same masks and scale): plain and accumulating (dropout_rows_and_input's backward without
// flags), float and double, rows of 8 vectors (the most rows a chunk spans), 25 (products-scale's
// 100 features), 32 and 65, with partial chunks at the end.
TEST(Cuda, FlatDropoutEqualsTheCpu) {
  REQUIRE_GPU();
  for (auto dtype : {torch::kFloat32, torch::kFloat64})
    for (int64_t cols : {32, 100, 128, 260})
      for (int64_t rows : {int64_t(1), int64_t(37), int64_t(4099)}) {
        SCOPED_TRACE(::testing::Message() << dtype << " " << rows << " x " << cols);
        const at::Tensor x = torch::randn({rows, cols}, torch::dtype(dtype).device(torch::kCUDA));
        const at::Tensor ids = torch::randperm(3 * rows, torch::kInt64).slice(0, 0, rows).cuda();
        const at::Tensor p1 = torch::randn_like(x), p2 = torch::randn_like(x);
        at::Tensor out[2], grad[2];
        for (int dev = 0; dev < 2; ++dev) {
          auto on = [&](const at::Tensor& t) { return dev ? t : t.cpu(); };
          at::Tensor h = on(x).detach().requires_grad_(true);
          auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, on(ids), 0.4, 5, 3, 1);
          ((dropped * on(p1)).sum() + (kept * on(p2)).sum()).backward();
          out[dev] = dropped.detach().cpu();
          grad[dev] = h.grad().cpu();
        }
        EXPECT_TRUE(torch::equal(out[0], out[1]));
        EXPECT_TRUE(torch::equal(grad[0], grad[1]));
        const double kept_share = (out[1] != 0).to(torch::kFloat64).mean().item<double>();
        if (rows * cols > 1000) {
          EXPECT_NEAR(kept_share, 0.6, 0.05);
        }
      }
}

// Row flags on the GPU: flagged rows and every gradient equal the CPU's (unflagged rows: the
// forward leaves them unset, the gradient is zero).
TEST(Cuda, DropoutRowFlagsEqualTheCpu) {
  REQUIRE_GPU();
  for (const DropoutInput& in : dropout_inputs(torch::kFloat32)) {
    const at::Tensor& x = in.cpu;
    const at::Tensor ids = torch::arange(100, 100 + x.size(0), torch::kInt64);
    const at::Tensor flags = (torch::arange(x.size(0)) % 7 < 2).to(torch::kUInt8);
    const at::Tensor flagged = flags.to(torch::kBool);
    const at::Tensor probe = torch::randn(x.sizes()) * flagged.unsqueeze(1);
    at::Tensor xc = in.cpu.detach().requires_grad_(true), xg = in.gpu.detach().requires_grad_(true);
    const at::Tensor oc = adgnn::dropout_rows(xc, ids, 0.3, 11, 7, 2, flags);
    const at::Tensor og = adgnn::dropout_rows(xg, ids.cuda(), 0.3, 11, 7, 2, flags.cuda());
    EXPECT_TRUE(torch::equal(oc.detach().index({flagged}), og.detach().cpu().index({flagged}))) << x.size(1);
    (oc.index({flagged}) * probe.index({flagged})).sum().backward();
    (og.index({flagged.cuda()}) * probe.cuda().index({flagged.cuda()})).sum().backward();
    EXPECT_TRUE(torch::equal(xc.grad(), xg.grad().cpu())) << x.size(1);
    EXPECT_EQ(xg.grad().cpu().index({~flagged}).abs().sum().item<float>(), 0.0f) << x.size(1);
  }
}

// The dropout that passes its input on (AD's frozen rows), on the GPU: the gradient, added into
// the input's own in place over the flagged rows, equals the CPU's bit for bit; dense and sparse
// flags (most warps with no flagged row), float and double.
TEST(Cuda, DropoutAndInputEqualsTheCpu) {
  REQUIRE_GPU();
  for (auto dtype : {torch::kFloat32, torch::kFloat64})
    for (const DropoutInput& in : dropout_inputs(dtype))
      for (const int64_t every : {int64_t(7), int64_t(97)}) {
        const at::Tensor& x = in.cpu;
        const at::Tensor ids = torch::arange(100, 100 + x.size(0), torch::kInt64);
        const at::Tensor flags = (torch::arange(x.size(0)) % every < 2).to(torch::kUInt8);
        const at::Tensor flagged = flags.to(torch::kBool).unsqueeze(1);
        const at::Tensor p1 = torch::randn(x.sizes(), torch::dtype(dtype)), p2 = torch::randn(x.sizes(), torch::dtype(dtype));
        at::Tensor grad[2];
        for (int dev = 0; dev < 2; ++dev) {
          auto on = [&](const at::Tensor& t) { return dev ? t.cuda() : t; };
          at::Tensor h = (dev ? in.gpu : in.cpu).detach().requires_grad_(true);
          auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, on(ids), 0.3, 11, 7, 2, on(flags));
          (torch::where(on(flagged), dropped * on(p1), 0).sum() + (kept * on(p2)).sum()).backward();
          grad[dev] = h.grad().cpu();
        }
        EXPECT_TRUE(torch::equal(grad[0], grad[1])) << dtype << " width " << x.size(1) << " every " << every;
        EXPECT_TRUE(torch::equal(grad[1].index({~flagged.squeeze(1)}), p2.index({~flagged.squeeze(1)})));
      }
}

// On the GPU too (its own probe of the engine's hand-over: backward runs on a device thread), a
// gradient that AddBackward hands to two inputs is copied, not changed in place.
TEST(Cuda, DropoutAndInputLeavesASharedGradientAlone) {
  REQUIRE_GPU();
  const at::Tensor ids = torch::arange(3, 43, torch::kInt64).cuda();
  const at::Tensor flags = (torch::arange(40) % 3 == 1).to(torch::kUInt8).cuda();
  const at::Tensor flagged = flags.to(torch::kBool).unsqueeze(1);
  const at::Tensor h = torch::rand({40, 8}).cuda().requires_grad_(true);
  const at::Tensor o = torch::zeros({40, 8}).cuda().requires_grad_(true);
  const at::Tensor other = o * 1, probe = torch::randn({40, 8}).cuda();  // (its backward runs last)
  auto [dropped, kept] = adgnn::dropout_rows_and_input(h * 1, ids, 0.4, 8, 1, 2, flags);
  (torch::where(flagged, dropped, 0).sum() + ((kept + other) * probe).sum()).backward();
  EXPECT_TRUE(torch::equal(o.grad(), probe));
  const at::Tensor mask = adgnn::dropout_rows(torch::ones({40, 8}).cuda(), ids, 0.4, 8, 1, 2);
  EXPECT_TRUE(torch::allclose(h.grad(), probe + torch::where(flagged, mask, 0)));
}

// The rows a few computed rows read, flagged on the GPU: the CPU's flags, on a power-law graph
// (hub rows of more entries than a warp's lanes), into flags that already hold some rows.
TEST(Cuda, MarkRowsReadEqualsTheCpu) {
  REQUIRE_GPU();
  const auto t = adgnn::to_tensors(graph(3000, 5), torch::kCPU);
  const at::Tensor rows = std::get<0>(torch::_unique(torch::randint(0, 3000, {40}, torch::kInt64)));
  at::Tensor cpu = (torch::arange(3000) % 97 == 0).to(torch::kUInt8);
  at::Tensor gpu = cpu.cuda();
  adgnn::kernels::mark_rows_read(t.rowptr, t.col, rows, cpu);
  adgnn::kernels::mark_rows_read(t.rowptr.cuda(), t.col.cuda(), rows.cuda(), gpu);
  EXPECT_TRUE(torch::equal(cpu, gpu.cpu()));
  EXPECT_GT(cpu.sum().item<int64_t>(), 40 + 3000 / 97);
}

// The few-row backward's regrouping by source: regroup_by_source_cuda's kernels give the
// ATen operations' tensors exactly: hub rows and a column read by 300 rows (long segments), rows
// in no particular order with an empty one among them, columns past the destination rows (a
// rank's halo), more rows than one pass of the kernels' grids, a power of two of source rows
// with the last one read (the sort's top bit), a graph of one source row, and rows of no entries
// at all. A wrong entry count writes nothing past its buffers: too low, the segments count the
// entries numbered; too high, the true entries come first, grouped right. Then csr_aggregate's
// backward through the kernels against float64 on the CPU.
TEST(Cuda, RegroupKernelEqualsTheATenRegrouping) {
  REQUIRE_GPU();
#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
  namespace k = adgnn::kernels;
  const auto d = c10::Device("cuda");
  HubCsr h = hub_csr(2000, {1500, 40, 0}, 30, 300, 11);
  const int64_t n = h.rowptr.numel() - 1;
  // Columns of every 5th entry moved past the rows: 2000 + (c % 700), a halo of 700 rows.
  const at::Tensor entry = torch::arange(h.col.numel(), torch::kInt64);
  at::Tensor col = torch::where(entry % 5 == 0, h.col.to(torch::kInt64) % 700 + n, h.col.to(torch::kInt64))
                       .to(torch::kInt32);
  const int64_t num_src = n + 700;
  auto entries_of = [&](const at::Tensor& rows) {
    return (h.rowptr.index_select(0, rows + 1) - h.rowptr.index_select(0, rows)).sum().item<int64_t>();
  };
  auto same = [&](const at::Tensor& rowptr, const at::Tensor& c, const at::Tensor& rows, int64_t src) {
    const int64_t entries = (rowptr.index_select(0, rows + 1) - rowptr.index_select(0, rows)).sum().item<int64_t>();
    const k::RegroupedEntries want = k::regroup_by_source(rowptr, c, rows, src, entries);
    const k::RegroupedEntries got = k::regroup_by_source_cuda(rowptr.to(d), c.to(d), rows.to(d), src, entries);
    EXPECT_TRUE(torch::equal(got.ptr.cpu(), want.ptr));
    EXPECT_TRUE(torch::equal(got.idx.cpu(), want.idx));
    EXPECT_TRUE(torch::equal(got.eid.cpu(), want.eid));
    return entries;
  };
  torch::manual_seed(3);
  const at::Tensor some = torch::randperm(n, torch::kInt64).slice(0, 0, 400);  // not sorted
  const at::Tensor with_hubs = torch::cat({torch::tensor({2, 0, 1}, torch::kInt64), some, torch::arange(3, 303)});
  {
    SCOPED_TRACE("rows with hubs, an empty row and the column read by 300 rows");
    const at::Tensor rows = std::get<0>(torch::_unique(with_hubs)).flip(0);  // distinct, descending
    EXPECT_GT(same(h.rowptr, col, rows, num_src), 3000);
  }
  {
    SCOPED_TRACE("rows in random order");
    EXPECT_GT(same(h.rowptr, col, some, num_src), 0);
  }
  {
    SCOPED_TRACE("no entries");
    EXPECT_EQ(same(h.rowptr, col, torch::tensor({2}, torch::kInt64), num_src), 0);
    EXPECT_EQ(same(h.rowptr, col, torch::empty({0}, torch::kInt64), num_src), 0);
  }
  {
    SCOPED_TRACE("60,000 rows");
    const auto big = adgnn::to_tensors(graph(60000, 9), torch::kCPU);
    const at::Tensor rows = torch::randperm(60000, torch::kInt64).slice(0, 0, 50000);
    EXPECT_GT(same(big.rowptr, big.col, rows, 60000), 200000);
  }
  {
    SCOPED_TRACE("2048 source rows, the last one read");
    const at::Tensor rowptr = torch::tensor({0, 3, 5, 6}, torch::kInt64);
    const at::Tensor c = torch::tensor({2047, 0, 2047, 5, 2047, 1024}, torch::kInt32);
    EXPECT_EQ(same(rowptr, c, torch::tensor({1, 0, 2}, torch::kInt64), 2048), 6);
  }
  {
    SCOPED_TRACE("one source row");
    const at::Tensor rowptr = torch::tensor({0, 3, 3, 5}, torch::kInt64);
    EXPECT_EQ(same(rowptr, torch::zeros({5}, torch::kInt32), torch::tensor({2, 0}, torch::kInt64), 1), 5);
  }
  {
    SCOPED_TRACE("a wrong entry count");
    const int64_t entries = entries_of(some);
    const k::RegroupedEntries want = k::regroup_by_source(h.rowptr, col, some, num_src, entries);
    for (const int64_t wrong : {entries - 7, entries + 7}) {
      const k::RegroupedEntries got = k::regroup_by_source_cuda(h.rowptr.to(d), col.to(d), some.to(d), num_src, wrong);
      EXPECT_EQ(got.ptr[num_src].item<int64_t>(), std::min(entries, wrong));
      EXPECT_EQ(got.idx.numel(), wrong);
      EXPECT_TRUE(got.idx.ge(0).all().item<bool>() && got.idx.lt(some.numel()).all().item<bool>());
      EXPECT_TRUE(got.eid.ge(0).all().item<bool>() && got.eid.lt(col.numel()).all().item<bool>());
      if (wrong > entries) {
        EXPECT_TRUE(torch::equal(got.ptr.cpu(), want.ptr));
        EXPECT_TRUE(torch::equal(got.idx.slice(0, 0, entries).cpu(), want.idx));
        EXPECT_TRUE(torch::equal(got.eid.slice(0, 0, entries).cpu(), want.eid));
      }
    }
  }
  // The backward through csr_aggregate (regroup_min_entries 0: this small graph regroups) against
  // float64 on the CPU, float32 and float64, vectorised and scalar widths.
  const int64_t saved_min = k::regroup_min_entries();
  k::regroup_min_entries() = 0;
  const at::Tensor rows = std::get<0>(torch::_unique(some.slice(0, 0, 200)));
  const int64_t entries = entries_of(rows);
  const at::Tensor w = torch::rand({col.numel()}, torch::kFloat64);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    for (const int64_t width : {33, 128}) {
      const at::Tensor x = torch::randn({num_src, width}, torch::kFloat64);
      const at::Tensor probe = torch::randn({rows.numel(), width}, torch::kFloat64);
      at::Tensor xx = x.to(d, dtype).detach().requires_grad_(true);
      const at::Tensor out = adgnn::csr_aggregate(h.rowptr.to(d), col.to(d), w.to(d, dtype), xx, rows.to(d), {}, entries);
      (out * probe.to(d, dtype)).sum().backward();
      const at::Tensor grad = xx.grad().cpu().to(torch::kFloat64);
      at::Tensor x64 = x.clone().requires_grad_(true);
      (adgnn::csr_aggregate(h.rowptr, col, w, x64, rows, {}, entries) * probe).sum().backward();
      SCOPED_TRACE("width " + std::to_string(width) + (dtype == torch::kFloat64 ? " float64" : " float32"));
      const double tol = dtype == torch::kFloat64 ? 1e-12 : 1e-4;
      EXPECT_TRUE(torch::allclose(grad, x64.grad(), tol, tol)) << (grad - x64.grad()).abs().max();
      EXPECT_GT(grad.abs().sum().item<double>(), 0.0);
    }
  }
  k::regroup_min_entries() = saved_min;
#endif
}

// aggregate_entries_cuda's segment sums (a tile of 32 rows per warp) against float64 on the CPU.
// Segments from regroup_by_source over 4 x 5003 + 5 source rows of which the computed rows read
// at most the first 5003 (most segments empty, and a count that is not a multiple of 32), with a
// source read by 300 rows (a long segment); widths on the vector path (128; 256: more vectors
// than lanes) and off it (33, 47: scalar), fewer lanes than a warp (3: several rows per warp at
// once), float32 and float64, with and without weights; 400,003 source rows (more tiles than one
// pass of the grid); and no entries, an input of no rows, no source rows (zeros).
TEST(Cuda, SegmentTilesMatchTheCpuReference) {
  REQUIRE_GPU();
#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
  namespace k = adgnn::kernels;
  const auto d = c10::Device("cuda");
  const HubCsr h = hub_csr(5003, {2000, 40, 0}, 30, 300, 17);
  const int64_t n = h.rowptr.numel() - 1;
  torch::manual_seed(5);
  const at::Tensor rows = std::get<0>(torch::_unique(torch::cat({torch::randperm(n, torch::kInt64).slice(0, 0, 250),
                                                                 torch::arange(3, 303)})));
  const int64_t entries = (h.rowptr.index_select(0, rows + 1) - h.rowptr.index_select(0, rows)).sum().item<int64_t>();
  const at::Tensor w = torch::rand({h.col.numel()}, torch::kFloat64);
  auto sum = [&](const k::RegroupedEntries& seg, const at::Tensor& g, const at::Tensor& weights) {
    return k::aggregate_entries_cuda(seg.ptr.to(d), seg.idx.to(d), seg.eid.to(d), weights, g).cpu();
  };
  for (const int64_t num_src : {4 * n + 5, int64_t(400003)}) {
    const k::RegroupedEntries r = k::regroup_by_source(h.rowptr, h.col, rows, num_src, entries);
    const at::Tensor counts = r.ptr.slice(0, 1) - r.ptr.slice(0, 0, -1);
    EXPECT_GT(counts.eq(0).sum().item<int64_t>(), num_src * 2 / 3);  // mostly empty segments
    EXPECT_GE(counts.max().item<int64_t>(), 250);                    // and a long one
    const at::Tensor entry_src = h.col.to(torch::kInt64).index_select(0, r.eid);
    for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
      for (const int64_t width : {3, 33, 47, 128, 256}) {
        if (num_src > 4 * n + 5 && (dtype == torch::kFloat64 || width != 128)) continue;  // the grid's stride once
        SCOPED_TRACE("source rows " + std::to_string(num_src) + ", width " + std::to_string(width) +
                     (dtype == torch::kFloat64 ? " float64" : " float32"));
        const at::Tensor g = torch::randn({rows.numel(), width}, torch::kFloat64);
        const at::Tensor out = sum(r, g.to(d, dtype), w.to(d, dtype));
        // The float64 reference: each entry's weighted row added to its source row.
        const at::Tensor g_entry = g.index_select(0, r.idx.to(torch::kInt64));
        const at::Tensor want = torch::zeros({num_src, width}, torch::kFloat64)
                                    .index_add_(0, entry_src, g_entry * w.index_select(0, r.eid).unsqueeze(1));
        const double tol = dtype == torch::kFloat64 ? 1e-12 : 1e-4;
        EXPECT_TRUE(torch::allclose(out.to(torch::kFloat64), want, tol, tol));
        // Without weights: all ones.
        const at::Tensor unweighted = sum(r, g.to(d, dtype), at::Tensor());
        const at::Tensor want_unweighted =
            torch::zeros({num_src, width}, torch::kFloat64).index_add_(0, entry_src, g_entry);
        EXPECT_TRUE(torch::allclose(unweighted.to(torch::kFloat64), want_unweighted, tol, tol)) << "without weights";
      }
    }
  }
  {
    SCOPED_TRACE("no entries");
    const k::RegroupedEntries none = k::regroup_by_source(h.rowptr, h.col, torch::tensor({2}, torch::kInt64), n, 0);
    const at::Tensor out = sum(none, torch::randn({1, 128}, torch::kFloat32).to(d), w.to(d, torch::kFloat32));
    EXPECT_TRUE(torch::equal(out, torch::zeros({n, 128}, torch::kFloat32)));
  }
  {
    SCOPED_TRACE("an input of no rows (a backward where nothing was computed)");
    const k::RegroupedEntries none{torch::zeros({101}, torch::kInt64), torch::empty({0}, torch::kInt32),
                                   torch::empty({0}, torch::kInt64)};
    for (const int64_t width : {16, 47}) {
      const at::Tensor out = sum(none, torch::empty({0, width}, torch::kFloat32).to(d), at::Tensor());
      EXPECT_TRUE(torch::equal(out, torch::zeros({100, width}, torch::kFloat32)));
    }
  }
  {
    SCOPED_TRACE("no source rows");
    const k::RegroupedEntries none{torch::zeros({1}, torch::kInt64), torch::empty({0}, torch::kInt32),
                                   torch::empty({0}, torch::kInt64)};
    EXPECT_EQ(sum(none, torch::randn({0, 16}, torch::kFloat32).to(d), at::Tensor()).size(0), 0);
  }
#endif
}

// A distributed pass's halo plan (halo.cpp) on the GPU: the CPU's read bits, masks, dirty state
// and per-peer counts, with peers of uneven sizes (warps that straddle two peers), a width change,
// every reader, and more (layer, peer) counters than the kernel keeps in shared memory.
TEST(Cuda, HaloPlanKernelsEqualTheCpu) {
  REQUIRE_GPU();
  namespace k = adgnn::kernels;
  torch::manual_seed(7);
  const int64_t owned = 5000, halo = 8000, entries = 100000, P = 5;
  const adgnn::testing::RandomBoundary b = adgnn::testing::random_boundary(owned, halo, entries, P);
  const at::Tensor &halo_owner = b.halo_owner, &boundary = b.boundary;
  const at::Tensor comp_owned = torch::randint(0, 256, {owned}, torch::kInt64);
  const at::Tensor comp_halo = torch::randint(0, 256, {halo}, torch::kInt64);
  // The definition, entry by entry (read_bits_by_definition): peer key = owned row * P + the halo row's owner; only the
  // asked layers' bits: layers >= 2 (a rank of every backbone but MixHop), layers 3-4
  // alone, and every layer (last: the masks below read its bits).
  at::Tensor bits[2][2];
  for (const uint64_t layers : {~uint64_t(1), uint64_t(0xc), ~uint64_t(0)}) {
    SCOPED_TRACE("layers " + std::to_string(layers));
    const auto [want_peer, want_halo] =
        adgnn::testing::read_bits_by_definition(b, owned, P, comp_owned, comp_halo, layers);
    for (int dev = 0; dev < 2; ++dev) {
      auto on = [&](const at::Tensor& x) { return dev ? x.cuda() : x; };
      bits[dev][0] = on(torch::zeros({owned * P}, torch::kInt64));
      bits[dev][1] = on(torch::zeros({halo}, torch::kInt64));
      k::halo_read_bits(on(boundary), on(halo_owner), P, on(comp_owned), on(comp_halo), bits[dev][0], bits[dev][1],
                        layers);
    }
    EXPECT_TRUE(torch::equal(bits[0][0], want_peer));
    EXPECT_TRUE(torch::equal(bits[0][1], want_halo));
    EXPECT_TRUE(torch::equal(bits[0][0], bits[1][0].cpu()));
    EXPECT_TRUE(torch::equal(bits[0][1], bits[1][1].cpu()));
    EXPECT_GT(bits[0][1].ne(0).sum().item<int64_t>(), halo / 2);
  }

  // Masks over a send list of uneven peers (offsets 0 .. n), for P = 5 and for P = 3000.
  for (const int64_t peers : {int64_t(5), int64_t(3000)}) {
    const int64_t n = 60000, t0 = 2, K = 5;
    at::Tensor offsets = std::get<0>(torch::sort(torch::randint(0, n + 1, {peers - 1}, torch::kInt64)));
    offsets = torch::cat({torch::zeros({1}, torch::kInt64), offsets, torch::full({1}, n, torch::kInt64)});
    const at::Tensor comp_idx = torch::randint(0, owned, {n}, torch::kInt64);
    const at::Tensor reads_idx = torch::randint(0, owned * P, {n}, torch::kInt64);
    const at::Tensor dirty0 = torch::rand({n}) < 0.3;
    for (const bool all_readers : {false, true}) {
      at::Tensor go[2], dirty[2], counts[2];
      for (int dev = 0; dev < 2; ++dev) {
        auto on = [&](const at::Tensor& x) { return dev ? x.cuda() : x; };
        dirty[dev] = on(dirty0.clone());
        go[dev] = on(torch::empty({K, n}, torch::kBool));
        counts[dev] = k::halo_keep_masks(on(comp_owned), on(comp_idx), bits[dev][0], on(reads_idx), on(offsets),
                                         t0, K, uint64_t(1) << 2, all_readers, dirty[dev], go[dev]);
      }
      const std::string what = "peers " + std::to_string(peers) + (all_readers ? ", every reader" : "");
      EXPECT_TRUE(torch::equal(go[0], go[1].cpu())) << what;
      EXPECT_TRUE(torch::equal(dirty[0], dirty[1].cpu())) << what;
      EXPECT_TRUE(torch::equal(counts[0], counts[1].cpu())) << what;
      EXPECT_EQ(counts[0].sum().item<int64_t>(), go[0].sum().item<int64_t>()) << what;
      EXPECT_GT(go[0].sum().item<int64_t>(), 0) << what;
    }
  }
}

// A GCN of depth 4, hidden 64, dropout 0.5 on the GPU (the model tests below, against the CPU).
adgnn::ModelConfig depth4_config(const adgnn::Graph& g, const std::string& variant, uint64_t seed) {
  adgnn::ModelConfig c;
  c.variant = adgnn::parse_variant(variant);
  c.layers = 4;
  c.hidden = 64;
  c.in_dim = g.features.cols;
  c.out_dim = g.num_classes;
  c.dropout = 0.5;
  c.seed = seed;
  c.device = "cuda";
  return c;
}

// One training pass of `c` on `device` (every third node a training node; the loss, plus L_reg
// with with_reg): the logits, L_reg, x's gradient (with x_grad) and every parameter's gradient
// (undefined where it has none), on the host.
struct ModelPass {
  at::Tensor logits, reg, x_grad;
  std::vector<at::Tensor> grads;
  bool first_layer_early = false;
};
ModelPass model_pass(const adgnn::Graph& g, adgnn::ModelConfig c, const std::string& device, int64_t epoch,
                     bool x_grad, bool with_reg) {
  const c10::Device dev(device);
  const auto t = adgnn::to_tensors(g, dev);
  const auto mg = adgnn::message_graph(t);
  const at::Tensor train = (torch::arange(g.num_nodes) % 3 == 0).to(dev);
  c.device = device;
  adgnn::Model m(c);
  const at::Tensor x = x_grad ? t.x.detach().clone().requires_grad_(true) : t.x;
  const auto out = m.forward(mg, x, true, epoch, t.y, train);
  at::Tensor loss = torch::nll_loss(torch::log_softmax(out.logits, 1).index({train}), t.y.index({train}));
  if (with_reg) loss = loss + out.reg_loss;
  loss.backward();
  ModelPass r;
  r.logits = out.logits.detach().cpu();
  r.reg = out.reg_loss.detach().cpu();
  if (x_grad) r.x_grad = x.grad().cpu();
  for (auto& [n, p] : m.named_parameters()) r.grads.push_back(p.grad().defined() ? p.grad().cpu() : at::Tensor());
  r.first_layer_early = out.stats.first_layer_early;
  return r;
}

// A GPU pass against the CPU's (as CudaModel.ForwardAndGradientsMatchCpu): float32 sums in
// another order (atomics in GAT's backward), so the logits and L_reg within 1e-4, each gradient
// within 1e-3 of its own scale.
void expect_pass_matches_cpu(const ModelPass& gpu, const ModelPass& cpu) {
  EXPECT_TRUE(torch::allclose(gpu.logits, cpu.logits, 1e-4, 1e-4)) << (gpu.logits - cpu.logits).abs().max();
  EXPECT_TRUE(torch::allclose(gpu.reg, cpu.reg, 1e-4, 1e-4)) << gpu.reg << " against " << cpu.reg;
  auto within_scale = [](const at::Tensor& a, const at::Tensor& b) {
    const double diff = (a - b).abs().max().item<double>();
    const double scale = std::max(1.0, b.abs().max().item<double>());
    return ::testing::AssertionResult(diff <= 1e-3 * scale) << "max |diff| " << diff << ", max |grad| " << scale;
  };
  ASSERT_EQ(gpu.x_grad.defined(), cpu.x_grad.defined());
  if (cpu.x_grad.defined()) {
    EXPECT_TRUE(within_scale(gpu.x_grad, cpu.x_grad)) << "x's gradient";
  }
  ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
  for (size_t i = 0; i < cpu.grads.size(); ++i) {
    const at::Tensor &a = gpu.grads[i], &b = cpu.grads[i];
    if (a.defined() && b.defined() && b.numel() > 0) {
      EXPECT_TRUE(within_scale(a, b)) << "parameter " << i;
    } else if (a.defined() != b.defined()) {  // no gradient on one device: zero on the other
      EXPECT_EQ((a.defined() ? a : b).abs().sum().item<double>(), 0.0) << "parameter " << i;
    }
  }
}

// GCN's hidden layers run with the next layer's dropout fused (the ReLU gradient kernel scaled,
// no dropout backward): on the GPU, logits, x's and every parameter's gradient against the CPU's
// model (the same dropout masks: a counter-based generator keyed by node id).
TEST(Cuda, FusedOutputDropoutMatchesTheCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 7);
  const auto c = depth4_config(g, "plain", 9);
  expect_pass_matches_cpu(model_pass(g, c, "cuda", 4, true, false), model_pass(g, c, "cpu", 4, true, false));
}

// A linear layer over a few rows runs our kernels instead of cuBLAS. Output and the three
// gradients (x's in the leading rows of a larger input, w's split over row chunks, b's) against
// float64 on the CPU, for widths that are not multiples of the tiles, one row, one chunk and
// many; the same bits on a second run; and cuBLAS's path (the limit at 0) within float32's error.
TEST(Cuda, SmallLinearEqualsTheCpu) {
  REQUIRE_GPU();
#ifdef ADGNN_HAVE_CUDA_KERNELS  // the kernels' own entry points (a CPU build declares none)
  torch::manual_seed(21);
  struct Shape {
    int64_t m, k, n;
  };
  for (const auto dt : {torch::kFloat32, torch::kFloat64})
    for (const Shape sh : {Shape{1, 128, 128}, Shape{33, 128, 40}, Shape{700, 128, 128}, Shape{5000, 128, 128},
                           Shape{257, 7, 5}, Shape{300, 100, 70}, Shape{20000, 64, 64}})
      for (const bool relu : {false, true}) {
        SCOPED_TRACE(std::string(dt == torch::kFloat64 ? "float64" : "float32") + " m " + std::to_string(sh.m) +
                     " k " + std::to_string(sh.k) + " n " + std::to_string(sh.n) + (relu ? " relu" : ""));
        const int64_t extra = sh.m % 2;  // odd m: x has more rows than the product reads
        const at::Tensor x = torch::randn({sh.m + extra, sh.k}, torch::kFloat64);
        const at::Tensor w = torch::randn({sh.k, sh.n}, torch::kFloat64) / std::sqrt(double(sh.k));
        const at::Tensor b = torch::randn({sh.n}, torch::kFloat64);
        const at::Tensor probe = torch::randn({sh.m, sh.n}, torch::kFloat64);
        ASSERT_TRUE(adgnn::kernels::small_linear_applies(x.to(dt).cuda().narrow(0, 0, sh.m), w.to(dt).cuda()));
        auto run = [&](const c10::Device d, c10::ScalarType type) {
          auto leaf = [&](const at::Tensor& t) { return t.to(type).to(d).detach().clone().requires_grad_(true); };
          const at::Tensor xx = leaf(x), ww = leaf(w), bb = leaf(b);
          const at::Tensor out = relu ? adgnn::detail::linear_relu(xx, ww, bb, sh.m)
                                      : adgnn::detail::linear(xx, ww, bb, sh.m);
          (out * probe.to(type).to(d)).sum().backward();
          return std::vector<at::Tensor>{out.detach().cpu().to(torch::kFloat64), xx.grad().cpu().to(torch::kFloat64),
                                         ww.grad().cpu().to(torch::kFloat64), bb.grad().cpu().to(torch::kFloat64)};
        };
        const auto want = run(torch::kCPU, torch::kFloat64);
        const auto got = run(torch::kCUDA, dt), again = run(torch::kCUDA, dt);
        adgnn::kernels::small_linear_max_macs() = 0;
        const auto cublas = run(torch::kCUDA, dt);
        adgnn::kernels::small_linear_max_macs() = int64_t(1) << 27;
        const char* what[] = {"output", "x's gradient", "w's gradient", "b's gradient"};
        for (size_t i = 0; i < want.size(); ++i) {
          SCOPED_TRACE(what[i]);
          // float32: sums of up to 20,000 terms, judged against the largest entry's scale.
          const double scale = std::max(1.0, want[i].abs().max().item<double>());
          const double tol = (dt == torch::kFloat64 ? 1e-12 : 2e-5) * scale;
          EXPECT_LE((got[i] - want[i]).abs().max().item<double>(), tol);
          EXPECT_LE((cublas[i] - want[i]).abs().max().item<double>(), tol);
          EXPECT_TRUE(torch::equal(got[i], again[i]));
        }
        if (extra) {
          EXPECT_EQ(got[1][sh.m].abs().sum().item<double>(), 0);  // rows the product did not read
        }
        if (relu) {
          EXPECT_GT((want[0] == 0).sum().item<int64_t>(), 0);
        }
      }
  // Beyond the limit: cuBLAS (the kernels' grid holds the rows anyway).
  EXPECT_FALSE(adgnn::kernels::small_linear_applies(torch::empty({169343, 128}).cuda(),
                                                    torch::empty({128, 128}).cuda()));
  // NaN stays NaN through the ReLU.
  const at::Tensor xn = torch::full({3, 4}, std::nan(""), torch::kFloat32).cuda();
  EXPECT_TRUE(adgnn::kernels::small_linear_cuda(xn, torch::ones({4, 2}).cuda(), torch::zeros({2}).cuda(), true)
                  .isnan()
                  .all()
                  .item<bool>());
#endif
}

// On the GPU, layer 1 is issued before the wait for the counts (their copy into pinned memory,
// an event): logits, L_reg and gradients against the CPU's model, learned and fast.
TEST(Cuda, FirstLayerBeforeTheCountsMatchesTheCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 8);
  for (const std::string variant : {"ad", "ad_fast"}) {
    SCOPED_TRACE(variant);
    const auto c = depth4_config(g, variant, 4);
    const ModelPass gpu = model_pass(g, c, "cuda", 6, false, true);
    EXPECT_TRUE(gpu.first_layer_early);
    expect_pass_matches_cpu(gpu, model_pass(g, c, "cpu", 6, false, true));
  }
}

// At model level, rows summed in length order (Cuda.LengthOrderedRowsMatchTheCpuReference): GCN,
// GraphSAGE and GAT, plain and AD-GCN_fast, logits and gradients against the CPU's model.
TEST(Cuda, LengthOrderedModelsMatchTheCpu) {
  REQUIRE_GPU();
  const auto g = graph(3000, 12);
  for (const std::string backbone : {"gcn", "sage", "gat"}) {
    for (const std::string variant : {"plain", "ad_fast"}) {
      SCOPED_TRACE(backbone + " " + variant);
      auto c = depth4_config(g, variant, 6);
      c.backbone = adgnn::parse_backbone(backbone);
      expect_pass_matches_cpu(model_pass(g, c, "cuda", 2, false, false), model_pass(g, c, "cpu", 2, false, false));
    }
  }
}

// The GPU's cross-entropy kernels against the CPU's ATen formula (loss and gradient), in
// float64 and float32, with a repeated row (its gradient adds up) and wide rows (C > 32), scaled
// (the mean's 1 / count applied per row in the kernels).
TEST(Cuda, CrossEntropySumEqualsTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(11);
  for (const auto dt : {torch::kFloat64, torch::kFloat32}) {
    for (const int64_t C : {int64_t(6), int64_t(40), int64_t(47)}) {
      SCOPED_TRACE(std::string(dt == torch::kFloat64 ? "float64" : "float32") + ", C " + std::to_string(C));
      const at::Tensor z = (torch::randn({500, C}, torch::kFloat64) * 4).to(dt);
      const at::Tensor rows = torch::cat({torch::randperm(500, torch::kInt64).slice(0, 0, 300),
                                          torch::tensor({7, 7}, torch::kInt64)});
      const at::Tensor labels = torch::randint(0, C, {rows.numel()}, torch::kInt64);
      at::Tensor loss[2], grad[2];
      for (int dev = 0; dev < 2; ++dev) {
        auto on = [&](const at::Tensor& t) { return dev ? t.cuda() : t; };
        const at::Tensor zz = on(z).detach().requires_grad_(true);
        const at::Tensor l = adgnn::cross_entropy_sum(zz, on(rows), on(labels), C == 40 ? 1.0 : 1.0 / 302);
        (l * 0.37).backward();
        loss[dev] = l.detach().cpu();
        grad[dev] = zz.grad().cpu();
      }
      const double tol = dt == torch::kFloat64 ? 1e-12 : 2e-5;
      EXPECT_NEAR(loss[1].item<double>(), loss[0].item<double>(), tol * std::abs(loss[0].item<double>()));
      EXPECT_TRUE(torch::allclose(grad[1], grad[0], tol, tol)) << (grad[1] - grad[0]).abs().max();
      EXPECT_GT(grad[0].abs().sum().item<double>(), 0);
    }
  }
  // A label outside [0, C) gives a NaN loss, not a read of another row's value.
  const at::Tensor z = torch::randn({10, 4}).cuda();
  const at::Tensor l = adgnn::cross_entropy_sum(z, torch::tensor({1, 2}, torch::kInt64).cuda(),
                                                torch::tensor({0, 9}, torch::kInt64).cuda());
  EXPECT_TRUE(std::isnan(l.item<double>()));
}

// A pass's row masks on the GPU (one kernel) against their CPU form: depth, every mask row and
// every count equal, for each band mode, with layer 1's band off, from eps and tau (float32 and
// float64; eps values exactly on a threshold and a NaN included) and from a given depth.
TEST(Cuda, DepthMasksEqualTheCpu) {
  REQUIRE_GPU();
  using Band = adgnn::detail::DepthMaskSpec::Band;
  const auto g = graph(3000, 4);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  const int64_t n = t.rowptr.numel() - 1;
  torch::manual_seed(9);
  for (const int64_t L : {4, 8}) {
    const at::Tensor tau64 = torch::cat({torch::zeros({1}, torch::kFloat64),
                                         std::get<0>(torch::rand({L - 1}, torch::kFloat64).sort())});
    at::Tensor eps64 = torch::rand({n}, torch::kFloat64);
    eps64.narrow(0, 0, L).copy_(tau64);  // on the thresholds
    eps64[L] = std::nan("");
    const at::Tensor depth_given = torch::randint(0, L + 1, {n}, torch::kInt64);
    for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
      for (const Band band : {Band::None, Band::Width, Band::All}) {
        for (const bool no_band1 : {false, true}) {
          for (const bool given : {false, true}) {
            if (given && band == Band::Width) continue;
            adgnn::detail::DepthMaskSpec spec;
            spec.layers = L;
            spec.band = band;
            spec.band_width = 0.15;
            spec.no_band_at_layer1 = no_band1;
            spec.frozen_layers = L == 4 ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 3, 8};
            SCOPED_TRACE("L " + std::to_string(L) + (dt == torch::kFloat64 ? " double" : " float") + " band " +
                         std::to_string(int(band)) + (no_band1 ? " no band at 1" : "") + (given ? " given depth" : ""));
            adgnn::detail::DepthMasks out[2];
            for (int dev = 0; dev < 2; ++dev) {
              auto on = [&](const at::Tensor& x) { return dev ? x.cuda() : x; };
              out[dev] = given ? adgnn::detail::depth_masks({}, {}, on(depth_given), on(t.rowptr), spec)
                               : adgnn::detail::depth_masks(on(eps64.to(dt)), on(tau64.to(dt)), {}, on(t.rowptr), spec);
            }
            EXPECT_TRUE(torch::equal(out[1].depth.cpu(), out[0].depth));
            EXPECT_TRUE(torch::equal(out[1].stacked.cpu(), out[0].stacked));
            EXPECT_TRUE(torch::equal(out[1].counts.cpu(), out[0].counts)) << out[1].counts.cpu() << out[0].counts;
            EXPECT_TRUE(torch::equal(out[1].comp_pos.cpu(), out[0].comp_pos));
            const int64_t listed = out[0].counts.narrow(0, 0, out[0].stacked.size(0)).sum().item<int64_t>();
            EXPECT_TRUE(torch::equal(adgnn::detail::mask_rows(out[1], listed).cpu(),
                                     adgnn::detail::mask_rows(out[0], listed)));
            ASSERT_EQ(out[0].stacked.size(0), 3 * L + int64_t(spec.frozen_layers.size()));
            EXPECT_GT(out[0].counts.narrow(0, 0, L).sum().item<int64_t>(), 0);
          }
        }
      }
    }
  }
}

// The positions and the masks' row lists over more than 1,024 tiles of 1,024 rows (the
// tile-offset kernel's threads then take several tiles each), a row count not a multiple of the
// tile, masks from every row set to almost none.
TEST(Cuda, DepthMaskPositionsOverManyTilesEqualTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(4);
  const int64_t n = 1024 * 1100 + 77, L = 4;
  const at::Tensor rowptr = torch::zeros({n + 1}, torch::kInt64);
  const at::Tensor tau = torch::tensor(std::vector<float>{0.f, 0.001f, 0.5f, 0.9999f});
  const at::Tensor eps = torch::rand({n});
  adgnn::detail::DepthMaskSpec spec;
  spec.layers = L;
  const auto cpu = adgnn::detail::depth_masks(eps, tau, {}, rowptr, spec);
  const auto gpu = adgnn::detail::depth_masks(eps.cuda(), tau.cuda(), {}, rowptr.cuda(), spec);
  EXPECT_TRUE(torch::equal(gpu.comp_pos.cpu(), cpu.comp_pos));
  EXPECT_EQ(cpu.comp_pos.select(0, 0).max().item<int64_t>(), n - 1);
  const int64_t listed = cpu.counts.narrow(0, 0, cpu.stacked.size(0)).sum().item<int64_t>();
  EXPECT_TRUE(torch::equal(adgnn::detail::mask_rows(gpu, listed).cpu(), adgnn::detail::mask_rows(cpu, listed)));
}

// tau(t) on the GPU (one autograd node, one kernel each way) against the CPU's operations:
// values and a's gradient from some layers' gradients (the others absent), float32 and float64,
// a beyond softplus' threshold, 2 to 8 layers.
TEST(Cuda, TauThresholdsEqualTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(5);
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    for (const int64_t L : {2, 4, 8}) {
      at::Tensor a0 = torch::randn({L - 1}, torch::kFloat64) * 3;
      a0[0] = 23.0;
      const at::Tensor w = torch::randn({L}, torch::kFloat64);
      at::Tensor grad[2], all[2];
      for (int dev = 0; dev < 2; ++dev) {
        const at::Tensor a = (dev ? a0.cuda() : a0).to(dt).clone().requires_grad_(true);  // a leaf per run
        const adgnn::detail::Thresholds th = adgnn::detail::tau_thresholds(a, L, 0.25);
        at::Tensor loss = torch::zeros({}, a.options());
        for (int64_t t = 1; t < L; t += 2) loss = loss + w[t].item<double>() * th.layers[size_t(t)];
        loss.backward();
        grad[dev] = a.grad().cpu().to(torch::kFloat64);
        all[dev] = th.all.cpu().to(torch::kFloat64);
        EXPECT_TRUE(torch::equal(torch::stack(th.layers).detach().cpu(), th.all.cpu()));
      }
      const double tol = dt == torch::kFloat32 ? 1e-6 : 1e-14;
      SCOPED_TRACE("L " + std::to_string(L) + (dt == torch::kFloat32 ? " float" : " double"));
      EXPECT_TRUE(torch::allclose(all[1], all[0], tol, tol)) << all[1] << all[0];
      EXPECT_TRUE(torch::allclose(grad[1], grad[0], tol, tol)) << grad[1] << grad[0];
    }
  }
}

// The learned depth benefit's kernels (depth_benefit.h) against the CPU's operations, float32 and
// float64: d+ from pair logits over a power-law graph's CSR (hub rows of hundreds of entries; a
// pair's two entries in different rows) and L_reg's sum, values and the logits' gradient; then,
// from the same d+, the range and eps_tilde under both normalisations, with and without AD#'s
// offset, with rows at alpha = 0, values and d+'s gradient; the same bits on a second run; every
// row equal; no rows.
TEST(Cuda, DepthBenefitKernelsEqualTheCpu) {
  REQUIRE_GPU();
  namespace d = adgnn::detail;
  const auto g = graph(3000, 9);
  const auto t = adgnn::to_tensors(g, torch::kCPU);
  torch::manual_seed(17);
  const int64_t n = g.num_nodes, H = 4;
  const at::Tensor entry_pair =
      d::fdelta_pair_logits(t.rowptr, t.col, torch::randn({n, H}), torch::randn({2 * H, H}), torch::randn({H}),
                            torch::randn({H, 1}), torch::randn({1}), d::FDeltaPrecision::kFp32)
          .entry_pair;
  const int64_t P = entry_pair.max().item<int64_t>() + 1, E = entry_pair.numel();
  ASSERT_LT(P, E);  // pairs shared by two entries
  const at::Tensor rows = torch::repeat_interleave(t.rowptr.diff());
  const at::Tensor degree = t.rowptr.diff().to(torch::kFloat64);
  ASSERT_GT(degree.max().item<double>(), 100);
  const at::Tensor sel_pair = entry_pair.index_select(0, torch::randperm(E).slice(0, 0, E / 3));
  const at::Tensor target0 = (torch::rand({sel_pair.numel()}) < 0.5).to(torch::kFloat64);
  const double t_max = 4;
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    SCOPED_TRACE(dt == torch::kFloat32 ? "float32" : "float64");
    const double tol = dt == torch::kFloat32 ? 1e-5 : 1e-12;
    const at::Tensor logit0 = (torch::randn({P}, torch::kFloat64) * 2).to(dt);
    const at::Tensor probe = torch::randn({n}, torch::kFloat64).to(dt);
    const at::Tensor target = target0.to(dt);
    // d+ and L_reg's sum: the GPU twice, then the CPU.
    at::Tensor dp_out[3], bce_out[3], grad_out[3];
    for (int run = 0; run < 3; ++run) {
      const auto dev = run < 2 ? c10::Device("cuda") : c10::Device("cpu");
      const at::Tensor logit = logit0.to(dev).clone().requires_grad_(true);
      const at::Tensor dp = d::sigmoid_row_sums(t.rowptr.to(dev), rows.to(dev), entry_pair.to(dev), logit);
      const at::Tensor bce = d::pair_bce_sum(logit, sel_pair.to(dev), target.to(dev));
      ((dp * probe.to(dev)).sum() + 0.1 * bce).backward();
      dp_out[run] = dp.detach().cpu();
      bce_out[run] = bce.detach().cpu();
      grad_out[run] = logit.grad().cpu();
    }
    EXPECT_TRUE(torch::equal(dp_out[0], dp_out[1]) && torch::equal(bce_out[0], bce_out[1]) &&
                torch::equal(grad_out[0], grad_out[1]));
    EXPECT_TRUE(torch::allclose(dp_out[0], dp_out[2], tol, tol)) << (dp_out[0] - dp_out[2]).abs().max();
    EXPECT_NEAR(bce_out[0].item<double>(), bce_out[2].item<double>(), tol * std::abs(bce_out[2].item<double>()));
    EXPECT_TRUE(close_to_scale(grad_out[0], grad_out[2], tol));
    // eps_tilde from the CPU's d+ (a tenth of the rows at alpha = 0 exactly: d+ = (d - 1) / 2).
    at::Tensor dp0 = dp_out[2].to(torch::kFloat64);
    const at::Tensor at_zero = torch::rand({n}) < 0.1;
    dp0 = torch::where(at_zero, (degree - 1) / 2, dp0).to(dt);
    const at::Tensor deg = degree.to(dt), offset0 = (torch::randn({n}, torch::kFloat64) * 0.3).to(dt);
    for (const bool with_offset : {false, true}) {
      for (const bool log_norm : {false, true}) {
        SCOPED_TRACE(std::string(with_offset ? "offset, " : "") + (log_norm ? "log" : "linear"));
        at::Tensor range_out[3], eps_out[3], g_out[3];
        for (int run = 0; run < 3; ++run) {
          const auto dev = run < 2 ? c10::Device("cuda") : c10::Device("cpu");
          const at::Tensor dp = dp0.to(dev).clone().requires_grad_(true);
          const at::Tensor offset = with_offset ? offset0.to(dev) : at::Tensor();
          const at::Tensor range = d::depth_benefit_range(dp.detach(), deg.to(dev), offset, t_max);
          const at::Tensor eps = d::normalised_depth_benefit(dp, deg.to(dev), offset, range, t_max, log_norm);
          (eps * probe.to(dev)).sum().backward();
          range_out[run] = range.cpu();
          eps_out[run] = eps.detach().cpu();
          g_out[run] = dp.grad().cpu();
        }
        EXPECT_TRUE(torch::equal(eps_out[0], eps_out[1]) && torch::equal(g_out[0], g_out[1]));
        EXPECT_TRUE(torch::allclose(range_out[0], range_out[2], tol, 0)) << range_out[0] << range_out[2];
        EXPECT_TRUE(torch::allclose(eps_out[0], eps_out[2], tol, tol)) << (eps_out[0] - eps_out[2]).abs().max();
        EXPECT_TRUE(close_to_scale(g_out[0], g_out[2], 10 * tol));
        EXPECT_TRUE(torch::equal(g_out[0].masked_select(at_zero), torch::zeros({at_zero.sum().item<int64_t>()}, dt)));
        EXPECT_GT(eps_out[0].max().item<double>(), 0.99);
      }
    }
    // Every row equal: eps 1 everywhere, no gradient; no rows: [-inf, -inf].
    const at::Tensor same = torch::full({50}, 0.7, torch::TensorOptions(dt).device(torch::kCUDA)).requires_grad_(true);
    const at::Tensor d50 = torch::full({50}, 3.0, same.options().requires_grad(false));
    const at::Tensor eq =
        d::normalised_depth_benefit(same, d50, {}, d::depth_benefit_range(same, d50, {}, t_max), t_max, false);
    EXPECT_TRUE(torch::equal(eq.cpu(), torch::ones({50}, dt)));
    eq.sum().backward();
    EXPECT_TRUE(torch::equal(same.grad().cpu(), torch::zeros({50}, dt)));
    const at::Tensor empty = torch::zeros({0}, d50.options());
    EXPECT_TRUE(torch::equal(d::depth_benefit_range(empty, empty, {}, t_max).cpu(),
                             torch::full({2}, -INFINITY, torch::kFloat64)));
  }
}

// merge_rows and band_diff on the GPU (one kernel each way) against their CPU form (a gather and
// index_put): copies, so the same bits (band_diff also with a bias and a ReLU: one addition, then
// one subtraction, either way); values and both gradients, at widths taking the vector
// and the scalar paths, both precisions, a quarter of the rows computed and most of those active.
TEST(Cuda, MergeRowsAndBandDiffEqualTheCpu) {
  REQUIRE_GPU();
  torch::manual_seed(3);
  const int64_t n = 5000;
  const at::Tensor comp = torch::rand({n}) < 0.25, active = comp & (torch::rand({n}) < 0.8);
  const at::Tensor pos = (comp.cumsum(0, torch::kInt32) * comp - 1).to(torch::kInt32);
  const int64_t m = comp.sum().item<int64_t>();
  const at::Tensor band = (comp & ~active).nonzero().squeeze(1);
  ASSERT_GT(band.numel(), 100);
  for (const int64_t width : {128, 40, 7}) {
    for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
      SCOPED_TRACE("width " + std::to_string(width) + (dt == torch::kFloat64 ? " double" : " float"));
      const at::Tensor prev0 = torch::randn({n, width}, dt), upd0 = torch::randn({m, width}, dt);
      const at::Tensor probe = torch::randn({n, width}, dt), bias = torch::randn({width}, dt);
      at::Tensor out[2], grad_prev[2], grad_upd[2], diff[2], biased[2], rectified[2];
      for (int dev = 0; dev < 2; ++dev) {
        auto on = [&](const at::Tensor& t) { return dev ? t.cuda() : t; };
        const at::Tensor prev = on(prev0).detach().clone().requires_grad_(true);
        const at::Tensor upd = on(upd0).detach().clone().requires_grad_(true);
        const at::Tensor o = adgnn::detail::merge_rows(prev, upd, on(pos), on(active));
        (o * on(probe)).sum().backward();
        out[dev] = o.detach().cpu();
        grad_prev[dev] = prev.grad().cpu();
        grad_upd[dev] = upd.grad().cpu();
        diff[dev] = adgnn::detail::band_diff(prev, upd, on(pos), on(band)).cpu();
        biased[dev] = adgnn::detail::band_diff(prev, upd, on(pos), on(band), on(bias), false).cpu();
        rectified[dev] = adgnn::detail::band_diff(prev, upd, on(pos), on(band), on(bias), true).cpu();
      }
      EXPECT_TRUE(torch::equal(out[1], out[0]));
      EXPECT_TRUE(torch::equal(grad_prev[1], grad_prev[0]));
      EXPECT_TRUE(torch::equal(grad_upd[1], grad_upd[0]));
      EXPECT_TRUE(torch::equal(diff[1], diff[0]));
      EXPECT_TRUE(torch::equal(biased[1], biased[0]));
      EXPECT_TRUE(torch::equal(rectified[1], rectified[0]));
      EXPECT_FALSE(torch::equal(rectified[0], biased[0]));  // the ReLU changed some entries
      EXPECT_EQ(grad_upd[0].abs().sum(1).gt(0).sum().item<int64_t>(), active.sum().item<int64_t>());
    }
  }
}

// The fused CUDA update against the CPU one (torch::optim::Adam's operations, tests/trainer)
// over steps with a changing gradient, two weight-decay groups, a resumed step count, float32
// and float64: the same formula in another order of rounding. Relative 3e-5 in float32: the
// fused kernel takes 1 - beta2 as 1 - float(0.999) = 0.00099998713, 1.3e-5 below the CPU's
// float(0.001), in the second moment's increment (torch.optim.Adam(fused=True) does the same);
// 1e-12 in float64.
TEST(Cuda, FlatAdamEqualsTheCpuUpdate) {
  REQUIRE_GPU();
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    std::array<at::Tensor, 2> a, b;     // [0]: weight decay, [1]: none; per device
    std::array<std::vector<at::Tensor>, 2> params;
    std::array<std::unique_ptr<adgnn::FlatAdam>, 2> opt;
    for (int dev = 0; dev < 2; ++dev) {
      const auto o = torch::TensorOptions().dtype(dt).device(dev ? torch::kCUDA : torch::kCPU);
      a[dev] = torch::linspace(-1, 1, 300, o).view({30, 10}).requires_grad_(true);
      b[dev] = torch::linspace(0.5, 2, 7, o).requires_grad_(true);
      opt[dev] = std::make_unique<adgnn::FlatAdam>(
          std::vector<adgnn::FlatAdam::Group>{{{{"a", a[dev]}}, 5e-4}, {{{"b", b[dev]}}, 0.0}}, 0.01);
    }
    const double rtol = dt == torch::kFloat32 ? 3e-5 : 1e-12, tol = dt == torch::kFloat32 ? 1e-6 : 1e-12;
    for (int step = 1; step <= 8; ++step) {
      if (step == 5)
        for (auto& o : opt) o->set_steps(40);  // a resumed run's bias correction
      for (int dev = 0; dev < 2; ++dev) {
        opt[dev]->zero_grad();
        ((a[dev] * a[dev]).sin().sum() * (1 + 0.3 * step) + (b[dev] * double(step)).cos().sum()).backward();
        opt[dev]->step();
      }
      EXPECT_TRUE(torch::allclose(a[1].detach().cpu(), a[0].detach(), rtol, tol))
          << dt << " step " << step << ": " << (a[1].detach().cpu() - a[0].detach()).abs().max();
      EXPECT_TRUE(torch::allclose(b[1].detach().cpu(), b[0].detach(), rtol, tol)) << dt << " step " << step;
      for (size_t i = 0; i < 4; ++i) {
        const at::Tensor s0 = opt[0]->named_state()[i].second, s1 = opt[1]->named_state()[i].second.cpu();
        EXPECT_TRUE(torch::allclose(s1, s0, rtol, tol))
            << dt << " " << opt[0]->named_state()[i].first << " step " << step << ": " << (s1 - s0).abs().max();
      }
    }
    EXPECT_EQ(opt[1]->steps(), 44);
    // The update moved the parameters (not a test of two unchanged copies).
    EXPECT_GT((a[0].detach() - torch::linspace(-1, 1, 300, a[0].options()).view({30, 10})).abs().max().item<double>(),
              0.01);
  }
}

class CudaModel : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(CudaModel, ForwardAndGradientsMatchCpu) {
  REQUIRE_GPU();
  const auto g = graph(800, 2);
  const auto [backbone, variant] = GetParam();
  at::Tensor logits[2];
  std::vector<at::Tensor> grads[2];
  std::vector<std::string> names;
  at::Tensor depth[2];
  for (int dev = 0; dev < 2; ++dev) {
    const std::string name = dev ? "cuda" : "cpu";
    const auto t = adgnn::to_tensors(g, c10::Device(name));
    const auto mg = adgnn::message_graph(t);
    adgnn::ModelConfig c;
    c.backbone = adgnn::parse_backbone(backbone);
    c.variant = adgnn::parse_variant(variant);
    c.layers = 3;
    c.hidden = 16;
    c.heads = 2;
    c.in_dim = g.features.cols;
    c.out_dim = g.num_classes;
    c.dropout = 0.3;
    c.normalisation = "log";
    c.seed = 5;
    c.device = name;
    adgnn::Model m(c);
    const at::Tensor train = (torch::arange(g.num_nodes) % 2 == 0).to(c10::Device(name));
    auto out = m.forward(mg, t.x, true, 3, t.y, train);
    (out.logits.sum() + out.reg_loss).backward();
    logits[dev] = out.logits.detach().cpu();
    depth[dev] = out.depth.cpu();
    for (auto& [n, p] : m.named_parameters()) {
      grads[dev].push_back(p.grad().defined() ? p.grad().cpu() : torch::zeros({0}));
      if (dev == 0) names.push_back(n);
    }
  }
  EXPECT_TRUE(torch::allclose(logits[0], logits[1], 1e-4, 1e-4)) << (logits[0] - logits[1]).abs().max();
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_TRUE(torch::equal(depth[0], depth[1]));
  for (size_t i = 0; i < grads[0].size(); ++i) {
    if (grads[0][i].numel()) {
      // float32 sums of up to thousands of terms in another order (atomics on the GPU): the
      // difference is judged against the gradient's own scale.
      const double diff = (grads[0][i] - grads[1][i]).abs().max().item<double>();
      const double scale = std::max(1.0, grads[0][i].abs().max().item<double>());
      EXPECT_LE(diff, 1e-3 * scale) << names[i] << ": max |diff| " << diff << ", max |grad| " << scale;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backbones, CudaModel,
    ::testing::Values(std::pair{"gcn", "plain"}, std::pair{"gcn", "ad_fast"}, std::pair{"gcn", "ad"},
                      std::pair{"gat", "ad_fast"}, std::pair{"sage", "ad_fast"},
                      std::pair{"mixhop", "ad_fast"}, std::pair{"gatv2", "ad"},
                      std::pair{"dirgnn", "ad_fast"}),
    [](const auto& info) { return info.param.first + "_" + info.param.second; });

}  // namespace
