// Device helpers shared by the row-parallel CUDA kernels (internal; .cu files only).
#pragma once

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/util/BFloat16.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <tuple>

namespace adgnn::kernels {

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// V elements of T as one 16-byte vector load / store (float4, double2, 8 bfloat16; V = 1: one
// element), with the row kernels' accumulator `acc` of A = at::opmath_type<T> elements: the vector
// itself for float and double, 8 floats for bfloat16, whose sums run in float32 and are rounded
// once by store(). fma: acc += a v; add: acc += another acc (exact where V > 1 shares the FMA's
// rounding: a product by one); ldcg: an acc written by another block (L2); zeros: the storage
// vector of zeros (a load skipped); shfl_xor (bfloat16): the acc of lane ^ lanes in the warp.
template <typename T, int V>
struct Pack;
template <>
struct Pack<float, 4> {
  using type = float4;
  using acc = float4;
  __device__ static void fma(float4& acc, float a, const float4 v) {
    acc.x += a * v.x; acc.y += a * v.y; acc.z += a * v.z; acc.w += a * v.w;
  }
  __device__ static void add(float4& acc, const float4 v) { fma(acc, 1.f, v); }
  __device__ static float4 zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
  __device__ static float4 zeros() { return zero(); }
  __device__ static float4 store(const float4 a) { return a; }
  __device__ static float4 ldcg(const float4* p) { return __ldcg(p); }
};
template <>
struct Pack<double, 2> {
  using type = double2;
  using acc = double2;
  __device__ static void fma(double2& acc, double a, const double2 v) { acc.x += a * v.x; acc.y += a * v.y; }
  __device__ static void add(double2& acc, const double2 v) { fma(acc, 1.0, v); }
  __device__ static double2 zero() { return make_double2(0.0, 0.0); }
  __device__ static double2 zeros() { return zero(); }
  __device__ static double2 store(const double2 a) { return a; }
  __device__ static double2 ldcg(const double2* p) { return __ldcg(p); }
};
template <>
struct Pack<c10::BFloat16, 8> {
  using type = Vec<c10::BFloat16, 8>;
  using acc = Vec<float, 8>;
  __device__ static void fma(acc& s, float a, const type& v) {
#pragma unroll
    for (int k = 0; k < 8; ++k) s.v[k] += a * float(v.v[k]);
  }
  __device__ static void add(acc& s, const acc& v) {
#pragma unroll
    for (int k = 0; k < 8; ++k) s.v[k] += v.v[k];
  }
  __device__ static acc zero() {
    acc s;
#pragma unroll
    for (int k = 0; k < 8; ++k) s.v[k] = 0.f;
    return s;
  }
  __device__ static type zeros() {
    type o;
#pragma unroll
    for (int k = 0; k < 8; ++k) o.v[k] = c10::BFloat16(0.f);
    return o;
  }
  __device__ static type store(const acc& s) {
    type o;
#pragma unroll
    for (int k = 0; k < 8; ++k) o.v[k] = c10::BFloat16(s.v[k]);
    return o;
  }
  __device__ static acc shfl_xor(const acc& s, int lanes) {
    acc o;
#pragma unroll
    for (int k = 0; k < 8; ++k) o.v[k] = __shfl_xor_sync(0xffffffffu, s.v[k], lanes);
    return o;
  }
  __device__ static acc ldcg(const acc* p) {
    const float4* q = reinterpret_cast<const float4*>(p);
    const float4 a = __ldcg(q), b = __ldcg(q + 1);
    acc s;
    s.v[0] = a.x; s.v[1] = a.y; s.v[2] = a.z; s.v[3] = a.w;
    s.v[4] = b.x; s.v[5] = b.y; s.v[6] = b.z; s.v[7] = b.w;
    return s;
  }
};
template <typename T>
struct Pack<T, 1> {
  using type = T;
  using acc = at::opmath_type<T>;
  __device__ static void fma(acc& s, acc a, const T v) { s += a * acc(v); }
  __device__ static void add(acc& s, const acc v) { s += v; }
  __device__ static acc zero() { return acc(0); }
  __device__ static T zeros() { return T(0); }
  __device__ static T store(const acc s) { return T(s); }
  __device__ static acc ldcg(const acc* p) { return __ldcg(p); }
};
// The widest Pack of T: 16 bytes.
template <typename T>
constexpr int kPackWidth = int(16 / sizeof(T));

// Lanes per row: enough vectors for the row's width, at most a warp; entries of low-degree rows
// are then loaded in batches that match the lanes.
inline int lanes_for(int64_t vecs) {
  int t = 1;
  while (t < 32 && t < vecs) t *= 2;
  return t;
}

// A product rounded on its own (no fused multiply-add with a following sum): the accumulating
// dropout gradient then equals the separate product and sum it replaces, bit for bit.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
// The same for the other operations, where a kernel repeats a chain of ATen operations (each its
// own kernel, so rounded on its own) and should give their bits.
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }

// A grid-stride kernel's blocks for `items` items at `threads` a block: one item a thread, at most
// per_sm blocks per SM (more would only queue behind the resident ones).
inline int64_t grid_for(int64_t items, int threads, int64_t per_sm = 16) {
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return std::max<int64_t>(1, std::min((items + threads - 1) / threads, sms * per_sm));
}

