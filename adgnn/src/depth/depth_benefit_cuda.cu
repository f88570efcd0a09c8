// CUDA kernels of the learned depth benefit after f_delta (depth_benefit.h): d+ from the pair
// logits, L_reg's sum, the range of l and eps_tilde, one kernel each way, replacing chains of ATen
// operations whose launches the device would wait for. The elementwise formulas round each
// operation on its own (cuda_rows.cuh's add_rn and the like), as those separate operations do. Sums
// run in a fixed order; the gradients onto pairs add at most two values onto zero: the same bits on
// every run.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

template <typename T>
__device__ T sigmoid_of(T x) {
  return div_rn(T(1), add_rn(T(1), exp(-x)));
}

// A warp per row: the lanes sum every 32nd entry in order, then a butterfly.
template <typename T>
__global__ void sigmoid_row_sums_kernel(const int64_t* __restrict__ rowptr, const int64_t* __restrict__ entry_pair,
                                        const T* __restrict__ pair_logit, int64_t rows, T* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    T s = T(0);
    for (int64_t e = rowptr[r] + lane; e < rowptr[r + 1]; e += 32) s += sigmoid_of(pair_logit[entry_pair[e]]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) out[r] = s;
  }
}

// g_pair (zeroed) += g[r] sigmoid'(logit) for each entry of row r: at most two additions per pair.
template <typename T>
__global__ void sigmoid_row_sums_backward_kernel(const int64_t* __restrict__ rowptr,
                                                 const int64_t* __restrict__ entry_pair,
                                                 const T* __restrict__ pair_logit, const T* __restrict__ g,
                                                 int64_t rows, T* __restrict__ g_pair) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const T gr = g[r];
    for (int64_t e = rowptr[r] + lane; e < rowptr[r + 1]; e += 32) {
      const int64_t p = entry_pair[e];
      const T s = sigmoid_of(pair_logit[p]);
      atomicAdd(g_pair + p, gr * (T(1) - s) * s);
    }
  }
}

// BCE-with-logits: (1 - y) x - log sigmoid(x), log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)).
// Threads stride over the selection, summing in order; the block adds its threads' sums in order
// (partial[block]) and the last block adds the blocks' (finish_block_sums).
template <typename T>
__global__ void pair_bce_sum_kernel(const T* __restrict__ pair_logit, const int64_t* __restrict__ sel_pair,
                                    const T* __restrict__ target, int64_t S, T* __restrict__ partial, unsigned* done,
                                    T* __restrict__ out) {
  __shared__ T sums[kThreads];
  T acc = T(0);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < S; i += int64_t(gridDim.x) * blockDim.x) {
    const T x = pair_logit[sel_pair[i]];
    acc += (T(1) - target[i]) * x - ((x < T(0) ? x : T(0)) - log1p(exp(-fabs(x))));
  }
  sums[threadIdx.x] = acc;
  __syncthreads();
  add_warp_sums(sums, int(blockDim.x), 1, partial + blockIdx.x);  // thread order (one value per "warp")
  __syncthreads();
  finish_block_sums(partial, 1, done, out, sums, int(blockDim.x));
}

template <typename T>
__global__ void pair_bce_sum_backward_kernel(const T* __restrict__ pair_logit, const int64_t* __restrict__ sel_pair,
                                             const T* __restrict__ target, const T* __restrict__ g, int64_t S,
                                             T* __restrict__ g_pair) {
  const T g0 = g[0];
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < S; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = sel_pair[i];
    atomicAdd(g_pair + p, g0 * (sigmoid_of(pair_logit[p]) - target[i]));
  }
}

// l of one row and its derivative in d+ (depth_benefit.h), in the order of the ATen operations
// it replaces: alpha = ((2 d+ + 1) - d) / (d + 1), l = t_max (2 log max(|alpha|, 1e-12) +
// log(d + 1)) (+ offset). The floor passes no gradient, as clamp_min's backward.
template <typename T>
struct LogBenefit {
  T l, dl;
};
template <typename T>
__device__ LogBenefit<T> log_benefit(T dp, T d, const T* offset, int64_t r, T t_max) {
  const T d1 = add_rn(d, T(1));
  const T alpha = div_rn(sub_rn(add_rn(mul_rn(T(2), dp), T(1)), d), d1);
  const T a = fabs(alpha);
  const T floored = (a != a || a >= T(1e-12)) ? a : T(1e-12);
  LogBenefit<T> out;
  out.l = mul_rn(t_max, add_rn(mul_rn(T(2), log(floored)), log(d1)));
  if (offset) out.l = add_rn(out.l, offset[r]);
  const T sign = T((alpha > T(0)) - (alpha < T(0)));
  out.dl = a >= T(1e-12) ? t_max * T(2) / floored * sign / d1 * T(2) : T(0);
  return out;
}

