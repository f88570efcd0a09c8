// CUDA kernels of f_delta's per-pair input (fdelta.cpp): a warp per pair (8 pairs per block),
// its lanes over the feature vectors (float4 / double2 where the width allows). Each pair's
// output is its own: no atomics, the same bits on every run.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "kernels.h"

namespace adgnn::kernels {

namespace {

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <typename T>
__device__ T sign_of(T d) {
  return T((d > T(0)) - (d < T(0)));
}

constexpr int kPairsPerBlock = 8;

template <typename T, int V>
__global__ void pair_features_kernel(const int32_t* __restrict__ row, const int32_t* __restrict__ col,
                                     const T* __restrict__ z, int64_t pairs, int64_t F,
                                     T* __restrict__ out) {
  using VT = Vec<T, V>;
  const int64_t vecs = F / V;
  for (int64_t p = int64_t(blockIdx.x) * kPairsPerBlock + threadIdx.y; p < pairs;
       p += int64_t(gridDim.x) * kPairsPerBlock) {
    const VT* zr = reinterpret_cast<const VT*>(z + int64_t(row[p]) * F);
    const VT* zc = reinterpret_cast<const VT*>(z + int64_t(col[p]) * F);
    VT* prod = reinterpret_cast<VT*>(out + p * 2 * F);
    VT* diff = reinterpret_cast<VT*>(out + p * 2 * F + F);
    for (int64_t v = threadIdx.x; v < vecs; v += 32) {
      const VT a = zr[v], b = zc[v];
      VT m, d;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        m.v[k] = a.v[k] * b.v[k];
        d.v[k] = a.v[k] > b.v[k] ? a.v[k] - b.v[k] : b.v[k] - a.v[k];
      }
      prod[v] = m;
      diff[v] = d;
    }
  }
}

template <typename T, int V>
__global__ void pair_features_backward_kernel(const int32_t* __restrict__ row, const int32_t* __restrict__ col,
                                              const T* __restrict__ z, const T* __restrict__ grad,
                                              int64_t pairs, int64_t F, T* __restrict__ grad_row,
                                              T* __restrict__ grad_col) {
  using VT = Vec<T, V>;
  const int64_t vecs = F / V;
  for (int64_t p = int64_t(blockIdx.x) * kPairsPerBlock + threadIdx.y; p < pairs;
       p += int64_t(gridDim.x) * kPairsPerBlock) {
    const VT* zr = reinterpret_cast<const VT*>(z + int64_t(row[p]) * F);
    const VT* zc = reinterpret_cast<const VT*>(z + int64_t(col[p]) * F);
    const VT* gm = reinterpret_cast<const VT*>(grad + p * 2 * F);
    const VT* gd = reinterpret_cast<const VT*>(grad + p * 2 * F + F);
    VT* outr = reinterpret_cast<VT*>(grad_row + p * F);
    VT* outc = reinterpret_cast<VT*>(grad_col + p * F);
    for (int64_t v = threadIdx.x; v < vecs; v += 32) {
      const VT a = zr[v], b = zc[v], m = gm[v], d = gd[v];
      VT r, c;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const T s = sign_of(a.v[k] - b.v[k]);
        r.v[k] = m.v[k] * b.v[k] + d.v[k] * s;
        c.v[k] = m.v[k] * a.v[k] - d.v[k] * s;
      }
      outr[v] = r;
      outc[v] = c;
    }
  }
}

// out[p, k] = g[p] * w2[k] where hidden[p, k] > 0: a grid-stride loop over vectors of V.
template <typename T, int V>
__global__ void hidden_grad_kernel(const T* __restrict__ g, const T* __restrict__ w2, const T* __restrict__ hidden,
                                   int64_t rows, int64_t H, T* __restrict__ out) {
  using VT = Vec<T, V>;
  const int64_t vecs_per_row = H / V, total = rows * vecs_per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / vecs_per_row, v = i - p * vecs_per_row;
    const VT h = reinterpret_cast<const VT*>(hidden)[i];
    const T gp = g[p];
    VT o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = h.v[k] > T(0) ? gp * w2[v * V + k] : T(0);
    reinterpret_cast<VT*>(out)[i] = o;
  }
}

// Vectors of V elements where every row starts on such a boundary (the width is a multiple of
// V and the tensors' storage is aligned), else single elements.
template <typename T, int V>
bool vectorisable(int64_t F, std::initializer_list<const at::Tensor*> ts) {
  if (F % V != 0) return false;
  for (const at::Tensor* t : ts)
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % (sizeof(T) * V) != 0) return false;
  return true;
}

