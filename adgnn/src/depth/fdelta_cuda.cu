// CUDA kernels of f_delta (fdelta.cpp): its per-pair input, a warp per pair (8 pairs per block),
// its lanes over the feature vectors (float4 / double2 where the width allows); that input's
// gradient summed per node (a warp per node, a block per node of kPairHubMin pairs or more); the
// MLP's output layer and its hidden layer's gradient, a warp per row. Each output is written by
// one thread, and sums run in a fixed order: no atomics, the same bits every run. The per-pair
// tensors (the MLP's input, hidden layer and their gradients) are stored as S: T, or bfloat16
// with T = float (--fdelta-precision bf16); every sum runs in T.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <limits>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

template <typename T>
__device__ T sign_of(T d) {
  return T((d > T(0)) - (d < T(0)));
}

constexpr int kPairsPerBlock = 8;

template <typename T, typename S, int V>
__global__ void pair_features_kernel(const int32_t* __restrict__ row, const int32_t* __restrict__ col,
                                     const T* __restrict__ z, int64_t pairs, int64_t F,
                                     S* __restrict__ out) {
  using VT = Vec<T, V>;
  using VS = Vec<S, V>;
  const int64_t vecs = F / V;
  for (int64_t p = int64_t(blockIdx.x) * kPairsPerBlock + threadIdx.y; p < pairs;
       p += int64_t(gridDim.x) * kPairsPerBlock) {
    const VT* zr = reinterpret_cast<const VT*>(z + int64_t(row[p]) * F);
    const VT* zc = reinterpret_cast<const VT*>(z + int64_t(col[p]) * F);
    VS* prod = reinterpret_cast<VS*>(out + p * 2 * F);
    VS* diff = reinterpret_cast<VS*>(out + p * 2 * F + F);
    for (int64_t v = threadIdx.x; v < vecs; v += 32) {
      const VT a = zr[v], b = zc[v];
      VS m, d;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        m.v[k] = S(a.v[k] * b.v[k]);
        d.v[k] = S(a.v[k] > b.v[k] ? a.v[k] - b.v[k] : b.v[k] - a.v[k]);
      }
      prod[v] = m;
      diff[v] = d;
    }
  }
}

