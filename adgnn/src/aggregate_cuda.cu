// CUDA CSR aggregation forward: one warp per output row, lanes stride over the features; rows
// are independent, so no atomics and a deterministic order. (The backward and the fused,
// bandwidth-tuned kernels come with the GPU performance issue.)
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels.h"

namespace adgnn::kernels {

namespace {

template <typename scalar_t>
__global__ void aggregate_rows(const int64_t* __restrict__ rowptr, const int32_t* __restrict__ col,
                               const scalar_t* __restrict__ w, const scalar_t* __restrict__ x,
                               const int64_t* __restrict__ rows, int64_t n_out, int64_t f,
                               scalar_t* __restrict__ out) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= n_out) return;
  const int64_t r = rows ? rows[warp] : warp;
  const int64_t begin = rowptr[r], end = rowptr[r + 1];
  for (int64_t j = lane; j < f; j += 32) {
    scalar_t acc = 0;
    for (int64_t k = begin; k < end; ++k) acc += (w ? w[k] : scalar_t(1)) * x[int64_t(col[k]) * f + j];
    out[warp * f + j] = acc;
  }
}

}  // namespace

at::Tensor aggregate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                          const at::Tensor& x, const at::Tensor& rows) {
  const int64_t n_out = rows.defined() ? rows.numel() : rowptr.numel() - 1;
  const int64_t f = x.size(1);
  at::Tensor out = at::empty({n_out, f}, x.options());
  if (n_out == 0) return out;
  const int threads = 256;
  const int64_t blocks = (n_out * 32 + threads - 1) / threads;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "aggregate_cuda", [&] {
    aggregate_rows<scalar_t><<<blocks, threads, 0, stream>>>(
        rowptr.data_ptr<int64_t>(), col.data_ptr<int32_t>(),
        w.defined() ? w.data_ptr<scalar_t>() : nullptr, x.data_ptr<scalar_t>(),
        rows.defined() ? rows.data_ptr<int64_t>() : nullptr, n_out, f, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace adgnn::kernels
