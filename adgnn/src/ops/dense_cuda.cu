// Column sums of a row-major matrix (a bias's gradient), row-parallel: ATen's sum over dim 0
// takes several times the time to read the matrix (arxiv-scale's [169k, 128] on an H200). Masked:
// the gradient through a ReLU first (where its output is positive), written out and summed in the
// same pass.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

// Warps stride over rows, each lane summing the same J vectors of V columns in every row; the
// block adds its warps' sums in a fixed order into partial[block]; with `done`, the last block
// sums those into out (finish_block_sums; deterministic for a grid).
// Masked: x[r, c] * scale counts where relu_out[r, c] > 0 (else 0), and that value goes to
// masked[r, c] (scale: a fused dropout's, linear_relu_dropout; rounded before the sum, as the
// separate dropout's backward did). The sums in A (float32 for bfloat16 rows: partial and out
// too).
template <typename T, int V, int J, bool Masked, typename A = at::opmath_type<T>>
__global__ void column_sums_kernel(const T* __restrict__ x, const T* __restrict__ relu_out, int64_t rows, int64_t C,
                                   A scale, T* __restrict__ masked, A* __restrict__ partial, unsigned* done,
                                   A* __restrict__ out) {
  using VT = Vec<T, V>;
  const int64_t vecs = C / V;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  A acc[J][V];
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int k = 0; k < V; ++k) acc[j][k] = A(0);
  for (int64_t p = int64_t(blockIdx.x) * warps + warp; p < rows; p += int64_t(gridDim.x) * warps) {
    const VT* xr = reinterpret_cast<const VT*>(x + p * C);
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int64_t v = lane + 32 * j;
      if (v >= vecs) break;
      VT a = xr[v];
      if constexpr (Masked) {
        const VT o = reinterpret_cast<const VT*>(relu_out + p * C)[v];
#pragma unroll
        for (int k = 0; k < V; ++k) a.v[k] = o.v[k] > T(0) ? T(mul_rn(A(a.v[k]), scale)) : T(0);
        reinterpret_cast<VT*>(masked + p * C)[v] = a;
      }
#pragma unroll
      for (int k = 0; k < V; ++k) acc[j][k] += A(a.v[k]);
    }
  }
  extern __shared__ unsigned char shared_raw[];
  A* sums = reinterpret_cast<A*>(shared_raw);  // [warps, C]
  stage_lane_sums<A, V, J>(acc, sums + warp * C, vecs);
  __syncthreads();
  add_warp_sums(sums, warps, C, partial + int64_t(blockIdx.x) * C);
  if (!done) return;  // a large grid: the caller sums the rows
  __syncthreads();    // (sums is the scratch below)
  finish_block_sums(partial, C, done, out, sums, warps);
}

// The column sums of x (relu_out defined: of x masked by relu_out > 0, which goes to `masked`),
// in x's accumulation type (float32 for bfloat16); false where the rows are too wide for the
// kernel's shared memory (the caller uses ATen).
template <bool Masked>
bool launch_column_sums(const at::Tensor& x, const at::Tensor& relu_out, at::Tensor& masked, at::Tensor& sums,
                        double scale = 1) {
  const int64_t rows = x.size(0), C = x.size(1);
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  // Few rows (AD's deeper layers: host-bound steps): a grid of at most kFinishBlocks whose last
  // block finishes the sum; many (device-bound): a grid filling the device, and ATen's sum of its
  // rows, which takes more blocks than one.
  const bool few = rows <= kFinishBlocks * kWarps * 16;
  const int64_t blocks = std::min<int64_t>((rows + kWarps - 1) / kWarps, few ? kFinishBlocks : int64_t(sms) * 8);
  const auto acc_options = x.options().dtype(at::toOpMathType(x.scalar_type()));
  if (few) sums = at::empty({C}, acc_options);
  const auto stream = at::cuda::getCurrentCUDAStream();
  const BlockSums part = block_sums(blocks, C, acc_options, few);
  bool launched = false;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "column_sums_cuda", [&] {
    using A = at::opmath_type<scalar_t>;
    constexpr int V = 16 / sizeof(scalar_t);
    const bool vec = Masked ? vectorisable<scalar_t, V>(C, {&x, &relu_out, &masked}) : vectorisable<scalar_t, V>(C, {&x});
    const int64_t vecs = vec ? C / V : C;
    const size_t shared = size_t(kWarps) * C * sizeof(A);
    if (shared > 48 * 1024) return;  // very wide: ATen
    const scalar_t* out_ptr = Masked ? relu_out.data_ptr<scalar_t>() : nullptr;
    scalar_t* masked_ptr = Masked ? masked.data_ptr<scalar_t>() : nullptr;
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(blocks), kThreads, shared, stream>>>(x.data_ptr<scalar_t>(), out_ptr, rows, C,
                                                            A(scale), masked_ptr,
                                                            part.partial.data_ptr<A>(), part.done,
                                                            few ? sums.data_ptr<A>() : nullptr);
      launched = true;
    };
    if (vec && vecs <= 32) launch(column_sums_kernel<scalar_t, V, 1, Masked>);
    else if (vec && vecs <= 64) launch(column_sums_kernel<scalar_t, V, 2, Masked>);
    else if (vec && vecs <= 128) launch(column_sums_kernel<scalar_t, V, 4, Masked>);
    else if (!vec && vecs <= 32) launch(column_sums_kernel<scalar_t, 1, 1, Masked>);
    else if (!vec && vecs <= 128) launch(column_sums_kernel<scalar_t, 1, 4, Masked>);
  });
  if (!launched) return false;
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!few) sums = part.partial.sum(0);
  return true;
}

