// Device kernels behind csr_aggregate (internal).
#pragma once

#include <ATen/core/Tensor.h>

namespace adgnn::kernels {

// Forward: out[i] = sum_k w[k] x[col[k]] over row rows[i] (rows undefined: row i).
at::Tensor aggregate_cpu(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                         const at::Tensor& x, const at::Tensor& rows);
// Backward to x: grad_x[col[k]] += w[k] grad_out[i], accumulated per destination in a fixed
// order (deterministic).
at::Tensor aggregate_backward_x_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                    const at::Tensor& w, const at::Tensor& grad_out,
                                    const at::Tensor& rows, int64_t num_src);
// Backward to w: grad_w[k] = <grad_out[i], x[col[k]]> for the edges of the computed rows.
at::Tensor aggregate_backward_w_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                    const at::Tensor& x, const at::Tensor& grad_out,
                                    const at::Tensor& rows);

#ifdef ADGNN_HAVE_CUDA_KERNELS
at::Tensor aggregate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                          const at::Tensor& x, const at::Tensor& rows);
#endif

}  // namespace adgnn::kernels