// z's gradient from the input's, gx [P, 2F] = [g_prod, g_diff] per pair: node u's row is the sum,
// over the pairs that read it (its own pairs, then the pairs whose other end it is, in the
// transpose's order), of g_prod * z_other + g_diff * sign(z_u - z_other) (either end: the input
// is symmetric). Saves a [P, F] gradient per end and two passes summing them.
// A warp per node, except the listed hubs (long_nodes, kPairHubMin pairs or more): blocks
// [0, num_long) take one hub each, their warps every warps-th pair, and add the warps' sums in
// warp order; the other blocks' warps take a node each (skipping the hubs). One launch, so the
// hubs' long sums run beside the rest rather than after it. Rows narrower than a warp's vectors
// split the warp into G groups of LANES lanes, each group taking every G-th pair; the groups'
// sums are added by shuffles in a fixed order. Lanes own vectors c0 + sub of the row, chunk by
// chunk. (Measured on an H200 with `adgnn bench`, docs/decisions/fdelta-pairs.md: loading a warp's pair
// indices at once and keeping several pairs in flight is slower than this plain loop for bfloat16
// rows and no faster for float32 ones once the hubs are split off; the hubs set the kernel's time.)
template <typename T, typename S, int V, int LANES>
__global__ void pair_grad_sums_kernel(const int64_t* __restrict__ prow, const int32_t* __restrict__ pcol,
                                      const int64_t* __restrict__ trow, const int64_t* __restrict__ tpair,
                                      const int32_t* __restrict__ tother, int64_t rows, int64_t num_src,
                                      const int64_t* __restrict__ long_nodes, int64_t num_long, int64_t long_min,
                                      const T* __restrict__ z, const S* __restrict__ gx, int64_t F,
                                      T* __restrict__ out) {
  using VT = Vec<T, V>;
  using VS = Vec<S, V>;
  constexpr int G = 32 / LANES;
  const int64_t vecs = F / V;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int sub = lane % LANES, grp = lane / LANES;
  const bool hub = int64_t(blockIdx.x) < num_long;
  int64_t u, first, step;
  if (hub) {
    u = long_nodes[blockIdx.x];
    first = warp;
    step = warps;
  } else {
    u = (int64_t(blockIdx.x) - num_long) * warps + warp;
    if (u >= num_src) return;
    first = 0;
    step = 1;
  }
  const int64_t own_begin = u < rows ? prow[u] : 0, own = u < rows ? prow[u + 1] - own_begin : 0;
  const int64_t t_begin = trow[u], total = own + trow[u + 1] - t_begin;
  if (!hub && total >= long_min) return;
  extern __shared__ unsigned char shared_raw[];
  T* staged = reinterpret_cast<T*>(shared_raw);  // [warps, LANES V] (hub blocks)
  const VT* zu = reinterpret_cast<const VT*>(z + u * F);
  for (int64_t c0 = 0; c0 < vecs; c0 += LANES) {
    const int64_t v = c0 + sub;
    const bool mine = v < vecs;
    T acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = T(0);
    if (mine) {
      const VT a = zu[v];
      for (int64_t i = first + grp * step; i < total; i += G * step) {
        int64_t p, other;
        if (i < own) {
          p = own_begin + i;
          other = pcol[p];
        } else {
          p = tpair[t_begin + i - own];
          other = tother[t_begin + i - own];
        }
        const VT b = reinterpret_cast<const VT*>(z + other * F)[v];
        const VS m = reinterpret_cast<const VS*>(gx + p * 2 * F)[v];
        const VS d = reinterpret_cast<const VS*>(gx + p * 2 * F + F)[v];
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += T(m.v[k]) * b.v[k] + T(d.v[k]) * sign_of(a.v[k] - b.v[k]);
      }
    }
    // The groups' sums, in a fixed order (group 0 ends with the total).
#pragma unroll
    for (int off = LANES; off < 32; off *= 2)
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += __shfl_down_sync(0xffffffffu, acc[k], off);
    if (!hub) {
      if (grp == 0 && mine) {
        VT o;
#pragma unroll
        for (int k = 0; k < V; ++k) o.v[k] = acc[k];
        reinterpret_cast<VT*>(out + u * F)[v] = o;
      }
    } else {
      if (grp == 0 && mine)
#pragma unroll
        for (int k = 0; k < V; ++k) staged[(warp * LANES + sub) * V + k] = acc[k];
      __syncthreads();
      for (int64_t e = threadIdx.x; e < LANES * V; e += blockDim.x) {
        if (c0 * V + e >= F) continue;
        T sum = T(0);
        for (int w = 0; w < warps; ++w) sum += staged[w * LANES * V + e];
        out[u * F + c0 * V + e] = sum;
      }
      __syncthreads();
    }
  }
}

// out[p, k] = g[p] * w2[k] where hidden[p, k] > 0. Warps stride over rows, each lane owning the
// same J vectors of V columns in every row, so that it also sums its columns over its rows: out
// (the first bias's gradient) and relu(hidden) g (the output weights' gradient). The block then
// adds its warps' sums in a fixed order into partial[block] = [out sums (H), weight sums (H)]
// (no other pass over out or hidden; deterministic for a given grid).
template <typename T, typename S, int V, int J>
__global__ void hidden_grad_kernel(const T* __restrict__ g, const T* __restrict__ w2, const S* __restrict__ hidden,
                                   int64_t rows, int64_t H, S* __restrict__ out, T* __restrict__ partial) {
  using VT = Vec<S, V>;
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
        const T hk = T(h.v[k]);
        const bool on = hk > T(0);
        const T ok = on ? gp * w2[v * V + k] : T(0);
        o.v[k] = S(ok);
        acc[j][k] += ok;
        accw[j][k] += on ? hk * gp : T(0);
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
// vectors, then a butterfly over the lanes (a fixed order). A warp takes R consecutive rows at a
// time, their loads issued together: with one row in flight a warp would wait on each load in
// turn (a bfloat16 row of 128 is only 256 bytes). Each row's sum is the same.
template <typename T, typename S, int V, int R>
__global__ void relu_dot_kernel(const S* __restrict__ hidden, const T* __restrict__ w2, const T* __restrict__ b2,
                                int64_t rows, int64_t H, T* __restrict__ logit) {
  using VT = Vec<S, V>;
  const int64_t vecs = H / V;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const T bias = b2[0];
  for (int64_t p0 = (int64_t(blockIdx.x) * warps + warp) * R; p0 < rows; p0 += int64_t(gridDim.x) * warps * R) {
    T sum[R];
#pragma unroll
    for (int r = 0; r < R; ++r) sum[r] = T(0);
    for (int64_t v = lane; v < vecs; v += 32) {
      VT h[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (p0 + r < rows) h[r] = reinterpret_cast<const VT*>(hidden + (p0 + r) * H)[v];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (p0 + r >= rows) break;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const T hk = T(h[r].v[k]);
          sum[r] += hk > T(0) ? hk * w2[v * V + k] : T(0);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], off);
      if (lane == 0 && p0 + r < rows) logit[p0 + r] = sum[r] + bias;
    }
  }
}

