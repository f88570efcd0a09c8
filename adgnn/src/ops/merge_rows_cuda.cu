// A deeper AD layer's output from its few computed rows (model.cpp's detail::merge_rows): every
// row is the update where the row is active, else the previous value, in one pass each way
// instead of a searchsorted, a gather, a copy and a scatter forward and four launches back
// (a depth-4 AD-GCN_fast step on the GPU is host-bound: each launch saved is host time).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

// Grid-stride over vectors (row, column vector): out[r] = active[r] ? upd[pos[r]] : prev[r].
template <typename T, int V>
__global__ void merge_rows_kernel(const T* __restrict__ prev, const T* __restrict__ upd,
                                  const int32_t* __restrict__ pos, const bool* __restrict__ active, int64_t rows,
                                  int64_t vecs, T* __restrict__ out) {
  using VT = Vec<T, V>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * vecs; i += stride) {
    const int64_t r = i / vecs, v = i % vecs;
    const VT* src = active[r] ? reinterpret_cast<const VT*>(upd) + int64_t(pos[r]) * vecs
                              : reinterpret_cast<const VT*>(prev) + r * vecs;
    reinterpret_cast<VT*>(out)[i] = src[v];
  }
}

// The gradients: grad_prev[r] = active[r] ? 0 : g[r]; grad_upd[pos[r]] = active[r] ? g[r] : 0
// for every computed row (pos[r] >= 0; each update row has one, so every one is written).
template <typename T, int V>
__global__ void merge_rows_backward_kernel(const T* __restrict__ g, const int32_t* __restrict__ pos,
                                           const bool* __restrict__ active, int64_t rows, int64_t vecs,
                                           T* __restrict__ grad_prev, T* __restrict__ grad_upd) {
  using VT = Vec<T, V>;
  VT zero;
#pragma unroll
  for (int k = 0; k < V; ++k) zero.v[k] = T(0);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * vecs; i += stride) {
    const int64_t r = i / vecs, v = i % vecs;
    const VT x = reinterpret_cast<const VT*>(g)[i];
    const bool a = active[r];
    if (grad_prev) reinterpret_cast<VT*>(grad_prev)[i] = a ? zero : x;
    const int32_t p = pos[r];
    if (grad_upd && p >= 0) reinterpret_cast<VT*>(grad_upd)[int64_t(p) * vecs + v] = a ? x : zero;
  }
}

// diff[b] = upd[pos[band[b]]] - act(prev[band[b]] + bias), act = relu or the identity (bias:
// null, or one value per column).
template <typename T, int V>
__global__ void band_diff_kernel(const T* __restrict__ prev, const T* __restrict__ upd, const int32_t* __restrict__ pos,
                                 const int64_t* __restrict__ band, const T* __restrict__ bias, bool relu,
                                 int64_t count, int64_t vecs, T* __restrict__ diff) {
  using VT = Vec<T, V>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count * vecs; i += stride) {
    const int64_t b = i / vecs, v = i % vecs;
    const int64_t r = band[b];
    const VT u = reinterpret_cast<const VT*>(upd)[int64_t(pos[r]) * vecs + v];
    VT p = reinterpret_cast<const VT*>(prev)[r * vecs + v];
    if (bias) {
      const VT c = reinterpret_cast<const VT*>(bias)[v];
#pragma unroll
      for (int k = 0; k < V; ++k) p.v[k] += c.v[k];
    }
    if (relu) {
#pragma unroll
      for (int k = 0; k < V; ++k) p.v[k] = p.v[k] < T(0) ? T(0) : p.v[k];  // NaN stays NaN, as torch::relu
    }
    VT d;
#pragma unroll
    for (int k = 0; k < V; ++k) d.v[k] = u.v[k] - p.v[k];
    reinterpret_cast<VT*>(diff)[i] = d;
  }
}

// Calls launch(std::integral_constant<int, V>{}) with V = 4 floats / 2 doubles where every
// defined tensor's rows of F elements start on such a vector's boundary, else with V = 1.
template <typename T, typename Launch>
void with_vector_width(int64_t F, const std::vector<const at::Tensor*>& ts, Launch&& launch) {
  constexpr int V = kPackWidth<T>;
  bool vec = F % V == 0;
  for (const at::Tensor* t : ts)
    vec = vec && (!t->defined() || reinterpret_cast<uintptr_t>(t->data_ptr()) % (sizeof(T) * V) == 0);
  if (vec)
    launch(std::integral_constant<int, V>{});
  else
    launch(std::integral_constant<int, 1>{});
}

