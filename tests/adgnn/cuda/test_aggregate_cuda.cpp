// csr_aggregate on the GPU (ops/aggregate*.cpp, aggregate*_cuda.cu, regroup_cuda.cu) against
// LibTorch and the CPU kernels: the SpMM forward and backward over every row and over few rows
// (long, mid-length and chunked rows, reader lists, the flagged transpose), the backward's
// regrouping by source and its segment tiles. Every test skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.h"
#include "ops/csr.h"
#include "ops/kernels.h"

namespace {

using namespace adgnn::cuda_test;

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
    const ScopedRegroupMinEntries regroup(0);
    const int64_t entries = (t.rowptr.index_select(0, rows + 1) - t.rowptr.index_select(0, rows)).sum().item<int64_t>();
    at::Tensor xh = x.to(d, dtype).detach().requires_grad_(true);
    at::Tensor wh = w.to(d, dtype).detach().requires_grad_(true);
    const at::Tensor outh = adgnn::csr_aggregate(t.rowptr.to(d), t.col.to(d), wh, xh, rows.to(d), {}, entries);
    (outh * probe.to(d, dtype)).sum().backward();
    EXPECT_TRUE(torch::allclose(outh.cpu().to(torch::kFloat64), ref.out, tol, tol));
    EXPECT_TRUE(torch::allclose(xh.grad().cpu().to(torch::kFloat64), ref.grad_x, tol, tol));
    EXPECT_TRUE(torch::allclose(wh.grad().cpu().to(torch::kFloat64), ref.grad_w, tol, tol));
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, CudaAggregate,
                         ::testing::Combine(::testing::Values<int64_t>(1, 3, 16, 33, 40, 128, 256, 260),
                                            ::testing::Bool()));

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
        // Path 2 lowers the threshold (this small graph then regroups); the others keep it.
        const ScopedRegroupMinEntries regroup(path == 2 ? 0 : adgnn::kernels::regroup_min_entries());
        at::Tensor out[2], grad[2];
        for (int by_row = 0; by_row < 2; ++by_row) {
          at::Tensor xx = x.detach().clone().requires_grad_(true);
          out[by_row] = adgnn::csr_aggregate(rowptr, col, w, xx, rows, by_row ? sw : sw.index_select(0, rows),
                                             path == 1 ? -1 : entries);
          (out[by_row] * probe).sum().backward();
          grad[by_row] = xx.grad();
        }
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
  const ScopedRegroupMinEntries regroup(0);
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

// bfloat16 rows (ModelConfig::precision bf16), summed in float32 and rounded once: forward and
// backward over every row (length order, hub rows on blocks), over a few rows (listed blocks, the
// hubs in chunks; their backward by the transpose, by regrouped entries and by reader lists),
// with and without a self term, at widths that take 8-element vectors (128, 16) and single
// elements (47). Against the float64 sums of the same bfloat16 values: within one bfloat16
// rounding of the output's scale (2^-8) and float32's; and the same bits on a second run.
TEST(Cuda, Bf16RowsAreSummedInFloat32) {
  REQUIRE_GPU();
  const auto d = c10::Device("cuda");
  constexpr int64_t n = 20000;
  at::Tensor deg = torch::arange(n, torch::kInt64) % 20 + 1;
  for (int64_t h = 0; h < 4; ++h) deg[h] = std::vector<int64_t>{1500, 2049, 5000, 300}[size_t(h)];
  torch::manual_seed(41);
  const at::Tensor rowptr = torch::cat({torch::zeros({1}, torch::kInt64), deg.cumsum(0)});
  const at::Tensor col = torch::randint(n, {deg.sum().item<int64_t>()}, torch::kInt64).to(torch::kInt32);
  const at::Tensor few = torch::cat({torch::arange(4, torch::kInt64), torch::arange(5000, 5100, torch::kInt64)});
  const at::Tensor rowptr_d = rowptr.to(d), col_d = col.to(d);
  for (const int64_t width : {128, 47, 16}) {
    for (const int path : {0, 1, 2, 3}) {  // every row; few rows: transpose, regrouped, reader lists
      for (const bool self : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "width " << width << " path " << path << (self ? " self" : ""));
        const ScopedRegroupMinEntries regroup(path == 2 ? 0 : adgnn::kernels::regroup_min_entries());
        const at::Tensor rows = path == 0 ? at::Tensor() : few;
        const int64_t n_out = path == 0 ? n : few.numel();
        const int64_t entries = path >= 2 ? (deg.index_select(0, few)).sum().item<int64_t>() : -1;
        const at::Tensor x = torch::randn({n, width}).to(torch::kBFloat16);
        const at::Tensor w = torch::rand({col.numel()}).to(torch::kBFloat16);
        const at::Tensor self_w = self ? torch::rand({n_out}).to(torch::kBFloat16) : at::Tensor();
        const at::Tensor probe = torch::randn({n_out, width}).to(torch::kBFloat16);
        at::Tensor x64 = x.to(torch::kFloat64).requires_grad_(true);
        const at::Tensor ref = adgnn::csr_aggregate(rowptr, col, w.to(torch::kFloat64), x64, rows,
                                                    self ? self_w.to(torch::kFloat64) : at::Tensor());
        (ref * probe.to(torch::kFloat64)).sum().backward();
        at::Tensor out[2], grad[2];
        for (int k = 0; k < 2; ++k) {
          at::Tensor xd = x.to(d).requires_grad_(true);
          out[k] = adgnn::csr_aggregate(rowptr_d, col_d, w.to(d), xd, rows.defined() ? rows.to(d) : rows,
                                        self ? self_w.to(d) : at::Tensor(), entries);
          (out[k] * probe.to(d)).sum().backward();
          grad[k] = xd.grad();
        }
        EXPECT_EQ(out[0].scalar_type(), torch::kBFloat16);
        EXPECT_EQ(grad[0].scalar_type(), torch::kBFloat16);
        EXPECT_TRUE(torch::equal(out[0], out[1]));
        EXPECT_TRUE(torch::equal(grad[0], grad[1]));
        EXPECT_TRUE(close_to_scale(out[0].cpu(), ref, 5e-3)) << "forward";
        EXPECT_TRUE(close_to_scale(grad[0].cpu(), x64.grad(), 5e-3)) << "backward";
      }
    }
  }
}

}  // namespace
