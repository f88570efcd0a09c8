// The smaller graphs one forward pass builds from its message graph (internal).
#pragma once

#include <ATen/core/Tensor.h>

#include "adgnn/graph.h"

namespace adgnn::detail {

// The rows `read` as a graph of their own (row i = read[i]) in which `rows` (sorted, among
// `read`) keep their entries, remapped to positions in `read`: a layer computing those few rows
// then reads a compact input of |read| rows instead of every source row. The directed CSRs only
// when `directed` (DirGNN; `read` must then hold both directions' neighbours).
MessageGraph restrict_to(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& read, bool directed);

// A rank's graph for layers >= 2 when those read only `rows` of its halo rows (bool mask,
// `count` of them): the same owned rows and CSR entries, the source rows [owned; those halo rows]
// (docs/distributed.md). Columns of other halo rows, which no computed row reads, point at row 0.
// halo_pos: each halo row's position among the kept ones, -1 for the others. The directed CSRs
// only when `directed` (DirGNN; the others' directed columns, 2 x 31 M entries per rank of
// products-scale, are not remapped and not kept). computed_rows (defined, undirected): the only
// rows those layers compute, with `computed_entries` CSR entries; the columns of the other rows
// point at row 0 too: a gather over the few rows' entries instead of every entry's (31 M per rank
// of products-scale).
MessageGraph compact_halo_graph(const MessageGraph& g, const at::Tensor& rows, int64_t count, bool directed,
                                at::Tensor& halo_pos, const at::Tensor& computed_rows, int64_t computed_entries);

}  // namespace adgnn::detail
