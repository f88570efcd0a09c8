// The products of a linear layer over a few rows (AD's deeper layers: hundreds to thousands of
// rows by 128 x 128) without cuBLAS. Each cuBLAS call costs several times a plain launch's host
// time (ATen's setup and cuBLAS's heuristic, more for a row count it has not seen), and AD's step
// has ~9 of them: on a host that falls behind the device they bound the step. These kernels are
// slower on the device than cuBLAS's (32 x 32 tiles of 64 threads are slower still), which a host
// that keeps up pays (docs/decisions/small-gemm.md). Each output element is summed by one thread in a fixed
// order, and the weight gradient's split over row chunks adds the chunks in chunk order: the same
// bits on every run.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

constexpr int kTile = 64;     // output tile (rows and columns) of a block
constexpr int kStep = 16;     // reduction elements staged per step
constexpr int kThreads = 256; // 16 x 16 threads, each 4 x 4 outputs (strided by 16)

// acc[i][j] += sum over the staged k of as[k][ty + 16 i] bs[k][tx + 16 j]: a thread's 4 x 4
// outputs, strided by 16, from one staged step of both operands (k in order).
template <typename T>
__device__ __forceinline__ void add_staged_products(const T (&as)[kStep][kTile + 1], const T (&bs)[kStep][kTile + 1],
                                                    int tx, int ty, T (&acc)[4][4]) {
#pragma unroll
  for (int k = 0; k < kStep; ++k) {
    T av[4], bv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) av[i] = as[k][ty + 16 * i];
#pragma unroll
    for (int j = 0; j < 4; ++j) bv[j] = bs[k][tx + 16 * j];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// c[m, n] = a[m, kdim] b (+ bias) (ReLU), b(k, j) = b[k * b_row + j * b_col] (w: b_row = n,
// b_col = 1; w's transpose: b_row = 1, b_col = kdim), a and c row-major. The ReLU keeps NaN.
template <typename T, bool Bias, bool Relu>
__global__ void __launch_bounds__(kThreads)
    small_gemm_kernel(const T* __restrict__ a, int64_t m, int64_t kdim, const T* __restrict__ b, int64_t b_row,
                      int64_t b_col, int64_t n, const T* __restrict__ bias, T* __restrict__ c) {
  __shared__ T as[kStep][kTile + 1];
  __shared__ T bs[kStep][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  T acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = T(0);
  for (int64_t k0 = 0; k0 < kdim; k0 += kStep) {
    for (int e = threadIdx.x; e < kTile * kStep; e += kThreads) {
      const int rr = e / kStep, ka = e % kStep;  // a: consecutive threads along k
      const int64_t r = r0 + rr, k = k0 + ka;
      as[ka][rr] = r < m && k < kdim ? a[r * kdim + k] : T(0);
      const int kb = e / kTile, cc = e % kTile;  // b: consecutive threads along the columns
      const int64_t kk = k0 + kb, col = c0 + cc;
      bs[kb][cc] = kk < kdim && col < n ? b[kk * b_row + col * b_col] : T(0);
    }
    __syncthreads();
    add_staged_products(as, bs, tx, ty, acc);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = r0 + ty + 16 * i;
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t col = c0 + tx + 16 * j;
      if (col >= n) continue;
      T v = acc[i][j];
      if constexpr (Bias) v += bias[col];
      if constexpr (Relu) v = v < T(0) ? T(0) : v;
      c[r * n + col] = v;
    }
  }
}

// c[ka, n] = a[m, ka]^T g[m, n] (a weight's gradient). Block (x, y, z): the output tile (x: columns,
// y: rows of c) over rows [z rows_per_chunk, (z + 1) rows_per_chunk) of a and g. One chunk: c
// directly. Several: each writes its partial tile to partial[z], and the tile's last block (counted
// in done[tile], zero before the launch) adds the chunks in order into c.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    small_gemm_tn_kernel(const T* __restrict__ a, const T* __restrict__ g, int64_t m, int64_t ka, int64_t n,
                         int64_t rows_per_chunk, T* __restrict__ partial, unsigned* __restrict__ done,
                         T* __restrict__ c) {
  __shared__ T as[kStep][kTile + 1];
  __shared__ T gs[kStep][kTile + 1];
  __shared__ bool last;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t i0 = int64_t(blockIdx.y) * kTile, j0 = int64_t(blockIdx.x) * kTile;
  const int64_t begin = int64_t(blockIdx.z) * rows_per_chunk, end = std::min(m, begin + rows_per_chunk);
  T acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = T(0);
  for (int64_t r0 = begin; r0 < end; r0 += kStep) {
    for (int e = threadIdx.x; e < kTile * kStep; e += kThreads) {
      const int rr = e / kTile, cc = e % kTile;  // consecutive threads along a row
      const int64_t r = r0 + rr;
      as[rr][cc] = r < end && i0 + cc < ka ? a[r * ka + i0 + cc] : T(0);
      gs[rr][cc] = r < end && j0 + cc < n ? g[r * n + j0 + cc] : T(0);
    }
    __syncthreads();
    add_staged_products(as, gs, tx, ty, acc);
    __syncthreads();
  }
  const int64_t chunks = gridDim.z;
  T* out = chunks == 1 ? c : partial + int64_t(blockIdx.z) * ka * n;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t row = i0 + ty + 16 * i, col = j0 + tx + 16 * j;
      if (row < ka && col < n) out[row * n + col] = acc[i][j];
    }
  if (chunks == 1) return;
  __threadfence();  // this block's partial tile, visible before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* tile_done = done + blockIdx.y * gridDim.x + blockIdx.x;
    last = atomicAdd(tile_done, 1u) == unsigned(chunks - 1);
    if (last) *tile_done = 0;  // (stream_counters: zero for the next grid)
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t row = i0 + ty + 16 * i, col = j0 + tx + 16 * j;
      if (row >= ka || col >= n) continue;
      T sum = T(0);
      for (int64_t z = 0; z < chunks; ++z) sum += __ldcg(partial + (z * ka + row) * n + col);
      c[row * n + col] = sum;
    }
}