// The blocks of a grid-stride kernel that fit on the device at once (its registers and shared
// memory decide how many per SM), at most `wanted`. A grid of more runs a second, partial wave
// after the first: e.g. 8 blocks of 256 threads per SM asked of a kernel at 38 registers, of
// which 6 fit, left a quarter of the work to a wave at a third of the device. The occupancy is
// looked up once per kernel, device and block shape.
template <typename Kernel>
int64_t resident_blocks(Kernel kernel, int threads, int64_t wanted, size_t smem = 0) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, size_t>, int> per_sm_of;
  const int device = at::cuda::current_device();
  int per_sm = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto k = std::make_tuple(reinterpret_cast<const void*>(kernel), device, threads, smem);
    auto it = per_sm_of.find(k);
    if (it == per_sm_of.end()) {
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
      it = per_sm_of.emplace(k, per_sm).first;
    }
    per_sm = it->second;
  }
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t(std::max(per_sm, 1)) * sms));
}

// Vectors of V elements where every row starts on such a boundary (the width is a multiple of
// V and the tensors' storage is aligned), else single elements.
template <typename T, int V>
inline bool vectorisable(int64_t F, std::initializer_list<const at::Tensor*> ts) {
  if (F % V != 0) return false;
  for (const at::Tensor* t : ts)
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % (sizeof(T) * V) != 0) return false;
  return true;
}

// A lane's column sums acc[j][k] (columns (lane + 32 j) V + k, below vecs V) into its warp's row
// of shared memory, `row` [width].
template <typename T, int V, int J>
__device__ void stage_lane_sums(const T (&acc)[J][V], T* row, int64_t vecs) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int64_t v = lane + 32 * j;
    if (v >= vecs) break;
#pragma unroll
    for (int k = 0; k < V; ++k) row[v * V + k] = acc[j][k];
  }
}

// out[c] = the sum over the block's warps of sums[w, c] (shared, [warps, width]), in warp order:
// a block's partial column sums, the same bits on every run (after a __syncthreads()).
template <typename T>
__device__ void add_warp_sums(const T* sums, int warps, int64_t width, T* out) {
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    T total = T(0);
    for (int w = 0; w < warps; ++w) total += sums[w * width + c];
    out[c] = total;
  }
}

// A zero-filled tensor by cudaMemsetAsync on the current stream: at::zeros' fill kernel costs the
// host a TensorIterator and a launch, a memset a fraction of that (AD's steps are host-bound).
inline at::Tensor zeroed(at::IntArrayRef size, const at::TensorOptions& options) {
  at::Tensor t = at::empty(size, options);
  if (t.nbytes() > 0)
    C10_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), at::cuda::getCurrentCUDAStream()));
  return t;
}

// `count` counters for the grids' last-block pattern on the current stream, zero when the next
// kernel on it starts, without a memset per launch (host time each, ~10 per AD step):
// kept per stream and device (zeroed once, grown when a grid needs more), and set back to zero by
// the grid's last block (is_last_block, the small GEMM's tiles). Kernels on one stream run one
// after another, so the next grid finds them zero. Every block of such a grid must count itself.
unsigned* stream_counters(int64_t count);

// The buffer of a grid's per-block sums, [blocks, width], and with `finish` the counter that
// finish_block_sums reads (stream_counters); done is null without it (the caller then sums the
// rows itself).
struct BlockSums {
  at::Tensor partial;
  unsigned* done = nullptr;
};
inline BlockSums block_sums(int64_t blocks, int64_t width, const at::TensorOptions& options, bool finish) {
  BlockSums b;
  b.partial = at::empty({blocks, width}, options);
  if (finish) b.done = stream_counters(1);
  return b;
}

// Whether this block is the grid's last to get here (counted in *done, zero before the launch,
// and zero again once the last block has counted itself), after each block has written its
// partial results: then every block's writes are visible to it. Every thread of the block calls it.
__device__ inline bool is_last_block(unsigned* done) {
  __shared__ bool last;
  __threadfence();  // this block's results, visible before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(done, 1u) == gridDim.x - 1;
    if (last) *done = 0;  // (every other block has counted itself: the next grid's zero)
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// After each block has written its row partial[blockIdx.x, 0..width): the last block to finish
// (counted in *done, zero before the launch) sums the rows into out[width]. Per column, `parts`
// threads (at most) each sum every parts-th row in four interleaved running sums, which add in a
// fixed order, and the parts' totals add in part order: the same bits on every run for a grid.
// One block reads every row here, so this suits grids of tens of blocks (kFinishBlocks), where
// it saves ATen's sum over the rows (one more launch) at little device time. scratch: shared
// memory of at least parts * width T's. Every thread of the block calls it.
constexpr int64_t kFinishBlocks = 64;
template <typename T>
__device__ void finish_block_sums(const T* partial, int64_t width, unsigned* done, T* out, T* scratch, int parts) {
  if (!is_last_block(done)) return;
  const int64_t blocks = gridDim.x;
  if (width > blockDim.x) parts = 1;
  else if (int64_t(parts) * width > blockDim.x) parts = int(blockDim.x / width);
  for (int64_t i = threadIdx.x; i < parts * width; i += blockDim.x) {
    const int64_t c = i % width, part = i / width;
    T acc[4] = {T(0), T(0), T(0), T(0)};
    int64_t b = part;
    for (; b + 3 * parts < blocks; b += 4 * parts) {
#pragma unroll
      for (int u = 0; u < 4; ++u) acc[u] += __ldcg(partial + (b + u * parts) * width + c);
    }
    for (int u = 0; b < blocks; b += parts, ++u) acc[u] += __ldcg(partial + b * width + c);
    scratch[i] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    T total = T(0);
    for (int part = 0; part < parts; ++part) total += scratch[part * width + c];
    out[c] = total;
  }
}

}  // namespace adgnn::kernels