dim3 pair_grid(int64_t pairs) {
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((pairs + kPairsPerBlock - 1) / kPairsPerBlock, int64_t(sms) * 16);
  return dim3(unsigned(std::max<int64_t>(blocks, 1)));
}

}  // namespace

at::Tensor pair_features_cuda(const at::Tensor& row, const at::Tensor& col, const at::Tensor& z_in) {
  const at::Tensor z = z_in.contiguous();
  const int64_t P = row.numel(), F = z.size(1);
  at::Tensor out = at::empty({P, 2 * F}, z.options());
  if (P == 0 || F == 0) return out;
  const dim3 block(32, kPairsPerBlock);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "pair_features_cuda", [&] {
    constexpr int V = 16 / sizeof(scalar_t);
    if (vectorisable<scalar_t, V>(F, {&z, &out}))
      pair_features_kernel<scalar_t, V><<<pair_grid(P), block, 0, stream>>>(
          row.data_ptr<int32_t>(), col.data_ptr<int32_t>(), z.data_ptr<scalar_t>(), P, F, out.data_ptr<scalar_t>());
    else
      pair_features_kernel<scalar_t, 1><<<pair_grid(P), block, 0, stream>>>(
          row.data_ptr<int32_t>(), col.data_ptr<int32_t>(), z.data_ptr<scalar_t>(), P, F, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::pair<at::Tensor, at::Tensor> pair_features_backward_cuda(const at::Tensor& row, const at::Tensor& col,
                                                              const at::Tensor& z_in, const at::Tensor& grad_in) {
  const at::Tensor z = z_in.contiguous(), grad = grad_in.contiguous();
  const int64_t P = row.numel(), F = z.size(1);
  at::Tensor grad_row = at::empty({P, F}, z.options()), grad_col = at::empty({P, F}, z.options());
  if (P == 0 || F == 0) return {grad_row, grad_col};
  const dim3 block(32, kPairsPerBlock);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "pair_features_backward_cuda", [&] {
    constexpr int V = 16 / sizeof(scalar_t);
    if (vectorisable<scalar_t, V>(F, {&z, &grad, &grad_row, &grad_col}))
      pair_features_backward_kernel<scalar_t, V><<<pair_grid(P), block, 0, stream>>>(
          row.data_ptr<int32_t>(), col.data_ptr<int32_t>(), z.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), P,
          F, grad_row.data_ptr<scalar_t>(), grad_col.data_ptr<scalar_t>());
    else
      pair_features_backward_kernel<scalar_t, 1><<<pair_grid(P), block, 0, stream>>>(
          row.data_ptr<int32_t>(), col.data_ptr<int32_t>(), z.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), P,
          F, grad_row.data_ptr<scalar_t>(), grad_col.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_row, grad_col};
}

at::Tensor fdelta_hidden_grad_cuda(const at::Tensor& g_in, const at::Tensor& w2_in, const at::Tensor& hidden_in) {
  const at::Tensor g = g_in.contiguous(), w2 = w2_in.contiguous(), hidden = hidden_in.contiguous();
  const int64_t P = hidden.size(0), H = hidden.size(1);
  at::Tensor out = at::empty_like(hidden);
  if (P == 0 || H == 0) return out;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(hidden.scalar_type(), "fdelta_hidden_grad_cuda", [&] {
    constexpr int V = 16 / sizeof(scalar_t);
    const bool vec = vectorisable<scalar_t, V>(H, {&hidden, &out});
    const int64_t total = P * (vec ? H / V : H);
    const dim3 grid(unsigned(std::min<int64_t>((total + 255) / 256, int64_t(sms) * 16)));
    if (vec)
      hidden_grad_kernel<scalar_t, V><<<grid, 256, 0, stream>>>(g.data_ptr<scalar_t>(), w2.data_ptr<scalar_t>(),
                                                                hidden.data_ptr<scalar_t>(), P, H, out.data_ptr<scalar_t>());
    else
      hidden_grad_kernel<scalar_t, 1><<<grid, 256, 0, stream>>>(g.data_ptr<scalar_t>(), w2.data_ptr<scalar_t>(),
                                                                hidden.data_ptr<scalar_t>(), P, H, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace adgnn::kernels