// AD's straight-through band term's backward (model.cpp, band_term_grads), warps striding over
// the band rows. For row i: g_i = <grad[r], diff[i]> s (1 - s) / kappa, s = sigmoid((eps[b] -
// tau) / kappa), b = band_rows[i], r = b (of_band_rows) or i; grad_eps[b] = g_i (the rows are
// distinct; the caller zeroes the rest). tau's gradient is the sum of -g_i (tau enters as -tau):
// each warp's rows in order, each block's warps in order into partial[block], then (done
// given: few band rows, a grid of at most kFinishBlocks) the last block's sum of those
// (finish_block_sums), else ATen's. The dot product by the lanes, then a butterfly (a fixed order). One kernel for the ~15 ATen operations of the
// formula and the sum (AD's backward is bound by the host).
template <typename T>
__global__ void band_term_kernel(const T* __restrict__ eps, const T* __restrict__ tau,
                                 const int64_t* __restrict__ band_rows, int64_t B, const T* __restrict__ grad,
                                 const T* __restrict__ diff, int64_t W, T kappa, bool of_band_rows,
                                 T* __restrict__ grad_eps, T* __restrict__ partial, unsigned* done,
                                 T* __restrict__ grad_tau) {
  constexpr int kMaxWarps = 32;
  __shared__ T warp_neg_g[kMaxWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  T neg_g = T(0);  // the warp's rows' sum, in row order
  for (int64_t i = int64_t(blockIdx.x) * warps + warp; i < B; i += int64_t(gridDim.x) * warps) {
    const int64_t b = band_rows[i];
    const T* gr = grad + (of_band_rows ? b : i) * W;
    const T* dr = diff + i * W;
    T dot = T(0);
    for (int64_t c = lane; c < W; c += 32) dot += gr[c] * dr[c];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const T s = T(1) / (T(1) + exp(-(eps[b] - tau[0]) / kappa));
    const T v = dot * (s * (T(1) - s) / kappa);
    neg_g -= v;
    if (lane == 0 && grad_eps) grad_eps[b] = v;
  }
  if (lane == 0) warp_neg_g[warp] = neg_g;
  __syncthreads();
  if (threadIdx.x == 0) {
    T total = T(0);
    for (int w = 0; w < warps; ++w) total += warp_neg_g[w];
    partial[blockIdx.x] = total;
  }
  if (!done) return;  // a large grid: the caller sums the blocks' sums
  __syncthreads();
  finish_block_sums(partial, 1, done, grad_tau, warp_neg_g, warps);
}

// A warp per listed row i of logits (cross_entropy_rows_cuda): the row's maximum, then the sum of
// exponentials, each by a butterfly (every lane ends with the same value, a fixed order).
template <typename T>
__device__ T warp_row_lse(const T* __restrict__ z, int64_t C, int lane) {
  T m = -INFINITY;
  for (int64_t c = lane; c < C; c += 32) m = max(m, z[c]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  T s = T(0);
  for (int64_t c = lane; c < C; c += 32) s += exp(z[c] - m);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  return m + log(s);
}

template <typename T>
__global__ void cross_entropy_rows_kernel(const T* __restrict__ logits, int64_t C, const int64_t* __restrict__ rows,
                                          const int64_t* __restrict__ labels, int64_t R, T scale,
                                          T* __restrict__ loss, T* __restrict__ lse) {
  const int lane = threadIdx.x % 32;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (i >= R) return;
  const T* z = logits + rows[i] * C;
  const T l = warp_row_lse(z, C, lane);
  if (lane == 0) {
    const int64_t y = labels[i];
    lse[i] = l;
    loss[i] = y >= 0 && y < C ? scale * (l - z[y]) : T(NAN);
  }
}

template <typename T>
__global__ void cross_entropy_rows_backward_kernel(const T* __restrict__ logits, int64_t C,
                                                   const int64_t* __restrict__ rows,
                                                   const int64_t* __restrict__ labels, int64_t R,
                                                   const T* __restrict__ lse, const T* __restrict__ g,
                                                   T scale, T* __restrict__ grad) {
  const int lane = threadIdx.x % 32;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (i >= R) return;
  const int64_t r = rows[i], y = labels[i];
  const T* z = logits + r * C;
  const T gv = g[0] * scale, l = lse[i];
  for (int64_t c = lane; c < C; c += 32) atomicAdd(grad + r * C + c, gv * (exp(z[c] - l) - (c == y ? T(1) : T(0))));
}

// tau(t) = 1 - (1 - lambda) exp(-S_t), S_t = softplus(a_0) + ... + softplus(a_{t-1}) (S_0 = 0),
// for t = 0..L-1, by one thread (L <= kMaxTauLayers): ATen's softplus (threshold 20) and its
// derivative, the sums in layer order.
template <typename T>
struct TauPtrs {
  T* p[kMaxTauLayers];
};

template <typename T>
__device__ T softplus_of(T x) {
  return x > T(20) ? x : log1p(exp(x));
}

template <typename T>
__global__ void tau_forward_kernel(const T* __restrict__ a, int L, T oml, T* __restrict__ all, TauPtrs<T> layer) {
  T s = T(0);
  for (int t = 0; t < L; ++t) {
    if (t > 0) s += softplus_of(a[t - 1]);
    const T v = T(1) - oml * exp(-s);
    all[t] = v;
    *layer.p[t] = v;
  }
}

// grad_a[j] = softplus'(a_j) sum over t > j of g_t (1 - lambda) exp(-S_t) (g_t = 0 where absent).
template <typename T>
__global__ void tau_backward_kernel(const T* __restrict__ a, int L, T oml, TauPtrs<const T> g, T* __restrict__ grad_a) {
  T s[kMaxTauLayers];
  s[0] = T(0);
  for (int t = 1; t < L; ++t) s[t] = s[t - 1] + softplus_of(a[t - 1]);
  T acc = T(0);
  for (int t = L - 1; t >= 1; --t) {
    if (g.p[t]) acc += *g.p[t] * oml * exp(-s[t]);
    const T x = a[t - 1];
    const T z = exp(x);
    grad_a[t - 1] = x > T(20) ? acc : acc * z / (z + T(1));
  }
}

}  // namespace

CrossEntropyRows cross_entropy_rows_cuda(const at::Tensor& logits_in, const at::Tensor& rows_in,
                                         const at::Tensor& labels_in, double scale) {
  TORCH_CHECK(logits_in.dim() == 2 && rows_in.scalar_type() == at::kLong && labels_in.scalar_type() == at::kLong &&
                  rows_in.numel() == labels_in.numel(),
              "cross_entropy_rows_cuda: logits [n, C], int64 rows and one int64 label per row");
  const at::Tensor z = logits_in.contiguous(), rows = rows_in.contiguous(), labels = labels_in.contiguous();
  const int64_t R = rows.numel(), C = z.size(1);
  CrossEntropyRows out{at::empty({R}, z.options()), at::empty({R}, z.options())};
  if (R == 0) return out;
  constexpr int kThreads = 256;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "cross_entropy_rows_cuda", [&] {
    cross_entropy_rows_kernel<scalar_t><<<unsigned((R * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        z.data_ptr<scalar_t>(), C, rows.data_ptr<int64_t>(), labels.data_ptr<int64_t>(), R, scalar_t(scale),
        out.loss.data_ptr<scalar_t>(), out.lse.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor cross_entropy_rows_backward_cuda(const at::Tensor& logits_in, const at::Tensor& rows_in,
                                            const at::Tensor& labels_in, const at::Tensor& lse_in,
                                            const at::Tensor& g_in, double scale) {
  const at::Tensor z = logits_in.contiguous(), rows = rows_in.contiguous(), labels = labels_in.contiguous();
  const at::Tensor lse = lse_in.contiguous(), g = g_in.to(z.scalar_type()).contiguous();
  TORCH_CHECK(g.numel() == 1 && lse.numel() == rows.numel(), "cross_entropy_rows_backward_cuda: one g, one lse per row");
  at::Tensor grad = zeroed(z.sizes(), z.options());
  const int64_t R = rows.numel(), C = z.size(1);
  if (R == 0) return grad;
  constexpr int kThreads = 256;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "cross_entropy_rows_backward_cuda", [&] {
    cross_entropy_rows_backward_kernel<scalar_t>
        <<<unsigned((R * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
            z.data_ptr<scalar_t>(), C, rows.data_ptr<int64_t>(), labels.data_ptr<int64_t>(), R,
            lse.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), scalar_t(scale), grad.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad;
}

BandTermGrads band_term_grads_cuda(const at::Tensor& eps, const at::Tensor& tau_t, const at::Tensor& band_rows,
                                   const at::Tensor& grad_in, const at::Tensor& diff_in, double kappa,
                                   bool of_band_rows, bool want_eps) {
  TORCH_CHECK(tau_t.numel() == 1 && band_rows.scalar_type() == at::kLong && diff_in.dim() == 2 &&
                  grad_in.dim() == 2 && grad_in.size(1) == diff_in.size(1) &&
                  eps.scalar_type() == grad_in.scalar_type() && tau_t.scalar_type() == eps.scalar_type(),
              "band_term_grads_cuda: eps [n], tau one value, band_rows int64, grad and diff [*, W] of eps's type");
  const at::Tensor grad = grad_in.contiguous(), diff = diff_in.to(grad.scalar_type()).contiguous();
  const at::Tensor e = eps.contiguous(), rows = band_rows.contiguous(), tau = tau_t.contiguous();
  const int64_t B = rows.numel(), W = diff.size(1);
  BandTermGrads out;
  if (want_eps) out.eps = zeroed(e.sizes(), e.options());
  if (B == 0) {
    out.tau = at::zeros({}, grad.options());
    return out;
  }
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  // Few band rows (AD-GCN_fast's deeper layers: host-bound steps): at most kFinishBlocks blocks,
  // whose last one finishes the sum. Many (the learned variant's layer 1, ~10^5 rows): a warp per
  // row and ATen's sum of the blocks' sums, faster than a few blocks striding over the rows.
  const bool few = B <= kFinishBlocks * kWarps * 4;
  const int64_t blocks = std::min<int64_t>((B + kWarps - 1) / kWarps, few ? kFinishBlocks : int64_t(INT32_MAX));
  if (few) out.tau = at::empty({}, grad.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const BlockSums part = block_sums(blocks, 1, grad.options(), few);
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "band_term_grads_cuda", [&] {
    band_term_kernel<scalar_t><<<unsigned(blocks), kThreads, 0, stream>>>(
        e.data_ptr<scalar_t>(), tau.data_ptr<scalar_t>(), rows.data_ptr<int64_t>(), B, grad.data_ptr<scalar_t>(),
        diff.data_ptr<scalar_t>(), W, scalar_t(kappa), of_band_rows, want_eps ? out.eps.data_ptr<scalar_t>() : nullptr,
        part.partial.data_ptr<scalar_t>(), part.done, few ? out.tau.data_ptr<scalar_t>() : nullptr);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!few) out.tau = part.partial.sum();
  return out;
}

at::Tensor column_sums_cuda(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.dim() == 2, "column_sums_cuda: a matrix");
  const at::Tensor x = x_in.contiguous();
  const auto acc = at::toOpMathType(x.scalar_type());  // every path: sums in this type
  if (x.size(0) == 0 || x.size(1) == 0) return at::zeros({x.size(1)}, x.options().dtype(acc));
  at::Tensor none, sums;
  return launch_column_sums<false>(x, {}, none, sums) ? sums : x.sum(0, false, acc);
}

std::pair<at::Tensor, at::Tensor> relu_grad_column_sums_cuda(const at::Tensor& g_in, const at::Tensor& out_in,
                                                             double scale) {
  TORCH_CHECK(g_in.dim() == 2 && g_in.sizes() == out_in.sizes(), "relu_grad_column_sums_cuda: g and out alike");
  const at::Tensor g = g_in.contiguous(), out = out_in.contiguous();
  at::Tensor masked = at::empty_like(g), sums;
  const auto acc = at::toOpMathType(g.scalar_type());  // every path: sums in this type
  if (g.size(0) == 0 || g.size(1) == 0) return {masked, at::zeros({g.size(1)}, g.options().dtype(acc))};
  if (launch_column_sums<true>(g, out, masked, sums, scale)) return {masked, sums};
  masked = at::threshold_backward(scale == 1 ? g : g * scale, out, 0);
  return {masked, masked.sum(0, false, acc)};
}

std::pair<at::Tensor, std::vector<at::Tensor>> tau_thresholds_cuda(const at::Tensor& a_in, int64_t L, double lambda) {
  TORCH_CHECK(a_in.is_cuda() && a_in.dim() == 1 && a_in.numel() == L - 1 && L >= 1 && L <= kMaxTauLayers,
              "tau_thresholds_cuda: a [L - 1] on the GPU, 1 <= L <= ", kMaxTauLayers);
  const at::Tensor a = a_in.contiguous();
  at::Tensor all = at::empty({L}, a.options());
  std::vector<at::Tensor> layers;
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "tau_thresholds_cuda", [&] {
    TauPtrs<scalar_t> out{};
    for (int64_t t = 0; t < L; ++t) {
      layers.push_back(at::empty({}, a.options()));
      out.p[t] = layers.back().data_ptr<scalar_t>();
    }
    tau_forward_kernel<scalar_t><<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<scalar_t>(), int(L), scalar_t(1 - lambda), all.data_ptr<scalar_t>(), out);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {all, layers};
}

at::Tensor tau_thresholds_backward_cuda(const at::Tensor& a_in, double lambda, const std::vector<at::Tensor>& grads) {
  const int64_t L = int64_t(grads.size());
  TORCH_CHECK(a_in.is_cuda() && a_in.numel() == L - 1 && L >= 1 && L <= kMaxTauLayers,
              "tau_thresholds_backward_cuda: a [L - 1] on the GPU and L gradients, L <= ", kMaxTauLayers);
  const at::Tensor a = a_in.contiguous();
  at::Tensor grad_a = at::empty_like(a);
  if (L == 1) return grad_a;
  std::vector<at::Tensor> held;  // the gradients in a's type, alive until the launch
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "tau_thresholds_backward_cuda", [&] {
    TauPtrs<const scalar_t> g{};
    for (int64_t t = 0; t < L; ++t) {
      if (!grads[size_t(t)].defined()) continue;
      TORCH_CHECK(grads[size_t(t)].numel() == 1 && grads[size_t(t)].is_cuda(),
                  "tau_thresholds_backward_cuda: one value per layer");
      held.push_back(grads[size_t(t)].to(a.scalar_type()).contiguous());
      g.p[t] = held.back().data_ptr<scalar_t>();
    }
    tau_backward_kernel<scalar_t><<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<scalar_t>(), int(L), scalar_t(1 - lambda), g, grad_a.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_a;
}

at::Tensor zeroed_cuda(at::IntArrayRef size, const at::TensorOptions& options) { return zeroed(size, options); }

unsigned* stream_counters(int64_t count) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  const auto key = std::make_pair(int(stream.device_index()), stream.stream());
  static std::mutex mutex;
  // Never freed: CUDA tensors destroyed at exit, after the driver, would fail.
  static auto* held = new std::map<std::pair<int, cudaStream_t>, at::Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  at::Tensor& t = (*held)[key];
  if (!t.defined() || t.numel() < count) {
    // A larger buffer. The old one stays allocated: another host thread may hold its pointer
    // for a launch it has not issued yet (a few hundred bytes, grown a handful of times).
    static auto* retired = new std::vector<at::Tensor>();
    if (t.defined()) retired->push_back(t);
    t = at::empty({std::max<int64_t>(count, 64)}, at::TensorOptions().dtype(at::kInt).device(at::kCUDA,
                                                                                           stream.device_index()));
    C10_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), stream));
  }
  return reinterpret_cast<unsigned*>(t.data_ptr<int32_t>());
}

int64_t nonzero_stream_counters() {
  const auto stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor t = at::from_blob(stream_counters(1), {64}, at::TensorOptions().dtype(at::kInt).device(
                                                                   at::kCUDA, stream.device_index()));
  return t.ne(0).sum().item<int64_t>();
}

}  // namespace adgnn::kernels