// eps_tilde of l given lo and hi, and its derivative in l (zero where the clamp or hi <= lo cuts).
template <typename T>
__device__ T normalise(T l, double lo, double hi, bool log_normalisation, T& deriv) {
  if (!(hi > lo)) {
    deriv = T(0);
    return T(1);
  }
  T raw, d_raw;
  if (log_normalisation) {
    const T span = T(hi - lo);
    raw = div_rn(sub_rn(l, T(lo)), span);
    d_raw = div_rn(T(1), span);
  } else {
    const double base = exp(lo - hi);
    const T e = exp(sub_rn(l, T(hi))), den = T(1.0 - base);
    raw = div_rn(sub_rn(e, T(base)), den);
    d_raw = div_rn(e, den);
  }
  deriv = (raw >= T(0) && raw <= T(1)) ? d_raw : T(0);
  return raw != raw ? raw : min(max(raw, T(0)), T(1));
}

// NaN wins, as ATen's min and max.
template <typename T>
__device__ T nan_min(T a, T b) {
  return a != a ? a : (b != b ? b : (b < a ? b : a));
}
template <typename T>
__device__ T nan_max(T a, T b) {
  return a != a ? a : (b != b ? b : (b > a ? b : a));
}

// Threads stride over the rows; the block's extremes go to partial[block] = [min, max], and the
// last block writes range = [-min, max] in float64.
template <typename T>
__global__ void depth_benefit_range_kernel(const T* __restrict__ d_plus, const T* __restrict__ d,
                                           const T* __restrict__ offset, int64_t n, T t_max, T* __restrict__ partial,
                                           unsigned* done, double* __restrict__ range) {
  __shared__ T lo_s[kThreads], hi_s[kThreads];
  T lo = T(INFINITY), hi = T(-INFINITY);
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < n; r += int64_t(gridDim.x) * blockDim.x) {
    const T l = log_benefit(d_plus[r], d[r], offset, r, t_max).l;
    lo = nan_min(lo, l);
    hi = nan_max(hi, l);
  }
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int t = 1; t < int(blockDim.x); ++t) {
      lo = nan_min(lo, lo_s[t]);
      hi = nan_max(hi, hi_s[t]);
    }
    partial[2 * blockIdx.x] = lo;
    partial[2 * blockIdx.x + 1] = hi;
  }
  if (!is_last_block(done)) return;
  if (threadIdx.x == 0) {
    lo = T(INFINITY);
    hi = T(-INFINITY);
    for (int64_t b = 0; b < gridDim.x; ++b) {
      lo = nan_min(lo, __ldcg(partial + 2 * b));
      hi = nan_max(hi, __ldcg(partial + 2 * b + 1));
    }
    range[0] = -double(lo);
    range[1] = double(hi);
  }
}

template <typename T>
__global__ void normalised_depth_benefit_kernel(const T* __restrict__ d_plus, const T* __restrict__ d,
                                                const T* __restrict__ offset, const double* __restrict__ range,
                                                int64_t n, T t_max, bool log_normalisation, const T* __restrict__ g,
                                                T* __restrict__ out) {
  const double lo = -range[0], hi = range[1];
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < n; r += int64_t(gridDim.x) * blockDim.x) {
    const LogBenefit<T> b = log_benefit(d_plus[r], d[r], offset, r, t_max);
    T deriv;
    const T eps = normalise(b.l, lo, hi, log_normalisation, deriv);
    out[r] = g ? g[r] * deriv * b.dl : eps;  // g: the backward, d+'s gradient
  }
}

void check_rows(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset, const char* what) {
  TORCH_CHECK(d_plus.is_cuda() && d_plus.dim() == 1 && d.sizes() == d_plus.sizes() &&
                  d.scalar_type() == d_plus.scalar_type() &&
                  (!offset.defined() || (offset.sizes() == d_plus.sizes() && offset.scalar_type() == d_plus.scalar_type())),
              what, ": d_plus, d (and offset) [n] of one floating type on the GPU");
}

// Grids for a thread per element and a warp per row (the kernels stride beyond them).
unsigned row_blocks(int64_t n) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)));
}
unsigned warp_row_blocks(int64_t rows) { return row_blocks(rows * 32); }