dim3 pair_grid(int64_t pairs) {
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((pairs + kPairsPerBlock - 1) / kPairsPerBlock, int64_t(sms) * 16);
  return dim3(unsigned(std::max<int64_t>(blocks, 1)));
}

// Runs f(T, S) for z's type T and the storage type S: bfloat16 where asked for (T = float only:
// fdelta.cpp never asks otherwise), else T.
template <typename F>
void dispatch_storage(at::ScalarType t, at::ScalarType storage, const char* name, F f) {
  TORCH_CHECK(storage == t || (storage == at::kBFloat16 && t == at::kFloat), name,
              ": per-pair storage must be the input's type, or bfloat16 for float32");
  if (t == at::kFloat && storage == at::kBFloat16) f(float{}, c10::BFloat16{});
  else if (t == at::kFloat) f(float{}, float{});
  else if (t == at::kDouble) f(double{}, double{});
  else TORCH_CHECK(false, name, ": expected float32 or float64, got ", t);
}

}  // namespace

at::Tensor pair_features_cuda(const at::Tensor& row, const at::Tensor& col, const at::Tensor& z_in,
                              at::ScalarType storage) {
  const at::Tensor z = z_in.contiguous();
  const int64_t P = row.numel(), F = z.size(1);
  at::Tensor out = at::empty({P, 2 * F}, z.options().dtype(storage));
  if (P == 0 || F == 0) return out;
  const dim3 block(32, kPairsPerBlock);
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_storage(z.scalar_type(), storage, "pair_features_cuda", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    constexpr int V = 16 / sizeof(T);
    auto launch = [&](auto kernel) {
      kernel<<<pair_grid(P), block, 0, stream>>>(row.data_ptr<int32_t>(), col.data_ptr<int32_t>(), z.data_ptr<T>(),
                                                 P, F, reinterpret_cast<S*>(out.data_ptr()));
    };
    if (vectorisable<T, V>(F, {&z}) && vectorisable<S, V>(F, {&out})) launch(pair_features_kernel<T, S, V>);
    else launch(pair_features_kernel<T, S, 1>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor pair_grad_sums_cuda(const PairGradIndex& ix, const at::Tensor& z_in, const at::Tensor& gx_in) {
  const at::Tensor z = z_in.contiguous(), gx = gx_in.contiguous();
  const int64_t num_src = z.size(0), F = z.size(1), rows = ix.rowptr.numel() - 1;
  TORCH_CHECK(ix.t_rowptr.numel() == num_src + 1 && gx.size(1) == 2 * F, "pair_grad_sums_cuda: shapes");
  at::Tensor out = at::empty({num_src, F}, z.options());
  if (num_src == 0 || F == 0) return out;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t num_long = ix.long_nodes.defined() ? ix.long_nodes.numel() : 0;
  dispatch_storage(z.scalar_type(), gx.scalar_type(), "pair_grad_sums_cuda", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    constexpr int V = 16 / sizeof(T);
    constexpr int kThreads = 256;
    const bool vec = vectorisable<T, V>(F, {&z, &out}) && vectorisable<S, V>(2 * F, {&gx});
    const int64_t vecs = vec ? F / V : F;
    auto launch = [&](auto kernel, int lanes) {
      const int64_t blocks = num_long + (num_src + kThreads / 32 - 1) / (kThreads / 32);
      const size_t shared = size_t(kThreads / 32) * lanes * (vec ? V : 1) * sizeof(T);
      kernel<<<unsigned(blocks), kThreads, shared, stream>>>(
          ix.rowptr.data_ptr<int64_t>(), ix.col.data_ptr<int32_t>(), ix.t_rowptr.data_ptr<int64_t>(),
          ix.t_pair.data_ptr<int64_t>(), ix.t_other.data_ptr<int32_t>(), rows, num_src,
          num_long ? ix.long_nodes.data_ptr<int64_t>() : nullptr, num_long,
          num_long ? kPairHubMin : std::numeric_limits<int64_t>::max(), z.data_ptr<T>(),
          reinterpret_cast<const S*>(gx.data_ptr()), F, out.data_ptr<T>());
    };
    // Lanes per pair: the row's vectors, rounded up to a power of two (at most a warp).
    if (vec && vecs <= 8) launch(pair_grad_sums_kernel<T, S, V, 8>, 8);
    else if (vec && vecs <= 16) launch(pair_grad_sums_kernel<T, S, V, 16>, 16);
    else if (vec) launch(pair_grad_sums_kernel<T, S, V, 32>, 32);
    else if (vecs <= 8) launch(pair_grad_sums_kernel<T, S, 1, 8>, 8);
    else if (vecs <= 16) launch(pair_grad_sums_kernel<T, S, 1, 16>, 16);
    else launch(pair_grad_sums_kernel<T, S, 1, 32>, 32);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

FDeltaHiddenGrad fdelta_hidden_grad_cuda(const at::Tensor& g_in, const at::Tensor& w2_in, const at::Tensor& hidden_in) {
  const at::Tensor g = g_in.contiguous(), w2 = w2_in.contiguous(), hidden = hidden_in.contiguous();
  const int64_t P = hidden.size(0), H = hidden.size(1);
  at::Tensor out = at::empty_like(hidden);
  const auto sum_opts = g.options();
  if (P == 0 || H == 0) return {out, at::zeros({H}, sum_opts), at::zeros({H}, sum_opts)};
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((P + kWarps - 1) / kWarps, int64_t(sms) * 8);
  at::Tensor partial = at::empty({blocks, 2 * H}, sum_opts);
  const auto stream = at::cuda::getCurrentCUDAStream();
  bool launched = false;
  dispatch_storage(g.scalar_type(), hidden.scalar_type(), "fdelta_hidden_grad_cuda", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    constexpr int V = 16 / sizeof(T);
    const bool vec = vectorisable<S, V>(H, {&hidden, &out});
    const int64_t vecs = vec ? H / V : H;
    const size_t shared = size_t(kWarps) * 2 * H * sizeof(T);
    if (shared > 48 * 1024) return;  // wider than any hidden layer we run: the fallback below
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(blocks), kThreads, shared, stream>>>(g.data_ptr<T>(), w2.data_ptr<T>(),
                                                            reinterpret_cast<const S*>(hidden.data_ptr()), P, H,
                                                            reinterpret_cast<S*>(out.data_ptr()), partial.data_ptr<T>());
      launched = true;
    };
    if (vec && vecs <= 32) launch(hidden_grad_kernel<T, S, V, 1>);
    else if (vec && vecs <= 64) launch(hidden_grad_kernel<T, S, V, 2>);
    else if (vec && vecs <= 128) launch(hidden_grad_kernel<T, S, V, 4>);
    else if (!vec && vecs <= 32) launch(hidden_grad_kernel<T, S, 1, 1>);
    else if (!vec && vecs <= 128) launch(hidden_grad_kernel<T, S, 1, 4>);
  });
  if (!launched) {  // very wide rows: the same values by ATen operations
    const at::Tensor h = hidden.to(g.scalar_type());
    out = at::threshold_backward(g.unsqueeze(1) * w2.view({1, H}), h, 0);
    return {out.to(hidden.scalar_type()), out.sum(0), at::mv(h.clamp_min(0).t(), g)};
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor sums = partial.sum(0);
  return {out, sums.slice(0, 0, H), sums.slice(0, H, 2 * H)};
}

at::Tensor fdelta_relu_dot_cuda(const at::Tensor& hidden_in, const at::Tensor& w2_in, const at::Tensor& b2_in) {
  const at::Tensor hidden = hidden_in.contiguous(), w2 = w2_in.contiguous(), b2 = b2_in.contiguous();
  const int64_t P = hidden.size(0), H = hidden.size(1);
  at::Tensor logit = at::empty({P}, w2.options());
  if (P == 0) return logit;
  constexpr int kThreads = 256, kWarps = kThreads / 32, kRows = 4;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((P + kWarps * kRows - 1) / (kWarps * kRows), int64_t(sms) * 8);
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_storage(w2.scalar_type(), hidden.scalar_type(), "fdelta_relu_dot_cuda", [&](auto t, auto s) {
    using T = decltype(t);
    using S = decltype(s);
    constexpr int V = 16 / sizeof(T);
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(blocks), kThreads, 0, stream>>>(reinterpret_cast<const S*>(hidden.data_ptr()),
                                                       w2.data_ptr<T>(), b2.data_ptr<T>(), P, H, logit.data_ptr<T>());
    };
    if (vectorisable<S, V>(H, {&hidden})) launch(relu_dot_kernel<T, S, V, kRows>);
    else launch(relu_dot_kernel<T, S, 1, kRows>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return logit;
}

}  // namespace adgnn::kernels