unsigned tiles(int64_t extent) { return unsigned((extent + kTile - 1) / kTile); }

void check_small(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda() && t.dim() == 2 && t.is_contiguous() &&
                  (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble),
              what, ": a contiguous float32 / float64 matrix on the GPU");
}

}  // namespace

int64_t& small_linear_max_macs() {
  static int64_t macs = int64_t(1) << 27;  // 8,192 rows by 128 x 128
  return macs;
}

bool small_linear_applies(const at::Tensor& x, const at::Tensor& w) {
  const int64_t rows = x.dim() == 2 ? x.size(0) : 0;
  return x.is_cuda() && w.is_cuda() && x.dim() == 2 && x.is_contiguous() && w.dim() == 2 &&
         x.scalar_type() == w.scalar_type() &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) && rows * w.size(0) * w.size(1) > 0 &&
         rows * w.size(0) * w.size(1) <= small_linear_max_macs() && rows <= 65535 * int64_t(kTile);
}

at::Tensor small_linear_cuda(const at::Tensor& x, const at::Tensor& w_in, const at::Tensor& b_in, bool relu) {
  check_small(x, "small_linear_cuda x");
  const at::Tensor w = w_in.contiguous(), b = b_in.defined() ? b_in.contiguous() : b_in;
  const int64_t m = x.size(0), k = x.size(1), n = w.size(1);
  TORCH_CHECK(w.dim() == 2 && w.size(0) == k && w.scalar_type() == x.scalar_type() && w.device() == x.device() &&
                  (!b.defined() || (b.numel() == n && b.scalar_type() == x.scalar_type() && b.device() == x.device())),
              "small_linear_cuda: x [m, k], w [k, n], b [n] of one type on one device");
  at::Tensor out = at::empty({m, n}, x.options());
  if (m == 0 || n == 0) return out;
  if (k == 0) return b.defined() ? (relu ? b.clamp_min(0) : b).expand({m, n}).contiguous() : out.zero_();
  const dim3 grid(tiles(n), tiles(m));
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "small_linear_cuda", [&] {
    auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, stream>>>(x.data_ptr<scalar_t>(), m, k, w.data_ptr<scalar_t>(), n, 1, n,
                                            b.defined() ? b.data_ptr<scalar_t>() : nullptr, out.data_ptr<scalar_t>());
    };
    if (b.defined() && relu) launch(small_gemm_kernel<scalar_t, true, true>);
    else if (b.defined()) launch(small_gemm_kernel<scalar_t, true, false>);
    else if (relu) launch(small_gemm_kernel<scalar_t, false, true>);
    else launch(small_gemm_kernel<scalar_t, false, false>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

void small_linear_grad_x_cuda(const at::Tensor& g, const at::Tensor& w_in, at::Tensor& out) {
  check_small(g, "small_linear_grad_x_cuda g");
  const at::Tensor w = w_in.contiguous();
  const int64_t m = g.size(0), n = g.size(1), k = w.size(0);
  TORCH_CHECK(w.dim() == 2 && w.size(1) == n && out.is_contiguous() && out.size(0) == m && out.size(1) == k &&
                  out.scalar_type() == g.scalar_type() && w.scalar_type() == g.scalar_type() &&
                  w.device() == g.device() && out.device() == g.device(),
              "small_linear_grad_x_cuda: g [m, n], w [k, n], out [m, k] of one type on one device");
  if (m == 0 || k == 0) return;
  if (n == 0) {
    out.zero_();
    return;
  }
  const dim3 grid(tiles(k), tiles(m));
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "small_linear_grad_x_cuda", [&] {
    small_gemm_kernel<scalar_t, false, false><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        g.data_ptr<scalar_t>(), m, n, w.data_ptr<scalar_t>(), 1, n, k, nullptr, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor small_linear_grad_w_cuda(const at::Tensor& x, const at::Tensor& g) {
  check_small(x, "small_linear_grad_w_cuda x");
  check_small(g, "small_linear_grad_w_cuda g");
  const int64_t m = x.size(0), k = x.size(1), n = g.size(1);
  TORCH_CHECK(g.size(0) == m && g.scalar_type() == x.scalar_type() && g.device() == x.device(),
              "small_linear_grad_w_cuda: x [m, k], g [m, n] of one type on one device");
  if (m == 0 || k == 0 || n == 0) return at::zeros({k, n}, x.options());
  // Chunks of at least 256 rows (a multiple of kStep), at most 64 of them.
  const int64_t per = std::max<int64_t>(256, ((m + 63) / 64 + kStep - 1) / kStep * kStep);
  const int64_t chunks = (m + per - 1) / per;
  const dim3 grid(tiles(n), tiles(k), unsigned(chunks));
  at::Tensor out = at::empty({k, n}, x.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  at::Tensor partial;
  unsigned* done = nullptr;
  if (chunks > 1) {
    // The chunks' tiles, and one counter per output tile.
    partial = at::empty({chunks * k * n}, x.options());
    done = stream_counters(int64_t(grid.x) * grid.y);
  }
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "small_linear_grad_w_cuda", [&] {
    small_gemm_tn_kernel<scalar_t><<<grid, kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), m, k, n, per,
        partial.defined() ? partial.data_ptr<scalar_t>() : nullptr, done, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace adgnn::kernels