at::Tensor launch_normalised(const at::Tensor& d_plus_in, const at::Tensor& d_in, const at::Tensor& offset_in,
                             const at::Tensor& range_in, double t_max, bool log_normalisation, const at::Tensor& g_in) {
  check_rows(d_plus_in, d_in, offset_in, "normalised_depth_benefit_cuda");
  TORCH_CHECK(range_in.numel() == 2 && range_in.scalar_type() == at::kDouble && range_in.is_cuda(),
              "normalised_depth_benefit_cuda: range float64 [2] on the GPU");
  const at::Tensor dp = d_plus_in.contiguous(), d = d_in.contiguous(), range = range_in.contiguous();
  const at::Tensor offset = offset_in.defined() ? offset_in.contiguous() : at::Tensor();
  const at::Tensor g = g_in.defined() ? g_in.to(dp.scalar_type()).contiguous() : at::Tensor();
  const int64_t n = dp.numel();
  at::Tensor out = at::empty_like(dp);
  if (n == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(dp.scalar_type(), "normalised_depth_benefit_cuda", [&] {
    normalised_depth_benefit_kernel<scalar_t><<<row_blocks(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        dp.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), offset.defined() ? offset.data_ptr<scalar_t>() : nullptr,
        range.data_ptr<double>(), n, scalar_t(t_max), log_normalisation,
        g.defined() ? g.data_ptr<scalar_t>() : nullptr, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

void check_pairs(const at::Tensor& index, const at::Tensor& pair_logit, const char* what) {
  TORCH_CHECK(index.is_cuda() && index.scalar_type() == at::kLong && pair_logit.is_cuda() && pair_logit.dim() == 1,
              what, ": int64 indices and pair logits [P] on the GPU");
}

}  // namespace

at::Tensor sigmoid_row_sums_cuda(const at::Tensor& rowptr_in, const at::Tensor& entry_pair_in,
                                 const at::Tensor& pair_logit_in) {
  check_pairs(entry_pair_in, pair_logit_in, "sigmoid_row_sums_cuda");
  TORCH_CHECK(rowptr_in.scalar_type() == at::kLong && rowptr_in.numel() >= 1, "sigmoid_row_sums_cuda: int64 rowptr");
  const at::Tensor rowptr = rowptr_in.contiguous(), entry_pair = entry_pair_in.contiguous();
  const at::Tensor logit = pair_logit_in.contiguous();
  const int64_t rows = rowptr.numel() - 1;
  at::Tensor out = at::empty({rows}, logit.options());
  if (rows == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(logit.scalar_type(), "sigmoid_row_sums_cuda", [&] {
    sigmoid_row_sums_kernel<scalar_t><<<warp_row_blocks(rows), kThreads, 0,
                                        at::cuda::getCurrentCUDAStream()>>>(
        rowptr.data_ptr<int64_t>(), entry_pair.data_ptr<int64_t>(), logit.data_ptr<scalar_t>(), rows,
        out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor sigmoid_row_sums_backward_cuda(const at::Tensor& rowptr_in, const at::Tensor& entry_pair_in,
                                          const at::Tensor& pair_logit_in, const at::Tensor& g_in) {
  check_pairs(entry_pair_in, pair_logit_in, "sigmoid_row_sums_backward_cuda");
  const at::Tensor rowptr = rowptr_in.contiguous(), entry_pair = entry_pair_in.contiguous();
  const at::Tensor logit = pair_logit_in.contiguous(), g = g_in.to(logit.scalar_type()).contiguous();
  const int64_t rows = rowptr.numel() - 1;
  at::Tensor g_pair = zeroed(logit.sizes(), logit.options());
  if (rows == 0) return g_pair;
  AT_DISPATCH_FLOATING_TYPES(logit.scalar_type(), "sigmoid_row_sums_backward_cuda", [&] {
    sigmoid_row_sums_backward_kernel<scalar_t><<<warp_row_blocks(rows), kThreads, 0,
                                                 at::cuda::getCurrentCUDAStream()>>>(
        rowptr.data_ptr<int64_t>(), entry_pair.data_ptr<int64_t>(), logit.data_ptr<scalar_t>(),
        g.data_ptr<scalar_t>(), rows, g_pair.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return g_pair;
}

at::Tensor pair_bce_sum_cuda(const at::Tensor& pair_logit_in, const at::Tensor& sel_pair_in,
                             const at::Tensor& target_in) {
  check_pairs(sel_pair_in, pair_logit_in, "pair_bce_sum_cuda");
  const at::Tensor logit = pair_logit_in.contiguous(), sel = sel_pair_in.contiguous();
  const at::Tensor target = target_in.to(logit.scalar_type()).contiguous();
  TORCH_CHECK(target.numel() == sel.numel(), "pair_bce_sum_cuda: one target per selected pair");
  const int64_t S = sel.numel();
  if (S == 0) return at::zeros({}, logit.options());
  // At most kFinishBlocks blocks: the last one adds the blocks' sums (no launch for ATen's sum).
  const int64_t blocks = std::min<int64_t>((S + kThreads - 1) / kThreads, kFinishBlocks);
  const auto stream = at::cuda::getCurrentCUDAStream();
  const BlockSums part = block_sums(blocks, 1, logit.options(), true);
  at::Tensor out = at::empty({}, logit.options());
  AT_DISPATCH_FLOATING_TYPES(logit.scalar_type(), "pair_bce_sum_cuda", [&] {
    pair_bce_sum_kernel<scalar_t><<<unsigned(blocks), kThreads, 0, stream>>>(
        logit.data_ptr<scalar_t>(), sel.data_ptr<int64_t>(), target.data_ptr<scalar_t>(), S,
        part.partial.data_ptr<scalar_t>(), part.done, out.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor pair_bce_sum_backward_cuda(const at::Tensor& pair_logit_in, const at::Tensor& sel_pair_in,
                                      const at::Tensor& target_in, const at::Tensor& g_in) {
  check_pairs(sel_pair_in, pair_logit_in, "pair_bce_sum_backward_cuda");
  const at::Tensor logit = pair_logit_in.contiguous(), sel = sel_pair_in.contiguous();
  const at::Tensor target = target_in.to(logit.scalar_type()).contiguous(), g = g_in.to(logit.scalar_type());
  at::Tensor g_pair = zeroed(logit.sizes(), logit.options());
  const int64_t S = sel.numel();
  if (S == 0) return g_pair;
  AT_DISPATCH_FLOATING_TYPES(logit.scalar_type(), "pair_bce_sum_backward_cuda", [&] {
    pair_bce_sum_backward_kernel<scalar_t><<<row_blocks(S), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        logit.data_ptr<scalar_t>(), sel.data_ptr<int64_t>(), target.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), S,
        g_pair.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return g_pair;
}

at::Tensor depth_benefit_range_cuda(const at::Tensor& d_plus_in, const at::Tensor& d_in, const at::Tensor& offset_in,
                                    double t_max) {
  check_rows(d_plus_in, d_in, offset_in, "depth_benefit_range_cuda");
  const at::Tensor dp = d_plus_in.contiguous(), d = d_in.contiguous();
  const at::Tensor offset = offset_in.defined() ? offset_in.contiguous() : at::Tensor();
  const int64_t n = dp.numel();
  at::Tensor range = at::empty({2}, dp.options().dtype(at::kDouble));
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kFinishBlocks));
  const auto stream = at::cuda::getCurrentCUDAStream();
  const BlockSums part = block_sums(blocks, 2, dp.options(), true);
  AT_DISPATCH_FLOATING_TYPES(dp.scalar_type(), "depth_benefit_range_cuda", [&] {
    depth_benefit_range_kernel<scalar_t><<<unsigned(blocks), kThreads, 0, stream>>>(
        dp.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), offset.defined() ? offset.data_ptr<scalar_t>() : nullptr, n,
        scalar_t(t_max), part.partial.data_ptr<scalar_t>(), part.done, range.data_ptr<double>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return range;
}

at::Tensor normalised_depth_benefit_cuda(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                         const at::Tensor& range, double t_max, bool log_normalisation) {
  return launch_normalised(d_plus, d, offset, range, t_max, log_normalisation, {});
}

at::Tensor normalised_depth_benefit_backward_cuda(const at::Tensor& d_plus, const at::Tensor& d,
                                                  const at::Tensor& offset, const at::Tensor& range, double t_max,
                                                  bool log_normalisation, const at::Tensor& g) {
  TORCH_CHECK(g.defined() && g.numel() == d_plus.numel(), "normalised_depth_benefit_backward_cuda: g [n]");
  return launch_normalised(d_plus, d, offset, range, t_max, log_normalisation, g);
}

}  // namespace adgnn::kernels
