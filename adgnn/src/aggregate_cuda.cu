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

__global__ void dropout_mask_rows(const int64_t* __restrict__ gid, int64_t rows, int64_t cols,
                                  uint64_t key, uint64_t threshold, float scale,
                                  float* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const uint64_t row_key = mix64(key ^ uint64_t(gid[r]));
  out[i] = mix64(row_key + uint64_t(c)) >= threshold ? scale : 0.0f;
}

}  // namespace

at::Tensor dropout_mask_cuda(const at::Tensor& gid, int64_t cols, uint64_t key, uint64_t threshold,
                             float scale) {
  const int64_t rows = gid.numel();
  at::Tensor out = at::empty({rows, cols}, gid.options().dtype(at::kFloat));
  if (rows * cols == 0) return out;
  const int threads = 256;
  const int64_t blocks = (rows * cols + threads - 1) / threads;
  dropout_mask_rows<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      gid.data_ptr<int64_t>(), rows, cols, key, threshold, scale, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

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
