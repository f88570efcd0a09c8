// GAT's and GATv2's attention over chosen rows (internal).
#pragma once

#include <ATen/core/Tensor.h>

#include "adgnn/graph.h"
#include "ops/csr.h"

namespace adgnn::detail {

// Attention of GAT / GATv2 over chosen destination rows, with the edge softmax fused into the
// CSR aggregation: out[i, h] = (sum_k a_k z[src_k, h] + a_i z_self[i, h]) / (sum_k a_k + a_i)
// with a = exp(score - row max), the denominator computed in the same pass as the numerator (a
// column of ones beside z). No per-entry message tensor [E, H, C] is formed, and the CPU and
// CUDA kernels sum in a fixed order. `rowptr` [R + 1] / `src` (int32, rows of z) list row i's
// entries, dst (int64 [E]) is each entry's row i; score_edge [E, H], score_self [R, H],
// z [S, H, C], z_self [R, H, C]. cache: the CSR is the graph's own (its transpose is cached for
// the backward).
at::Tensor attention_aggregate(const at::Tensor& rowptr, const at::Tensor& src, const at::Tensor& dst, bool cache,
                               const at::Tensor& score_edge, const at::Tensor& score_self,
                               const at::Tensor& z, const at::Tensor& z_self);

// The rows whose transform a set of destination rows needs: the rows themselves and their
// sources. Returns (sorted unique rows, position of each source / row in it).
// Also the CSR of `rows` over those needed rows, for attention_aggregate: the graph's own when
// every row is computed and every source row is needed (its transpose is then cached).
struct Needed {
  at::Tensor rows, src_pos, dst_pos;
  at::Tensor csr_rowptr, csr_src;
  bool graph_csr = false;
};
Needed needed_rows(const MessageGraph& g, const EdgeList& e, const at::Tensor& rows);

}  // namespace adgnn::detail
