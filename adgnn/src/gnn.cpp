// Graph tensors and the differentiable CSR aggregation.
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/gnn.h"

#ifdef ADGNN_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif
#include "csr_cache.h"
#include "kernels.h"
#include "layers.h"
#include "surrogate.h"

namespace adgnn {

namespace {

at::Tensor to_tensor(const std::vector<int64_t>& v) {
  return torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kInt64)
      .clone();
}
at::Tensor to_tensor(const std::vector<int32_t>& v) {
  return torch::from_blob(const_cast<int32_t*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kInt32)
      .clone();
}

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
    ctx->save_for_backward({rowptr, col, weight_in, x, rows_in, self_in, pos_in});
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
    const at::Tensor rowptr = saved[0], col = saved[1], x = saved[3];
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
      return cache ? cached_transpose(rowptr, col, x.size(0)) : kernels::transpose_entries(rowptr, col, x.size(0));
    };
    // Every row computed over a graph's own CSR that is its own transpose (GCN on one process):
    // the forward kernel sums the gradient, reading entries in row order without the transpose's
    // entry indirection (rows: every row in order, or undefined).
    auto self_adjoint = [&] {
      return cache && x.size(0) == rowptr.numel() - 1 && (!rows.defined() || rows.numel() == x.size(0)) &&
             detail::csr_is_self_adjoint(rowptr, col, weight, x.size(0));
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
    const bool regroup = !x.is_cuda() || (entries >= 0 && col.numel() >= kernels::regroup_min_entries());
    if (few_rows && regroup && ctx->needs_input_grad(3)) {
      grad_x = backward_x_few_rows(rowptr, col, weight, g, rows, x.size(0), self_w, self_by_row, entries);
      if (weight.defined() && ctx->needs_input_grad(2)) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
        if (x.is_cuda()) grad_w = kernels::aggregate_backward_w_cuda(rowptr, col, x, g, rows);
#endif
        if (!x.is_cuda()) grad_w = kernels::aggregate_backward_w_cpu(rowptr, col, x, g, rows);
      }
    } else if (x.is_cuda()) {
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
                           rows.numel() <= kernels::kMaxListRows && x.size(0) >= rowptr.numel() - 1 &&
                           col.numel() < (int64_t(1) << 31);
        at::Tensor read_flags;
        if (!lists && few_rows && x.size(0) >= rowptr.numel() - 1) {
          read_flags = kernels::zeroed_cuda({x.size(0)}, rowptr.options().dtype(torch::kUInt8));
          kernels::mark_rows_read_cuda(rowptr, col, rows, read_flags);
        }
        grad_x = lists ? kernels::aggregate_backward_x_lists_cuda(rowptr, col, transposed(), weight, g, rows,
                                                                  rows_pos, x.size(0), self_w, entries, self_by_row)
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
CsrMirrors csr_mirrors(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src) {
  const int64_t n = rowptr.numel() - 1, E = col.numel();
  CsrMirrors m;
  m.row = torch::repeat_interleave(rowptr.slice(0, 1) - rowptr.slice(0, 0, n), std::optional<int64_t>(E));
  if (E == 0) {
    m.mirror = torch::empty({0}, rowptr.options());
    return m;
  }
  const at::Tensor cols = col.to(torch::kInt64);
  // Entries as sorted keys row * num_src + column; each entry's mirror found by binary search.
  const auto sorted = (m.row * num_src + cols).sort();
  const at::Tensor& keys = std::get<0>(sorted);
  const at::Tensor& order = std::get<1>(sorted);
  const at::Tensor mirror_key = cols * num_src + m.row;
  const at::Tensor pos = torch::searchsorted(keys, mirror_key).clamp_max(E - 1);
  const at::Tensor found = (cols < n) & (keys.index_select(0, pos) == mirror_key);
  m.mirror = torch::where(found, order.index_select(0, pos), torch::full({}, -1, rowptr.options()));
  return m;
}

bool csr_is_self_adjoint(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight, int64_t num_src) {
  const int64_t n = rowptr.numel() - 1;
  if (num_src != n) return false;
  // Keyed by the weight (with the columns): the same CSR with another weight is another entry.
  static CsrCache<bool> cache;
  const at::Tensor& key = weight.defined() ? weight : rowptr;
  return cache.get(key, col, num_src, [&] {
    if (col.numel() == 0) return true;
    const CsrMirrors m = csr_mirrors(rowptr, col, num_src);
    if (!(m.mirror >= 0).all().item<bool>()) return false;
    const bool involution =
        torch::equal(m.mirror.index_select(0, m.mirror), torch::arange(col.numel(), rowptr.options()));
    return involution && (!weight.defined() || torch::equal(weight.index_select(0, m.mirror), weight));
  });
}

}  // namespace detail

namespace kernels {
int64_t& regroup_min_entries() {
  static int64_t min_entries = kRegroupMinEntries;
  return min_entries;
}

RowSchedule row_schedule(const at::Tensor& rowptr) {
  const at::Tensor counts = rowptr.slice(0, 1) - rowptr.slice(0, 0, -1);
  const at::Tensor n = torch::stack({(counts >= kLongRow).sum(), (counts >= kMidRow).sum()}).cpu();
  return {std::get<1>(counts.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true)), n[0].item<int64_t>(),
          n[1].item<int64_t>()};
}

