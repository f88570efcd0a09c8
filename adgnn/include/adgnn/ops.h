// adgnn/ops: the differentiable operations the layers are built on, on the CPU and (ADGNN_CUDA)
// the GPU: sparse aggregation over chosen rows, the training loss over chosen rows and the
// counter-based dropout; and the device facts a caller reports (kernels built, peak memory).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <utility>

namespace adgnn {

// out[i] = sum over k in row r = rows[i] of weight[k] * x[col[k]], plus self_weight[i] * x[r]
// when self_weight (one constant per output row: GCN's self-loop) is given, or self_weight[r] when
// it has one per CSR row instead (rows listed, fewer than the CSR's rows; no gather of the listed
// rows' own; a list of every row takes one per output row); all rows when `rows` is undefined.
// weight (one value per CSR entry) may be undefined (all ones). Differentiable in x and weight;
// CPU and CUDA kernels are deterministic (no atomics), float32 and float64. The backward reads
// the CSR's transpose, built on first use and cached per CSR.
// rows_entries: the number of CSR entries in `rows`, when the caller knows it on the host (AD's
// model does, from its one host copy per pass): the backward of a few rows then regroups their
// entries without waiting for the device; -1: unknown (the GPU then scans the transpose).
// rows_pos: int32, one per CSR row, its position in `rows` (-1 for the others), when the caller
// has it (AD's model builds every layer's at once); the GPU backward otherwise builds it per call
// where it needs it (three launches).
at::Tensor csr_aggregate(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight,
                         const at::Tensor& x, const at::Tensor& rows = {},
                         const at::Tensor& self_weight = {}, int64_t rows_entries = -1,
                         const at::Tensor& rows_pos = {});

// The training loss summed over `rows`, times `scale`: scale times the sum of -log
// softmax(logits[r])[labels[r]] (labels: one per row of `rows`). On the GPU one kernel per pass (a
// warp per row, each row's term scaled there; its backward writes the listed rows' scaled softmax
// - one-hot directly) instead of a gather, log_softmax, gather, sum and division and their
// backward nodes (torch's nll_loss reduction runs in one CUDA block).
at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& rows, const at::Tensor& labels,
                             double scale = 1.0);

// Drops what the operations keep per graph (CSR transposes, row schedules, f_delta's pair lists, a
// rank's halo layouts) and the graph tensors those entries hold; the next use rebuilds them.
// `adgnn bench` calls it before each row, so that a row's peak memory holds its own caches only.
void release_graph_caches();

// Whether this build has the CUDA kernels (ADGNN_CUDA=ON).
bool cuda_kernels_built();
// Peak bytes allocated by PyTorch's CUDA allocator on `device` since the last reset (0 for the
// CPU or a build without CUDA), and its reset.
int64_t peak_device_memory(c10::Device device);
// Bytes allocated by PyTorch's CUDA allocator on `device` now (0 for the CPU or without CUDA).
int64_t current_device_memory(c10::Device device);
void reset_peak_device_memory(c10::Device device);

// Counter-based dropout: the mask entry (row, column) depends only on (seed, epoch, layer,
// global id of the row, column), never on the partition or thread count. row_flags (uint8, one
// per row, on h's device): only rows flagged nonzero are computed; the others must not be read
// (their values are unset: NaN on the CPU) and get a zero gradient.
at::Tensor dropout_rows(const at::Tensor& h, const at::Tensor& global_id, double p, uint64_t seed,
                        int64_t epoch, int64_t layer, const at::Tensor& row_flags = {});
// {dropout_rows(h, ...), h}: for an input that is both dropped out and used as it is (AD's
// frozen rows). Same values and gradient; the backward adds the dropped rows' gradient into the
// second output's in place, over the flagged rows only, instead of two passes over every row.
std::pair<at::Tensor, at::Tensor> dropout_rows_and_input(const at::Tensor& h, const at::Tensor& global_id, double p,
                                                         uint64_t seed, int64_t epoch, int64_t layer,
                                                         const at::Tensor& row_flags = {});

}  // namespace adgnn
