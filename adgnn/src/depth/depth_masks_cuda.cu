// AD's per-pass row masks in one kernel (model.cpp's detail::depth_masks): each node's depth,
// every layer's computed / active / band rows and the frozen rows of the width-changing layers,
// with their counts and each layer's computed CSR entries, where the ATen form takes about 25
// launches of a host-bound step. Then each row's position among its layer's computed rows: three
// small kernels (a tile's count, the tiles' offsets, the positions), where a cumsum and its
// corrections take eight launches; after the caller's host copy of the counts, every mask's rows
// by one kernel, where nonzero takes five and a copy.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

// A warp's sum of v (every lane holds one), in lane 0.
__device__ unsigned long long warp_sum(unsigned long long v) {
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  return v;
}

// Warps stride over 32-row chunks (every lane of a warp takes each step, so the ballots see all
// 32); a warp adds its counts to the block's in shared memory, the block to `counts` at the end
// (integer sums: any order gives the same).
template <typename T>
__global__ void depth_masks_kernel(const T* __restrict__ eps, const T* __restrict__ tau,
                                   const int64_t* __restrict__ depth_in, int64_t n, int L, int band_mode,
                                   T band_width, bool no_band_at_layer1, const int64_t* __restrict__ rowptr,
                                   uint64_t frozen_bits, int K, int64_t* __restrict__ depth_out,
                                   bool* __restrict__ stacked, unsigned long long* __restrict__ counts) {
  extern __shared__ unsigned long long block_counts[];  // [K + L]
  for (int i = threadIdx.x; i < K + L; i += blockDim.x) block_counts[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t base = (int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * 32; base < n; base += warps * 32) {
    const int64_t r = base + lane;
    const bool valid = r < n;
    T e = T(0);
    int64_t d = 0, entries = 0;
    if (valid) {
      if (depth_in) {
        d = depth_in[r];
      } else {
        e = eps[r];
        for (int t = 0; t < L; ++t) d += e >= tau[t];
      }
      depth_out[r] = d;
      entries = rowptr[r + 1] - rowptr[r];
    }
    int f = 0;
    for (int t = 0; t < L; ++t) {
      const bool act = d >= t + 1;
      bool band = band_mode == 2;
      if (band_mode == 1) {
        const T diff = e - tau[t];
        band = (diff < T(0) ? -diff : diff) < band_width;
      }
      if (t == 0 && no_band_at_layer1) band = false;
      const bool comp = act || band;
      const bool frozen_listed = (frozen_bits >> t) & 1u;
      if (valid) {
        stacked[int64_t(t) * n + r] = comp;
        stacked[int64_t(L + t) * n + r] = act;
        stacked[int64_t(2 * L + t) * n + r] = band;
        if (frozen_listed) stacked[int64_t(3 * L + f) * n + r] = !act || band;
      }
      const unsigned c_comp = __popc(__ballot_sync(0xffffffffu, valid && comp));
      const unsigned c_act = __popc(__ballot_sync(0xffffffffu, valid && act));
      const unsigned c_band = __popc(__ballot_sync(0xffffffffu, valid && band));
      const unsigned c_frozen = frozen_listed ? __popc(__ballot_sync(0xffffffffu, valid && (!act || band))) : 0u;
      const unsigned long long e_comp = warp_sum(valid && comp ? static_cast<unsigned long long>(entries) : 0ull);
      if (lane == 0) {
        if (c_comp) atomicAdd(&block_counts[t], static_cast<unsigned long long>(c_comp));
        if (c_act) atomicAdd(&block_counts[L + t], static_cast<unsigned long long>(c_act));
        if (c_band) atomicAdd(&block_counts[2 * L + t], static_cast<unsigned long long>(c_band));
        if (c_frozen) atomicAdd(&block_counts[3 * L + f], static_cast<unsigned long long>(c_frozen));
        if (e_comp) atomicAdd(&block_counts[K + t], e_comp);
      }
      if (frozen_listed) ++f;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < K + L; i += blockDim.x)
    if (block_counts[i]) atomicAdd(&counts[i], block_counts[i]);
}

// Each set row's position among its mask row's set rows, in tiles of kTile rows (a block each;
// blockIdx.y: the mask row): a tile's count, each tile's offset within its mask row (one block
// per mask row), then the position = the tile's offset + the set rows before it in its tile
// (ballots). Integer counts: the same result in any order.
constexpr int kTile = 1024;

__global__ void tile_counts_kernel(const bool* __restrict__ masks, int64_t n, int64_t tiles,
                                   int32_t* __restrict__ counts) {
  const int64_t r = int64_t(blockIdx.x) * kTile + threadIdx.x;
  const int k = __syncthreads_count(r < n && masks[int64_t(blockIdx.y) * n + r]);
  if (threadIdx.x == 0) counts[int64_t(blockIdx.y) * tiles + blockIdx.x] = k;
}

// In place: counts[k, b] becomes the sum of counts[k, 0..b-1] (blockIdx.x: the mask row). Each
// thread sums a contiguous run of tiles; the block scans the runs' sums.
__global__ void tile_offsets_kernel(int32_t* __restrict__ counts, int64_t tiles) {
  __shared__ int32_t sums[kTile];
  int32_t* c = counts + int64_t(blockIdx.x) * tiles;
  const int64_t per = (tiles + kTile - 1) / kTile;
  const int64_t begin = std::min<int64_t>(int64_t(threadIdx.x) * per, tiles), end = std::min(begin + per, tiles);
  int32_t own = 0;
  for (int64_t i = begin; i < end; ++i) own += c[i];
  sums[threadIdx.x] = own;
  __syncthreads();
  for (int d = 1; d < kTile; d *= 2) {
    const int32_t v = threadIdx.x >= d ? sums[threadIdx.x - d] : 0;
    __syncthreads();
    sums[threadIdx.x] += v;
    __syncthreads();
  }
  int32_t run = sums[threadIdx.x] - own;
  for (int64_t i = begin; i < end; ++i) {
    const int32_t k = c[i];
    c[i] = run;
    run += k;
  }
}

// Row r of mask row k's tile: whether it is set, and its position among the mask's set rows
// (the tile's offset + the set rows before it in the tile, by ballots). Every thread of the block
// calls it (it synchronises the block).
__device__ int32_t mask_position(const bool* __restrict__ masks, int64_t n, int64_t tiles,
                                 const int32_t* __restrict__ offsets, int64_t k, int64_t r, bool& set) {
  __shared__ int32_t before_warp[kTile / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  set = r < n && masks[k * n + r];
  const unsigned ballot = __ballot_sync(0xffffffffu, set);
  if (lane == 0) before_warp[warp] = __popc(ballot);
  __syncthreads();
  if (warp == 0) {  // exclusive scan of the warps' counts
    const int32_t own = before_warp[lane];
    int32_t v = own;
    for (int d = 1; d < 32; d *= 2) {
      const int32_t u = __shfl_up_sync(0xffffffffu, v, d);
      if (lane >= d) v += u;
    }
    before_warp[lane] = v - own;
  }
  __syncthreads();
  return offsets[k * tiles + blockIdx.x] + before_warp[warp] + __popc(ballot & ((1u << lane) - 1u));
}

// pos[t, r]: row r's position among layer t's computed rows (mask row t), -1 where not computed.
__global__ void computed_positions_kernel(const bool* __restrict__ masks, int64_t n, int64_t tiles,
                                          const int32_t* __restrict__ offsets, int32_t* __restrict__ pos) {
  const int64_t r = int64_t(blockIdx.x) * kTile + threadIdx.x;
  bool set;
  const int32_t p = mask_position(masks, n, tiles, offsets, blockIdx.y, r, set);
  if (r < n) pos[int64_t(blockIdx.y) * n + r] = set ? p : -1;
}

// Every mask row's set rows, mask by mask, each in row order (nonzero's order): mask k's start is
// the sum of the counts of the masks before it.
__global__ void mask_rows_kernel(const bool* __restrict__ masks, int64_t n, int64_t tiles,
                                 const int32_t* __restrict__ offsets, const int64_t* __restrict__ counts,
                                 int64_t* __restrict__ rows) {
  __shared__ int64_t start;
  if (threadIdx.x == 0) {
    int64_t s = 0;
    for (unsigned k = 0; k < blockIdx.y; ++k) s += counts[k];
    start = s;
  }
  const int64_t r = int64_t(blockIdx.x) * kTile + threadIdx.x;
  bool set;
  const int32_t p = mask_position(masks, n, tiles, offsets, blockIdx.y, r, set);  // (synchronises)
  if (set) rows[start + p] = r;
}

}  // namespace

detail::DepthMasks depth_masks_cuda(const at::Tensor& eps, const at::Tensor& tau, const at::Tensor& depth_in,
                                   int64_t L, int band_mode, double band_width, bool no_band_at_layer1,
                                   const at::Tensor& rowptr, uint64_t frozen_bits) {
  TORCH_CHECK(L >= 1 && L <= 64, "depth_masks_cuda: 1 to 64 layers");
  TORCH_CHECK(rowptr.numel() - 1 < (int64_t(1) << 31), "depth_masks_cuda: fewer than 2^31 rows (int32 positions)");
  TORCH_CHECK(rowptr.is_cuda() && rowptr.scalar_type() == at::kLong && rowptr.is_contiguous(),
              "depth_masks_cuda: contiguous int64 rowptr on the GPU");
  const int64_t n = rowptr.numel() - 1;
  const bool given = depth_in.defined();
  TORCH_CHECK(given ? (depth_in.scalar_type() == at::kLong && depth_in.is_contiguous() && depth_in.numel() == n &&
                       band_mode != 1)
                    : (eps.is_contiguous() && eps.numel() == n && tau.is_contiguous() && tau.numel() == L &&
                       tau.scalar_type() == eps.scalar_type()),
              "depth_masks_cuda: int64 depth (no band width), or eps [n] and tau [L] of one type");
  const int F = __builtin_popcountll(frozen_bits & (L == 64 ? ~0ull : (1ull << L) - 1));
  const int K = 3 * int(L) + F;
  const auto on = rowptr.options();
  at::Tensor depth = at::empty({n}, on);
  at::Tensor stacked = at::empty({K, n}, on.dtype(at::kBool));
  at::Tensor counts = zeroed({K + L}, on);
  at::Tensor comp_pos = at::empty({L, n}, on.dtype(at::kInt));
  if (n == 0) return {depth, stacked, counts, comp_pos, at::empty({K, 0}, on.dtype(at::kInt))};
  const int threads = 256;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::max<int64_t>(1, std::min((n + threads - 1) / threads, sms * 8));
  const size_t shared = size_t(K + L) * sizeof(unsigned long long);
  auto stream = at::cuda::getCurrentCUDAStream();
  auto* out_counts = reinterpret_cast<unsigned long long*>(counts.data_ptr<int64_t>());
  if (given) {
    depth_masks_kernel<float><<<blocks, threads, shared, stream>>>(
        nullptr, nullptr, depth_in.data_ptr<int64_t>(), n, int(L), band_mode, 0.f, no_band_at_layer1,
        rowptr.data_ptr<int64_t>(), frozen_bits, K, depth.data_ptr<int64_t>(), stacked.data_ptr<bool>(), out_counts);
  } else {
    AT_DISPATCH_FLOATING_TYPES(eps.scalar_type(), "depth_masks_cuda", [&] {
      depth_masks_kernel<scalar_t><<<blocks, threads, shared, stream>>>(
          eps.data_ptr<scalar_t>(), tau.data_ptr<scalar_t>(), nullptr, n, int(L), band_mode,
          static_cast<scalar_t>(band_width), no_band_at_layer1, rowptr.data_ptr<int64_t>(), frozen_bits, K,
          depth.data_ptr<int64_t>(), stacked.data_ptr<bool>(), out_counts);
    });
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // Every mask row's tile counts and offsets (for mask_rows_cuda, after the caller has the counts),
  // and layer t's computed rows' positions. int32: n < 2^31, as the CSR's row count is.
  const int64_t tiles = (n + kTile - 1) / kTile;
  at::Tensor tile_offsets = at::empty({K, tiles}, on.dtype(at::kInt));
  tile_counts_kernel<<<dim3{unsigned(tiles), unsigned(K)}, kTile, 0, stream>>>(stacked.data_ptr<bool>(), n, tiles,
                                                                                tile_offsets.data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  tile_offsets_kernel<<<unsigned(K), kTile, 0, stream>>>(tile_offsets.data_ptr<int32_t>(), tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  computed_positions_kernel<<<dim3{unsigned(tiles), unsigned(L)}, kTile, 0, stream>>>(
      stacked.data_ptr<bool>(), n, tiles, tile_offsets.data_ptr<int32_t>(), comp_pos.data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {depth, stacked, counts, comp_pos, tile_offsets};
}

at::Tensor mask_rows_cuda(const at::Tensor& stacked, const at::Tensor& counts, const at::Tensor& tile_offsets,
                          int64_t listed) {
  const int64_t K = stacked.size(0), n = stacked.size(1), tiles = (n + kTile - 1) / kTile;
  TORCH_CHECK(stacked.is_cuda() && stacked.is_contiguous() && counts.numel() >= K &&
                  tile_offsets.sizes() == at::IntArrayRef({K, tiles}),
              "mask_rows_cuda: depth_masks_cuda's stacked masks, counts and tile offsets");
  at::Tensor rows = at::empty({listed}, counts.options());
  if (listed == 0 || n == 0) return rows;
  mask_rows_kernel<<<dim3{unsigned(tiles), unsigned(K)}, kTile, 0, at::cuda::getCurrentCUDAStream()>>>(
      stacked.data_ptr<bool>(), n, tiles, tile_offsets.data_ptr<int32_t>(), counts.data_ptr<int64_t>(),
      rows.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return rows;
}

}  // namespace adgnn::kernels