Transposed transpose_entries(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src,
                             bool find_long) {
  Transposed t;
  const at::Tensor counts = rowptr.slice(0, 1) - rowptr.slice(0, 0, -1);
  const at::Tensor dst = torch::repeat_interleave(counts);  // destination row of every entry
  const at::Tensor col64 = col.to(torch::kInt64);
  // A stable sort keeps each source's entries in CSR order, i.e. by increasing destination row:
  // the backward sums in a fixed order.
  t.entry = std::get<1>(torch::sort(col64, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  t.row = dst.index_select(0, t.entry).to(torch::kInt32);
  t.rowptr = torch::cat({torch::zeros({1}, rowptr.options()),
                         torch::bincount(col64, {}, num_src).cumsum(0)});
  if (find_long) t.schedule = row_schedule(t.rowptr);
  return t;
}

RegroupedEntries regroup_by_source(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                                   int64_t num_src, int64_t entries) {
  const detail::EdgeList e = detail::edges_of_rows(rowptr, col, rows, entries);
  // Sorted as 32-bit keys (the columns' own width): a radix sort makes half the passes of 64-bit
  // ones (8 kernels per sort, 3 sorts a step on AD's deeper layers).
  const at::Tensor perm =
      std::get<1>(torch::sort(e.src.to(torch::kInt32), /*stable=*/true, /*dim=*/0, /*descending=*/false));
  // Segments per source row (integer counts: any order gives the same).
  const at::Tensor per_source = torch::zeros({num_src}, e.src.options()).index_add_(0, e.src, torch::ones_like(e.src));
  return {torch::cat({torch::zeros({1}, rowptr.options()), per_source.cumsum(0)}),
          e.dst_local.index_select(0, perm).to(torch::kInt32), e.edge.index_select(0, perm)};
}
}  // namespace kernels


GraphTensors to_tensors(const Graph& g, c10::Device device) {
  GraphTensors t;
  t.num_nodes = g.num_nodes;
  t.num_features = g.features.cols;
  t.num_classes = g.num_classes;
  const Csr sym = g.symmetric();
  const Csr out = g.directed_simple();
  const Csr in = transpose_csr(out);
  t.rowptr = to_tensor(sym.indptr).to(device);
  t.col = to_tensor(sym.indices).to(device);
  t.out_rowptr = to_tensor(out.indptr).to(device);
  t.out_col = to_tensor(out.indices).to(device);
  t.in_rowptr = to_tensor(in.indptr).to(device);
  t.in_col = to_tensor(in.indices).to(device);
  t.degree = (t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  // Dense features only here: the models consume dense rows (sparse inputs densify once).
  const std::vector<float> dense = g.features.to_dense();
  t.x = torch::from_blob(const_cast<float*>(dense.data()), {g.num_nodes, g.features.cols},
                         torch::kFloat32)
            .clone()
            .to(device);
  t.y = to_tensor(g.labels).to(device);
  return t;
}

namespace {
thread_local bool transient_csr = false;  // a detail::TransientCsrScope is alive on this thread
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

#ifdef ADGNN_HAVE_CUDA_KERNELS
namespace {

// cross_entropy_sum on the GPU: the per-row log-sum-exp kept for the backward.
class CrossEntropyRowsFn : public torch::autograd::Function<CrossEntropyRowsFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& rows,
                            const at::Tensor& labels, double scale) {
    const kernels::CrossEntropyRows ce = kernels::cross_entropy_rows_cuda(logits, rows, labels, scale);
    ctx->save_for_backward({logits, rows, labels, ce.lse});
    ctx->saved_data["scale"] = scale;
    return ce.loss.sum();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    return {kernels::cross_entropy_rows_backward_cuda(s[0], s[1], s[2], s[3], grads[0], scale), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace
#endif

at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& rows, const at::Tensor& labels,
                             double scale) {
  TORCH_CHECK(logits.dim() == 2 && rows.dim() == 1 && labels.sizes() == rows.sizes(),
              "cross_entropy_sum: logits [n, C] and one label per row of `rows`");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (logits.is_cuda()) return CrossEntropyRowsFn::apply(logits, rows, labels, scale);
#endif
  // -log_softmax(z)[y] picked with gather: torch's nll_loss reduction runs its CUDA kernel in a
  // single block (slow for hundreds of thousands of rows); gather and sum do not.
  const at::Tensor lp = torch::log_softmax(logits.index_select(0, rows), 1);
  const at::Tensor sum = -lp.gather(1, labels.unsqueeze(1)).sum();
  return scale == 1.0 ? sum : sum * scale;
}

at::Tensor training_loss(const ForwardOutput& out, const at::Tensor& rows, const at::Tensor& labels, double scale) {
  const at::Tensor ce = cross_entropy_sum(out.logits, rows, labels, scale);
  return out.reg_loss.defined() && out.reg_loss.requires_grad() ? ce + out.reg_loss : ce;
}

int64_t peak_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto idx = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    return stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  return 0;
}

void reset_peak_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index() : c10::cuda::current_device());
#endif
  (void)device;
}

bool cuda_kernels_built() {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

}  // namespace adgnn
