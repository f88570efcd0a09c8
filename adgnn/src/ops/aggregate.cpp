// The differentiable CSR aggregation (csr_aggregate, adgnn/ops.h): the autograd function over
// the CPU kernels (aggregate_cpu.cpp) and the CUDA ones (aggregate_cuda.cu), with the per-CSR
// caches of transposes and row schedules its backward and launches read.
#include <torch/torch.h>

#include <optional>
#include <utility>

#include "adgnn/ops.h"
#include "graph/csr_cache.h"
#include "ops/csr.h"
#include "ops/kernels.h"

namespace adgnn {

namespace {

thread_local bool transient_csr = false;  // a detail::TransientCsrScope is alive on this thread

using detail::CsrCache;

// The transposes of the aggregated CSRs (CPU and GPU), for the backward passes.
kernels::Transposed cached_transpose(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src) {
  static CsrCache<kernels::Transposed> cache;
  return cache.get(rowptr, col, num_src,
                   [&] { return kernels::transpose_entries(rowptr, col, num_src, rowptr.is_cuda()); });
}

#ifdef ADGNN_HAVE_CUDA_KERNELS
// The row schedules of the aggregated CSRs on the GPU (kernels::row_schedule), found once per
// row pointer (one device wait). Keyed by rowptr alone: a rank's per-pass graph with compact halo
// columns (docs/distributed.md) shares the graph's rows, so it finds them without a wait.
kernels::RowSchedule cached_schedule(const at::Tensor& rowptr) {
  static CsrCache<kernels::RowSchedule> cache;
  return cache.get(rowptr, rowptr, 0, [&] { return kernels::row_schedule(rowptr); });
}
#endif

// Backward to x when only a few rows were computed: their entries, regrouped by source (a stable
// sort keeps each source's entries in row order), are summed per source, instead of scanning the
// whole transpose for the computed ones: the neighbour sums of the transposed kernel, in its
// order, then the self term (a separate product here, so the last bit may differ from it).
// Every source row gets a segment (possibly empty) and the kernel writes every row, so no size
// depends on the data but the entry count, which `entries` (>= 0) gives from the host.
at::Tensor backward_x_few_rows(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                               const at::Tensor& g, const at::Tensor& rows, int64_t num_src,
                               const at::Tensor& self_w, bool self_by_row, int64_t entries) {
  at::Tensor grad_x;
  if (g.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
    // The regrouping's ATen operations as a few kernels, where their sizes allow.
    const bool kernel = entries >= 0 && entries < (int64_t(1) << 31) &&
                        num_src < (int64_t(1) << 31) && col.is_contiguous();
    const kernels::RegroupedEntries r = kernel ? kernels::regroup_by_source_cuda(rowptr, col, rows, num_src, entries)
                                               : kernels::regroup_by_source(rowptr, col, rows, num_src, entries);
    grad_x = kernels::aggregate_entries_cuda(r.ptr, r.idx, r.eid, w, g);
#endif
  } else {
    const kernels::RegroupedEntries r = kernels::regroup_by_source(rowptr, col, rows, num_src, entries);
    grad_x = kernels::aggregate_entries_cpu(r.ptr, r.idx, r.eid, w, g);
  }
  // Rows are unique: one addition per row, a deterministic order.
  if (self_w.defined())
    grad_x.index_add_(0, rows, g * (self_by_row ? self_w.index_select(0, rows) : self_w).unsqueeze(1));
  return grad_x;
}

// csr_aggregate's self weights hold one per CSR row (not one per listed row): read at each row.
bool self_weight_by_row(const at::Tensor& self_w, const at::Tensor& rows) {
  return self_w.defined() && rows.defined() && self_w.numel() != rows.numel();
}

class CsrAggregate : public torch::autograd::Function<CsrAggregate> {
 public:
  // Autograd cannot carry undefined inputs: absent weight / rows travel as empty tensors plus
  // a flag. cache_csr: the CSR is the graph's own, so its transpose and long rows are kept
  // (CsrCache); a CSR built for one call (attention over some rows, a compact graph) is not.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rowptr,
                            const at::Tensor& col, const at::Tensor& weight_in, const at::Tensor& x,
                            const at::Tensor& rows_in, const at::Tensor& self_in, const at::Tensor& pos_in,
                            bool has_weight, bool has_rows, bool has_self, bool cache_csr, int64_t rows_entries) {
    // x only for the edge weights' gradient (attention): GCN's first layer would otherwise hold
    // its dropped-out input features, and its classifier x W, until the backward.
    const bool keep_x = has_weight && weight_in.requires_grad();
    ctx->save_for_backward({rowptr, col, weight_in, keep_x ? x : at::Tensor(), rows_in, self_in, pos_in});
    ctx->saved_data["num_src"] = x.size(0);
    ctx->saved_data["cache_csr"] = cache_csr;
    ctx->saved_data["rows_entries"] = rows_entries;
    ctx->saved_data["has_weight"] = has_weight;
    ctx->saved_data["has_rows"] = has_rows;
    ctx->saved_data["has_self"] = has_self;
    const at::Tensor weight = has_weight ? weight_in : at::Tensor();
    const at::Tensor rows = has_rows ? rows_in : at::Tensor();
    const at::Tensor self_w = has_self ? self_in : at::Tensor();
    const bool self_by_row = self_weight_by_row(self_w, rows);
    if (x.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      // A CSR built for this call only is not searched for long rows (that would wait for the
      // device every call); its rows are all summed by single warps.
      return kernels::aggregate_cuda(rowptr, col, weight, x, rows, self_w,
                                     cache_csr ? cached_schedule(rowptr) : kernels::RowSchedule{}, self_by_row);
#else
      TORCH_CHECK(false, "csr_aggregate: this build has no CUDA kernels (configure with -DADGNN_CUDA=ON)");
#endif
    }
    return kernels::aggregate_cpu(rowptr, col, weight, x, rows, self_w, self_by_row);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor rowptr = saved[0], col = saved[1], x = saved[3];  // x: only where grad_w needs it
    const int64_t num_src = ctx->saved_data["num_src"].toInt();
    const at::Tensor weight = ctx->saved_data["has_weight"].toBool() ? saved[2] : at::Tensor();
    const at::Tensor rows = ctx->saved_data["has_rows"].toBool() ? saved[4] : at::Tensor();
    const at::Tensor self_w = ctx->saved_data["has_self"].toBool() ? saved[5] : at::Tensor();
    const at::Tensor rows_pos = saved[6].numel() > 0 ? saved[6] : at::Tensor();
    const bool self_by_row = self_weight_by_row(self_w, rows);
    const at::Tensor g = grads[0].contiguous();
    // A CSR built for one call (attention over some rows) would only push the graph's own
    // transposes out of the cache: its transpose is built here and dropped.
    const bool cache = ctx->saved_data["cache_csr"].toBool();
    auto transposed = [&] {
      return cache ? cached_transpose(rowptr, col, num_src) : kernels::transpose_entries(rowptr, col, num_src);
    };
    // Every row computed over a graph's own CSR that is its own transpose (GCN on one process):
    // the forward kernel sums the gradient, reading entries in row order without the transpose's
    // entry indirection (rows: every row in order, or undefined).
    auto self_adjoint = [&] {
      return cache && num_src == rowptr.numel() - 1 && (!rows.defined() || rows.numel() == num_src) &&
             detail::csr_is_self_adjoint(rowptr, col, weight, num_src);
    };
    at::Tensor grad_x, grad_w;
    // A few computed rows (AD's deeper layers): regroup their entries rather than scan the
    // transpose, whose cost is every entry of the graph. On the GPU only where the caller gave
    // their entry count (else the regrouping's sizes wait for the device, which then idles at
    // every deeper layer of the backward) and the graph is large: the scan skips the entries of
    // rows not computed, and is faster on arxiv-scale, slower on products-scale (the threshold and
    // its measurements: kernels::kRegroupMinEntries).
    const int64_t entries = ctx->saved_data["rows_entries"].toInt();
    const bool few_rows = rows.defined() && rows.numel() * 8 < rowptr.numel() - 1;
    const bool regroup = !g.is_cuda() || (entries >= 0 && col.numel() >= kernels::regroup_min_entries());
    if (few_rows && regroup && ctx->needs_input_grad(3)) {
      grad_x = backward_x_few_rows(rowptr, col, weight, g, rows, num_src, self_w, self_by_row, entries);
      if (weight.defined() && ctx->needs_input_grad(2)) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
        if (g.is_cuda()) grad_w = kernels::aggregate_backward_w_cuda(rowptr, col, x, g, rows);
#endif
        if (!g.is_cuda()) grad_w = kernels::aggregate_backward_w_cpu(rowptr, col, x, g, rows);
      }
    } else if (g.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      if (ctx->needs_input_grad(3) && self_adjoint())
        grad_x = kernels::aggregate_cuda(rowptr, col, weight, g, rows, self_w, cached_schedule(rowptr));
      else if (ctx->needs_input_grad(3)) {
        // Few rows computed: only the source rows their entries read (and the rows themselves,
        // for the self term: source and destination rows share the first indices) have a
        // nonzero gradient; flagged in one launch over those entries.
        // Very few (AD's deeper layers: tens of hubs), with their entry count: lists of the
        // entries that read each source row instead.
        const bool lists = few_rows && entries >= 0 &&
                           rows.numel() <= kernels::kMaxListRows && num_src >= rowptr.numel() - 1 &&
                           col.numel() < (int64_t(1) << 31);
        at::Tensor read_flags;
        if (!lists && few_rows && num_src >= rowptr.numel() - 1) {
          read_flags = kernels::zeroed_cuda({num_src}, rowptr.options().dtype(torch::kUInt8));
          kernels::mark_rows_read_cuda(rowptr, col, rows, read_flags);
        }
        grad_x = lists ? kernels::aggregate_backward_x_lists_cuda(rowptr, col, transposed(), weight, g, rows,
                                                                  rows_pos, num_src, self_w, entries, self_by_row)
                       : kernels::aggregate_backward_x_cuda(transposed(), weight, g, rows, rowptr.numel() - 1,
                                                            self_w, rows_pos, read_flags, self_by_row);
      }
      if (weight.defined() && ctx->needs_input_grad(2))
        grad_w = kernels::aggregate_backward_w_cuda(rowptr, col, x, g, rows);
#endif
    } else {
      if (ctx->needs_input_grad(3) && self_adjoint())
        grad_x = kernels::aggregate_cpu(rowptr, col, weight, g, rows, self_w);
      else if (ctx->needs_input_grad(3))
        grad_x = kernels::aggregate_backward_x_cpu(transposed(), weight,
                                                   g, rows, rowptr.numel() - 1, self_w, self_by_row);
      if (weight.defined() && ctx->needs_input_grad(2))
        grad_w = kernels::aggregate_backward_w_cpu(rowptr, col, x, g, rows);
    }
    return {at::Tensor(), at::Tensor(), grad_w, grad_x, at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace detail {
TransientCsrScope::TransientCsrScope() : previous_(transient_csr) { transient_csr = true; }
TransientCsrScope::~TransientCsrScope() { transient_csr = previous_; }
}  // namespace detail

at::Tensor csr_aggregate(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight,
                         const at::Tensor& x, const at::Tensor& rows, const at::Tensor& self_weight,
                         int64_t rows_entries, const at::Tensor& rows_pos) {
  TORCH_CHECK(rowptr.scalar_type() == torch::kInt64 && col.scalar_type() == torch::kInt32,
              "csr_aggregate: rowptr must be int64 and col int32");
  TORCH_CHECK(x.dim() == 2, "csr_aggregate: x must be [nodes, features]");
  TORCH_CHECK(!weight.defined() || weight.numel() == col.numel(),
              "csr_aggregate: one weight per CSR entry");
  TORCH_CHECK(!rows.defined() || rows.scalar_type() == torch::kInt64,
              "csr_aggregate: rows must be int64");
  const int64_t n_out = rows.defined() ? rows.numel() : rowptr.numel() - 1;
  // (One per CSR row while rows are listed: each output row's is the weight of its row.)
  TORCH_CHECK(!self_weight.defined() ||
                  ((self_weight.numel() == n_out || (rows.defined() && self_weight.numel() == rowptr.numel() - 1)) &&
                   !self_weight.requires_grad()),
              "csr_aggregate: self_weight needs one constant value per output row or per CSR row");
  TORCH_CHECK(!self_weight.defined() || rowptr.numel() - 1 <= x.size(0),
              "csr_aggregate: a self term needs every destination row among the source rows");
  TORCH_CHECK(!rows_pos.defined() || (rows.defined() && rows_pos.scalar_type() == torch::kInt32 &&
                                      rows_pos.dim() == 1 && rows_pos.numel() == rowptr.numel() - 1),
              "csr_aggregate: rows_pos needs rows and one int32 position per CSR row");
  TORCH_CHECK(!rows_pos.defined() || rows_pos.device() == rowptr.device(), "csr_aggregate: rows_pos on rowptr's device");
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = weight.defined() ? weight.contiguous().to(x.scalar_type()) : weight;
  const at::Tensor sc = self_weight.defined() ? self_weight.contiguous().to(x.scalar_type()) : self_weight;
  const at::Tensor none = torch::empty({0}, x.options());
  return CsrAggregate::apply(rowptr.contiguous(), col.contiguous(), wc.defined() ? wc : none, xc,
                             rows.defined() ? rows.contiguous() : torch::empty({0}, rowptr.options()),
                             sc.defined() ? sc : none,
                             rows_pos.defined() ? rows_pos.contiguous() : torch::empty({0}, torch::kInt32),
                             wc.defined(), rows.defined(), sc.defined(),
                             /*cache_csr=*/!transient_csr, rows.defined() ? rows_entries : int64_t(-1));
}

}  // namespace adgnn