// a: [rows, width]; upd (where given): [any, width] of a's type.
void check_merge_inputs(const char* what, const at::Tensor& a, const at::Tensor& pos, const at::Tensor& active,
                        const at::Tensor& upd = {}) {
  TORCH_CHECK(a.is_cuda() && a.dim() == 2 && a.is_contiguous(), what, ": contiguous [rows, width] CUDA tensors");
  TORCH_CHECK(pos.scalar_type() == at::kInt && pos.is_contiguous() && pos.numel() == a.size(0), what,
              ": pos must be int32 with one entry per row");
  TORCH_CHECK(!active.defined() || (active.scalar_type() == at::kBool && active.is_contiguous() &&
                                    active.numel() == a.size(0)),
              what, ": active must be bool with one entry per row");
  TORCH_CHECK(!upd.defined() || (upd.is_contiguous() && upd.dim() == 2 && upd.size(1) == a.size(1) &&
                                 upd.scalar_type() == a.scalar_type()),
              what, ": upd must be contiguous, of prev's width and type");
}

}  // namespace

at::Tensor merge_rows_cuda(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos,
                           const at::Tensor& active) {
  check_merge_inputs("merge_rows_cuda", prev, pos, active, upd);
  at::Tensor out = at::empty_like(prev);
  const int64_t rows = prev.size(0), F = prev.size(1);
  if (rows * F == 0) return out;
  const int threads = 256;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, prev.scalar_type(), "merge_rows_cuda", [&] {
    using T = scalar_t;
    with_vector_width<T>(F, {&prev, &upd, &out}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const int64_t vecs = F / V;
      merge_rows_kernel<T, V><<<grid_for(rows * vecs, threads), threads, 0, stream>>>(
          prev.data_ptr<T>(), upd.data_ptr<T>(), pos.data_ptr<int32_t>(), active.data_ptr<bool>(), rows, vecs,
          out.data_ptr<T>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::pair<at::Tensor, at::Tensor> merge_rows_backward_cuda(const at::Tensor& g, const at::Tensor& pos,
                                                           const at::Tensor& active, int64_t upd_rows,
                                                           bool want_prev, bool want_upd) {
  check_merge_inputs("merge_rows_backward_cuda", g, pos, active);
  const int64_t rows = g.size(0), F = g.size(1);
  at::Tensor grad_prev = want_prev ? at::empty_like(g) : at::Tensor();
  at::Tensor grad_upd = want_upd ? at::empty({upd_rows, F}, g.options()) : at::Tensor();
  if (rows * F == 0 || (!want_prev && !want_upd)) return {grad_prev, grad_upd};
  const int threads = 256;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, g.scalar_type(), "merge_rows_backward_cuda", [&] {
    using T = scalar_t;
    with_vector_width<T>(F, {&g, &grad_prev, &grad_upd}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const int64_t vecs = F / V;
      merge_rows_backward_kernel<T, V><<<grid_for(rows * vecs, threads), threads, 0, stream>>>(
          g.data_ptr<T>(), pos.data_ptr<int32_t>(), active.data_ptr<bool>(), rows, vecs,
          want_prev ? grad_prev.data_ptr<T>() : nullptr, want_upd ? grad_upd.data_ptr<T>() : nullptr);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_prev, grad_upd};
}

at::Tensor band_diff_cuda(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos,
                          const at::Tensor& band_rows, const at::Tensor& bias, bool relu) {
  check_merge_inputs("band_diff_cuda", prev, pos, at::Tensor(), upd);
  TORCH_CHECK(band_rows.scalar_type() == at::kLong && band_rows.is_contiguous(), "band_diff_cuda: band_rows int64");
  TORCH_CHECK(!bias.defined() || (bias.is_contiguous() && bias.numel() == prev.size(1) &&
                                  bias.scalar_type() == prev.scalar_type() && bias.device() == prev.device()),
              "band_diff_cuda: bias must be one contiguous value per column, of prev's type and device");
  const int64_t count = band_rows.numel(), F = prev.size(1);
  at::Tensor diff = at::empty({count, F}, prev.options());
  if (count * F == 0) return diff;
  const int threads = 256;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, prev.scalar_type(), "band_diff_cuda", [&] {
    using T = scalar_t;
    with_vector_width<T>(F, {&prev, &upd, &diff, &bias}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const int64_t vecs = F / V;
      band_diff_kernel<T, V><<<grid_for(count * vecs, threads), threads, 0, stream>>>(
          prev.data_ptr<T>(), upd.data_ptr<T>(), pos.data_ptr<int32_t>(), band_rows.data_ptr<int64_t>(),
          bias.defined() ? bias.data_ptr<T>() : nullptr, relu, count, vecs, diff.data_ptr<T>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return diff;
}

}  // namespace adgnn::kernels
