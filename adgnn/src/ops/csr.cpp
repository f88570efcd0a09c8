// CSR bookkeeping on tensors (ops/csr.h, and the host side of kernels.h's transposes, row
// schedules and regrouped entries).
#include <torch/torch.h>

#include <optional>
#include <tuple>

#include "graph/csr_cache.h"
#include "ops/csr.h"
#include "ops/kernels.h"

namespace adgnn {

namespace detail {

EdgeList edges_of_rows(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                       int64_t entries) {
  EdgeList e;
  const at::Tensor begin = rowptr.index_select(0, rows);
  const at::Tensor counts = rowptr.index_select(0, rows + 1) - begin;
  e.dst_local = entries >= 0 ? at::repeat_interleave(counts, std::optional<int64_t>(entries))
                             : torch::repeat_interleave(counts);
  const at::Tensor first = (counts.cumsum(0) - counts).index_select(0, e.dst_local);
  e.edge = begin.index_select(0, e.dst_local) +
           (torch::arange(e.dst_local.numel(), rowptr.options()) - first);
  e.src = col.index_select(0, e.edge).to(torch::kInt64);
  return e;
}

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

}  // namespace adgnn
