// The halo plan's CUDA kernels (kernels.h): a distributed pass's read bits and exchange masks in
// one pass each over a rank's boundary entries, send list and halo rows, replacing about thirty
// whole-array operations per pass (a gather, a type conversion and a scatter per layer and side,
// a sizeable share of a products-scale step on 4 GPUs: docs/decisions/halo-plan-kernels.md).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

using u64 = unsigned long long;
constexpr unsigned kFullWarp = 0xffffffffu;

// OR-ing is idempotent: a word that already holds the bits needs no atomic (a stale read only
// costs one more atomic; the bits only ever grow).
__device__ inline void or_bits(u64* word, u64 bits) {
  if ((*word & bits) != bits) atomicOr(word, bits);
}

// (An entry whose readers compute none of `layers` reads neither its owner nor either word.)
__global__ void halo_read_bits_kernel(const int32_t* __restrict__ br, const int32_t* __restrict__ bh,
                                      const int64_t* __restrict__ owner, int64_t P,
                                      const int64_t* __restrict__ comp_owned, const int64_t* __restrict__ comp_halo,
                                      int64_t entries, u64 layers, u64* peer_bits, u64* halo_bits) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < entries; e += stride) {
    const int64_t r = br[e], h = bh[e];
    const u64 read_there = (comp_halo ? u64(comp_halo[h]) : ~u64(0)) & layers;
    const u64 read_here = (comp_owned ? u64(comp_owned[r]) : ~u64(0)) & layers;
    if (read_there != 0) or_bits(peer_bits + (r * P + owner[h]), read_there);
    if (read_here != 0) or_bits(halo_bits + h, read_here);
  }
}

// Per entry, the layers in order (the dirty state carries from one to the next). Counts per
// (layer, peer) add up per warp (a ballot when the warp's entries share a peer, as all but the
// few warps at a peer's boundary do) in shared memory, then once per block in global memory
// (kShared) or straight in global memory when K * P counters do not fit.
template <bool kShared>
__global__ void halo_keep_masks_kernel(const int64_t* __restrict__ comp, const int64_t* __restrict__ comp_idx,
                                       const int64_t* __restrict__ reads, const int64_t* __restrict__ reads_idx,
                                       const int64_t* __restrict__ offsets, int P, int64_t n, int t0, int K,
                                       u64 width_changed, bool all_readers, bool* __restrict__ dirty,
                                       bool* __restrict__ go, u64* counts) {
  extern __shared__ unsigned int block_counts[];
  if (kShared) {
    for (int j = threadIdx.x; j < K * P; j += blockDim.x) block_counts[j] = 0;
    __syncthreads();
  }
  const int lane = threadIdx.x % 32;
  // Every thread of a block runs the same iterations, so the warps stay whole for the ballots.
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x; base < n; base += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const bool valid = i < n;
    int peer = 0;
    u64 c = 0, r = 0;
    bool d = false;
    if (valid) {
      c = u64(comp[comp_idx ? comp_idx[i] : i]);
      r = u64(reads[reads_idx ? reads_idx[i] : i]);
      d = dirty[i];
      int lo = 0, hi = P - 1;  // the last peer whose entries start at or before i
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (offsets[mid] <= i) lo = mid;
        else hi = mid - 1;
      }
      peer = lo;
    }
    // Lane 0 holds the warp's first entry: valid whenever any lane is.
    const int peer0 = __shfl_sync(kFullWarp, peer, 0);
    const bool one_peer = __all_sync(kFullWarp, !valid || peer == peer0);
    for (int k = 0; k < K; ++k) {
      const int t = t0 + k;
      d = d || ((width_changed >> (t - 1)) & 1) || ((c >> (t - 2)) & 1);
      const bool moves = valid && d && (all_readers || ((r >> (t - 1)) & 1));
      if (valid) go[int64_t(k) * n + i] = moves;
      if (moves) d = false;
      if (one_peer) {
        const unsigned hits = __ballot_sync(kFullWarp, moves);
        if (lane == 0 && hits != 0) {
          if (kShared) atomicAdd(&block_counts[k * P + peer0], unsigned(__popc(hits)));
          else atomicAdd(&counts[k * P + peer0], u64(__popc(hits)));
        }
      } else if (moves) {
        if (kShared) atomicAdd(&block_counts[k * P + peer], 1u);
        else atomicAdd(&counts[k * P + peer], u64(1));
      }
    }
    if (valid) dirty[i] = d;
  }
  if (kShared) {
    __syncthreads();
    for (int j = threadIdx.x; j < K * P; j += blockDim.x)
      if (block_counts[j] != 0) atomicAdd(&counts[j], u64(block_counts[j]));
  }
}

}  // namespace

void halo_read_bits_cuda(const at::Tensor& boundary, const at::Tensor& halo_owner, int64_t P,
                         const at::Tensor& comp_owned, const at::Tensor& comp_halo, at::Tensor& peer_bits,
                         at::Tensor& halo_bits, uint64_t layers) {
  const int64_t entries = boundary.size(1);
  if (entries == 0) return;
  const int threads = 256;
  auto ptr = [](const at::Tensor& t) { return t.defined() ? t.data_ptr<int64_t>() : nullptr; };
  const int32_t* b = boundary.data_ptr<int32_t>();
  halo_read_bits_kernel<<<grid_for(entries, threads, 8), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      b, b + entries, halo_owner.data_ptr<int64_t>(), P, ptr(comp_owned), ptr(comp_halo), entries, u64(layers),
      reinterpret_cast<u64*>(peer_bits.data_ptr<int64_t>()), reinterpret_cast<u64*>(halo_bits.data_ptr<int64_t>()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor halo_keep_masks_cuda(const at::Tensor& comp, const at::Tensor& comp_idx, const at::Tensor& reads,
                                const at::Tensor& reads_idx, const at::Tensor& offsets, int64_t t0, int64_t K,
                                uint64_t width_changed, bool all_readers, at::Tensor& dirty, at::Tensor& go) {
  const int64_t n = dirty.numel(), P = offsets.numel() - 1;
  at::Tensor counts = at::zeros({K, P}, offsets.options());
  if (n == 0) return counts;
  const int threads = 256;
  const int64_t blocks = grid_for(n, threads, 8);
  auto ptr = [](const at::Tensor& t) { return t.defined() ? t.data_ptr<int64_t>() : nullptr; };
  const size_t shared = size_t(K * P) * sizeof(unsigned int);
  auto stream = at::cuda::getCurrentCUDAStream();
  auto* cnt = reinterpret_cast<u64*>(counts.data_ptr<int64_t>());
  if (shared <= 48 * 1024)
    halo_keep_masks_kernel<true><<<blocks, threads, shared, stream>>>(
        comp.data_ptr<int64_t>(), ptr(comp_idx), reads.data_ptr<int64_t>(), ptr(reads_idx),
        offsets.data_ptr<int64_t>(), int(P), n, int(t0), int(K), width_changed, all_readers,
        dirty.data_ptr<bool>(), go.data_ptr<bool>(), cnt);
  else
    halo_keep_masks_kernel<false><<<blocks, threads, 0, stream>>>(
        comp.data_ptr<int64_t>(), ptr(comp_idx), reads.data_ptr<int64_t>(), ptr(reads_idx),
        offsets.data_ptr<int64_t>(), int(P), n, int(t0), int(K), width_changed, all_readers,
        dirty.data_ptr<bool>(), go.data_ptr<bool>(), cnt);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return counts;
}

}  // namespace adgnn::kernels
