// CSR bookkeeping on tensors (internal): a set of rows' entries, each entry's mirror, and the
// scope in which csr_aggregate treats its CSRs as built for one call.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace adgnn::detail {

// The CSR entries of the chosen rows: for entry e, dst_local[e] indexes `rows`, edge[e] is the
// CSR position and src[e] the source row (int64).
struct EdgeList {
  at::Tensor dst_local, edge, src;
};
// entries >= 0: their count, known on the host (no device wait for the size).
EdgeList edges_of_rows(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                       int64_t entries = -1);

// For each CSR entry (row r, column c): its row r (int64 [E]) and the index of an entry (c, r),
// its mirror, or -1 where none is (a directed edge, a halo column). One sort of the entries.
struct CsrMirrors {
  at::Tensor row, mirror;
};
CsrMirrors csr_mirrors(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src);

// Whether the aggregation over (rowptr, col, weight) with num_src = num_dst source rows is its own
// transpose: every entry's mirror is unique (mirror of mirror = the entry) with the same weight
// (undefined weight: ones). GCN's weights on one process's symmetric graph are; the backward then
// runs the forward kernel, without the transpose's extra indirection. Built once per CSR
// and weight (one device wait), then cached.
bool csr_is_self_adjoint(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight, int64_t num_src);

// While one lives on this thread, csr_aggregate treats its CSRs as built for one call (a graph
// of a few rows): their transposes are built in the backward instead of cached, so that they do
// not push the graph's own out of the cache.
class TransientCsrScope {
 public:
  TransientCsrScope();
  ~TransientCsrScope();
  TransientCsrScope(const TransientCsrScope&) = delete;
  TransientCsrScope& operator=(const TransientCsrScope&) = delete;

 private:
  bool previous_;
};

}  // namespace adgnn::detail
