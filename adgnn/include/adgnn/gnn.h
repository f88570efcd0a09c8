// adgnn/gnn: graphs as tensors and the sparse aggregation every backbone is built on. The
// aggregation takes the rows to compute explicitly ("which rows are active at layer t"), so an
// inactive row costs nothing. Models and the AD mechanism build on this (models issue).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "adgnn/loaders.h"

namespace adgnn {

struct GraphTensors {
  int64_t num_nodes = 0, num_features = 0, num_classes = 0;
  at::Tensor rowptr, col;          // symmetric, self-loop-free, deduplicated (int64 / int32)
  at::Tensor out_rowptr, out_col;  // stored direction u -> v in row u, loops and duplicates dropped
  at::Tensor in_rowptr, in_col;    // its transpose: row v lists the u with u -> v
  at::Tensor degree;               // float32 [N], degree in the symmetric graph
  at::Tensor x;                    // float32 [N, F], dense
  at::Tensor y;                    // int64 [N]
};

GraphTensors to_tensors(const Graph& g, c10::Device device);

// out[i] = sum over k in row rows[i] of weight[k] * x[col[k]]; all rows when `rows` is undefined.
// weight (one value per CSR entry) may be undefined (all ones). Differentiable in x and weight;
// the CPU kernels are deterministic (no atomics), float32 and float64.
at::Tensor csr_aggregate(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight,
                         const at::Tensor& x, const at::Tensor& rows = {});

// Whether this build has the CUDA kernels (ADGNN_CUDA=ON).
bool cuda_kernels_built();

}  // namespace adgnn
