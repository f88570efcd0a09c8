// CUDA kernels of f_delta (fdelta.cpp): its per-pair input and that input's gradient, a warp per
// pair (8 pairs per block), its lanes over the feature vectors (float4 / double2 where the width
// allows); the MLP's output layer and its hidden layer's gradient, a warp per row. Each output
// is written by one thread, and sums run in a fixed order: no atomics, the same bits every run.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "cuda_rows.cuh"
#include "kernels.h"

namespace adgnn::kernels {

namespace {


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

// out[p, k] = g[p] * w2[k] where hidden[p, k] > 0. Warps stride over rows, each lane owning the
// same J vectors of V columns in every row, so that it also sums its columns over its rows: out
// (the first bias's gradient) and relu(hidden) g (the output weights' gradient). The block then
// adds its warps' sums in a fixed order into partial[block] = [out sums (H), weight sums (H)]
// (no other pass over out or hidden; deterministic for a given grid).
template <typename T, int V, int J>
__global__ void hidden_grad_kernel(const T* __restrict__ g, const T* __restrict__ w2, const T* __restrict__ hidden,
                                   int64_t rows, int64_t H, T* __restrict__ out, T* __restrict__ partial) {
  using VT = Vec<T, V>;
  const int64_t vecs = H / V;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  T acc[J][V], accw[J][V];
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int k = 0; k < V; ++k) acc[j][k] = accw[j][k] = T(0);
  for (int64_t p = int64_t(blockIdx.x) * warps + warp; p < rows; p += int64_t(gridDim.x) * warps) {
    const T gp = g[p];
    const VT* hr = reinterpret_cast<const VT*>(hidden + p * H);
    VT* outr = reinterpret_cast<VT*>(out + p * H);
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int64_t v = lane + 32 * j;
      if (v >= vecs) break;
      const VT h = hr[v];
      VT o;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const bool on = h.v[k] > T(0);
        o.v[k] = on ? gp * w2[v * V + k] : T(0);
        acc[j][k] += o.v[k];
        accw[j][k] += on ? h.v[k] * gp : T(0);
      }
      outr[v] = o;
    }
  }
  extern __shared__ unsigned char shared_raw[];
  T* sums = reinterpret_cast<T*>(shared_raw);  // [warps, 2H]
  stage_lane_sums<T, V, J>(acc, sums + warp * 2 * H, vecs);
  stage_lane_sums<T, V, J>(accw, sums + warp * 2 * H + H, vecs);
  __syncthreads();
  add_warp_sums(sums, warps, 2 * H, partial + int64_t(blockIdx.x) * 2 * H);
}

// logit[p] = sum_k relu(hidden[p, k]) w2[k] + b2[0]: a warp per row, its lanes over the row's
// vectors, then a butterfly over the lanes (a fixed order).
template <typename T, int V>
__global__ void relu_dot_kernel(const T* __restrict__ hidden, const T* __restrict__ w2, const T* __restrict__ b2,
                                int64_t rows, int64_t H, T* __restrict__ logit) {
  using VT = Vec<T, V>;
  const int64_t vecs = H / V;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const T bias = b2[0];
  for (int64_t p = int64_t(blockIdx.x) * warps + warp; p < rows; p += int64_t(gridDim.x) * warps) {
    const VT* hr = reinterpret_cast<const VT*>(hidden + p * H);
    T sum = T(0);
    for (int64_t v = lane; v < vecs; v += 32) {
      const VT h = hr[v];
#pragma unroll
      for (int k = 0; k < V; ++k) sum += h.v[k] > T(0) ? h.v[k] * w2[v * V + k] : T(0);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) logit[p] = sum + bias;
  }
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

FDeltaHiddenGrad fdelta_hidden_grad_cuda(const at::Tensor& g_in, const at::Tensor& w2_in, const at::Tensor& hidden_in) {
  const at::Tensor g = g_in.contiguous(), w2 = w2_in.contiguous(), hidden = hidden_in.contiguous();
  const int64_t P = hidden.size(0), H = hidden.size(1);
  at::Tensor out = at::empty_like(hidden);
  if (P == 0 || H == 0) return {out, at::zeros({H}, hidden.options()), at::zeros({H}, hidden.options())};
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((P + kWarps - 1) / kWarps, int64_t(sms) * 8);
  at::Tensor partial = at::empty({blocks, 2 * H}, hidden.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  bool launched = false;
  AT_DISPATCH_FLOATING_TYPES(hidden.scalar_type(), "fdelta_hidden_grad_cuda", [&] {
    constexpr int V = 16 / sizeof(scalar_t);
    const bool vec = vectorisable<scalar_t, V>(H, {&hidden, &out});
    const int64_t vecs = vec ? H / V : H;
    const size_t shared = size_t(kWarps) * 2 * H * sizeof(scalar_t);
    if (shared > 48 * 1024) return;  // wider than any hidden layer we run: the fallback below
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(blocks), kThreads, shared, stream>>>(g.data_ptr<scalar_t>(), w2.data_ptr<scalar_t>(),
                                                            hidden.data_ptr<scalar_t>(), P, H,
                                                            out.data_ptr<scalar_t>(), partial.data_ptr<scalar_t>());
      launched = true;
    };
    if (vec && vecs <= 32) launch(hidden_grad_kernel<scalar_t, V, 1>);
    else if (vec && vecs <= 64) launch(hidden_grad_kernel<scalar_t, V, 2>);
    else if (vec && vecs <= 128) launch(hidden_grad_kernel<scalar_t, V, 4>);
    else if (!vec && vecs <= 32) launch(hidden_grad_kernel<scalar_t, 1, 1>);
    else if (!vec && vecs <= 128) launch(hidden_grad_kernel<scalar_t, 1, 4>);
  });
  if (!launched) {  // very wide rows: the same values by ATen operations
    out = at::threshold_backward(g.unsqueeze(1) * w2.view({1, H}), hidden, 0);
    return {out, out.sum(0), at::mv(hidden.clamp_min(0).t(), g)};
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor sums = partial.sum(0);
  return {out, sums.slice(0, 0, H), sums.slice(0, H, 2 * H)};
}

at::Tensor fdelta_relu_dot_cuda(const at::Tensor& hidden_in, const at::Tensor& w2_in, const at::Tensor& b2_in) {
  const at::Tensor hidden = hidden_in.contiguous(), w2 = w2_in.contiguous(), b2 = b2_in.contiguous();
  const int64_t P = hidden.size(0), H = hidden.size(1);
  at::Tensor logit = at::empty({P}, hidden.options());
  if (P == 0) return logit;
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((P + kWarps - 1) / kWarps, int64_t(sms) * 8);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(hidden.scalar_type(), "fdelta_relu_dot_cuda", [&] {
    constexpr int V = 16 / sizeof(scalar_t);
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(blocks), kThreads, 0, stream>>>(hidden.data_ptr<scalar_t>(), w2.data_ptr<scalar_t>(),
                                                       b2.data_ptr<scalar_t>(), P, H, logit.data_ptr<scalar_t>());
    };
    if (vectorisable<scalar_t, V>(H, {&hidden})) launch(relu_dot_kernel<scalar_t, V>);
    else launch(relu_dot_kernel<scalar_t, 1>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return logit;
}

}  // namespace adgnn::kernels
