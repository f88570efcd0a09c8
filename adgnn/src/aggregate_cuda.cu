// CUDA CSR aggregation. One kernel serves the forward (CSR rows) and the backward to x (the
// transposed CSR, prepared once per graph): a group of lanes owns an output row, loads up to
// one entry per lane at once (column, weight), then walks them with shuffles while every lane
// accumulates its own feature columns in registers, vectorised (float4 / double2) where the row
// width allows. Rows are independent: no atomics, a fixed summation order, deterministic bits.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <map>
#include <utility>

#include "cuda_rows.cuh"
#include "kernels.h"

namespace adgnn::kernels {

namespace {

template <typename T, int V>
struct Pack;
template <>
struct Pack<float, 4> {
  using type = float4;
  __device__ static void fma(float4& acc, float a, const float4 v) {
    acc.x += a * v.x; acc.y += a * v.y; acc.z += a * v.z; acc.w += a * v.w;
  }
  __device__ static float4 zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
};
template <>
struct Pack<double, 2> {
  using type = double2;
  __device__ static void fma(double2& acc, double a, const double2 v) { acc.x += a * v.x; acc.y += a * v.y; }
  __device__ static double2 zero() { return make_double2(0.0, 0.0); }
};
template <typename T>
struct Pack<T, 1> {
  using type = T;
  __device__ static void fma(T& acc, T a, const T v) { acc += a * v; }
  __device__ static T zero() { return T(0); }
};

// The lanes of this thread's group: shuffles name only them, since the groups of one warp walk
// rows of different lengths (blocks are whole warps and tpr divides 32, so groups never straddle
// warps).
__device__ unsigned group_mask(int tpr) {
  if (tpr == 32) return 0xffffffffu;
  return ((1u << tpr) - 1u) << ((threadIdx.x % 32) / tpr * tpr);
}

// acc += the entries [begin, end) of one row for this lane's vector v, walked by `width` lanes
// (mask: theirs): each lane loads one entry (column, weight), then eight gathers are in flight
// before their FMAs (a warp would otherwise wait for each row before issuing the next load,
// in-order issue, which leaves long rows latency-bound). The FMAs run in entry order, so the sum
// is the same as one at a time. Entries whose column maps to pos < 0 are skipped.
// Clamped: the eight gathers are unconditional (a skipped entry, or a lane past the row's
// vectors, loads row 0's vector 0 and adds nothing), so the compiler issues them before the
// FMAs. As conditional loads with a zero default, the block-per-row kernels' (at 64 registers)
// would wait for each before the next: one gather in flight per warp. spmm_rows too (more loads
// in flight at its 64-register cap, and fewer bytes spilled at float4).
template <typename T, int V, bool Clamped = false>
__device__ void add_entries(typename Pack<T, V>::type& acc, int64_t begin, int64_t end, int lane, int width,
                            unsigned mask, const int32_t* __restrict__ idx, const int64_t* __restrict__ eid,
                            const T* __restrict__ w, const int32_t* __restrict__ pos,
                            const typename Pack<T, V>::type* __restrict__ xv, int64_t v, int64_t vecs) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  for (int64_t b = begin; b < end; b += width) {
    const int64_t p = b + lane;
    int32_t c = -1;
    T a = T(0);
    if (p < end) {
      c = idx[p];
      if (pos) c = pos[c];
      a = w ? w[eid ? eid[p] : p] : T(1);
    }
    const int n = int(end - b < width ? end - b : width);
    if (pos) {
      // The backward over a transpose when few rows were computed (AD's deeper layers): most
      // entries are skipped; where fewer than a quarter of this chunk's are computed, only those
      // are gathered, in entry order (the sum below, without its additions of zero).
      const unsigned bits = __ballot_sync(mask, c >= 0) >> ((threadIdx.x % 32) / width * width);
      unsigned hits = width == 32 ? bits : bits & ((1u << width) - 1u);
      if (__popc(hits) * 4 < n) {
        while (hits) {
          const int j = __ffs(hits) - 1;
          hits &= hits - 1;
          const int32_t cj = __shfl_sync(mask, c, j, width);
          const T aj = __shfl_sync(mask, a, j, width);
          if (v < vecs) P::fma(acc, aj, xv[int64_t(cj) * vecs + v]);
        }
        continue;
      }
    }
    // Every chunk of U entries, the last one included, issues its gathers before its FMAs: a
    // remainder walked one entry at a time waited a whole memory latency per entry, and most rows
    // of a power-law graph have fewer than U entries. Lanes past n load nothing and add
    // nothing (j + u < n is the same on every lane of the group; a shuffle reads lane j + u modulo
    // the width).
    constexpr int U = 8;
    for (int j = 0; j < n; j += U) {
      VT vals[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int32_t cj = __shfl_sync(mask, c, j + u, width);
        if (Clamped) vals[u] = xv[int64_t(j + u < n && cj >= 0 ? cj : 0) * vecs + (v < vecs ? v : 0)];
        else vals[u] = (j + u < n && cj >= 0 && v < vecs) ? xv[int64_t(cj) * vecs + v] : P::zero();
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const T au = __shfl_sync(mask, a, j + u, width);  // after the loads: no register held across them
        const bool real = !Clamped || (__shfl_sync(mask, c, j + u, width) >= 0 && v < vecs);
        if (j + u < n && real) P::fma(acc, au, vals[u]);
      }
    }
  }
}

// acc += the self term of output row o (CSR row r): forward (pos null) self_w[o] x[r]; backward,
// for a source row o < n_self that was computed (q = pos ? pos[o] : o >= 0), self_w[q] x[q].
// ByRow: self_w holds one weight per CSR row (self_w[r] forward, self_w[o] backward). A template
// argument, not a kernel parameter: one more parameter slows the every-row SpMM (the kernel runs
// at its register cap).
template <typename T, int V, bool ByRow>
__device__ void add_self(typename Pack<T, V>::type& acc, const T* __restrict__ self_w, bool backward,
                         int64_t n_self, const int32_t* __restrict__ pos, int64_t r, int64_t o,
                         const typename Pack<T, V>::type* __restrict__ xv, int64_t v, int64_t vecs) {
  int64_t q = -1, wi = -1;
  if (!backward) {
    q = r;
    wi = ByRow ? r : o;
  } else if (o < n_self) {
    q = pos ? pos[o] : o;
    wi = ByRow ? o : q;
  }
  if (q >= 0) Pack<T, V>::fma(acc, self_w[wi], xv[q * vecs + v]);
}

// out[o] = sum over entries p of row r(o) = (rows ? rows[o] : o) of weight(p) * x[c(p)], where
// c(p) = pos ? pos[idx[p]] : idx[p] (entries with c < 0 are skipped: the backward's destination
// rows that were not computed) and weight(p) = w[eid ? eid[p] : p] (1 without w), then the self
// term when self_w is given (add_self); with out_by_row, `rows` is only the order in which the
// rows are summed and row r's output is out[r]. Rows with >= long_min entries are left to
// spmm_long_rows or spmm_listed_rows.
// `tpr` lanes per row (a power of two <= 32); x and out rows are f = vecs * V wide.
// Occupancy sets this kernel's speed: a warp has at most U gathers in flight, so the SM needs
// many warps to cover their latency. Left free, the compiler takes 80-91 registers a thread, which
// fits 16-24 warps on an SM; capped at 64 (8 blocks of 4 warps), 32 fit. A few bytes spill, and
// the kernel is still faster: on arxiv-scale (`adgnn bench --kernels`, docs/decisions/spmm-occupancy.md) this
// shape beat the uncapped kernel and 4 blocks of 8 warps, 2 of 16 and 5-8 of 8 (more spills).
constexpr int kRowsThreads = 128, kRowsMinBlocks = 8;
template <typename T, int V, bool SelfByRow>
__global__ void __launch_bounds__(kRowsThreads, kRowsMinBlocks)
spmm_rows(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx, const int64_t* __restrict__ eid,
          const T* __restrict__ w, const int32_t* __restrict__ pos, const T* __restrict__ x,
          const int64_t* __restrict__ rows, int64_t n_out, int64_t vecs, int tpr, const T* __restrict__ self_w,
          bool backward, int64_t n_self, int64_t long_min, bool out_by_row, const uint8_t* __restrict__ flags,
          T* __restrict__ out) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  const int64_t thread = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t o = thread / tpr;
  const int lane = threadIdx.x % tpr;
  const unsigned mask = group_mask(tpr);
  bool valid = o < n_out;
  const int64_t r = valid ? (rows ? rows[o] : o) : 0;
  const int64_t oo = out_by_row ? r : o;  // rows as a processing order: row r's output is row r
  // flags (the backward over a transpose when few rows were computed): a row flagged 0 reads
  // no computed row, and is written as zeros without loading its bounds or entries.
  const bool zero = valid && flags && flags[r] == 0;
  int64_t begin = valid && !zero ? ptr[r] : 0, end = valid && !zero ? ptr[r + 1] : 0;
  if (end - begin >= long_min) {  // a block of its own writes this row (the lanes still shuffle)
    valid = false;
    begin = end = 0;
  }
  const VT* xv = reinterpret_cast<const VT*>(x);
  for (int64_t v0 = 0; v0 < vecs; v0 += tpr) {
    const int64_t v = v0 + lane;
    VT acc = P::zero();
    add_entries<T, V, true>(acc, begin, end, lane, tpr, mask, idx, eid, w, pos, xv, v, vecs);
    if (self_w && valid && !zero && v < vecs)
      add_self<T, V, SelfByRow>(acc, self_w, backward, n_self, pos, r, oo, xv, v, vecs);
    if (valid && v < vecs) reinterpret_cast<VT*>(out)[oo * vecs + v] = acc;
  }
}

// aggregate_entries' sums (the few-row backward's regrouped segments). Most of its output
// rows have no entry (AD's deeper layers on products-scale: most source rows) and are only
// written as zeros. spmm_rows would give every row a group of its own whose one job first waits
// for the row's bounds: hundreds of thousands of blocks, bound by that wait and by block
// turnover. Here a warp takes 32 consecutive rows at a time, on a grid of the blocks resident at
// once: its lanes load the 32 rows' bounds together, then its groups take the rows in turn. A row
// without entries is a store of zeros that waits for nothing; a row with entries is summed as
// spmm_rows sums it (add_entries, the same lanes and order: the same bits).
constexpr int kTileThreads = 256;
template <typename T, int V>
__global__ void __launch_bounds__(kTileThreads)
spmm_segment_tiles(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx, const int64_t* __restrict__ eid,
                   const T* __restrict__ w, const T* __restrict__ x, int64_t n_out, int64_t vecs, int tpr,
                   T* __restrict__ out) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  const int lane = threadIdx.x % 32, groups = 32 / tpr, group = lane / tpr, glane = lane % tpr;
  const unsigned mask = group_mask(tpr);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  const VT* xv = reinterpret_cast<const VT*>(x);
  VT* ov = reinterpret_cast<VT*>(out);
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * 32; base < n_out; base += warps * 32) {
    const int64_t mine = base + lane;
    const int64_t my_begin = mine < n_out ? ptr[mine] : 0, my_end = mine < n_out ? ptr[mine + 1] : 0;
    const int in_tile = int(n_out - base < 32 ? n_out - base : 32);  // warp-uniform
    for (int k = 0; k < in_tile; k += groups) {
      const int t = k + group;  // this group's row of the tile (t < 32: k <= 32 - groups)
      const int64_t begin = __shfl_sync(0xffffffffu, my_begin, t), end = __shfl_sync(0xffffffffu, my_end, t);
      if (t >= in_tile) continue;
      const int64_t o = base + t;
      for (int64_t v0 = 0; v0 < vecs; v0 += tpr) {
        const int64_t v = v0 + glane;
        VT acc = P::zero();
        if (end > begin) add_entries<T, V, true>(acc, begin, end, glane, tpr, mask, idx, eid, w, nullptr, xv, v, vecs);
        if (v < vecs) ov[o * vecs + v] = acc;
      }
    }
  }
}

// The rows of long_rows (>= long_min entries), or the listed ones: one block per row, its
// warps take contiguous slices of the entries (the loads of spmm_rows, eight in flight), then
// warp 0 adds the warps' partial sums in warp order and the self term: a fixed order, so
// deterministic; the sum is grouped differently from spmm_rows' (last bits may differ).
// 16 warps (512 threads) rather than 32: the clamped loads (add_entries) then keep about six
// gathers in flight per warp at 62 registers; on products-scale both layer 1's long rows and the
// deeper layers' listed rows are faster than with 32 warps (`adgnn bench`, docs/decisions/clamped-gathers.md).
constexpr int kLongWarps = 16;
// The entries [begin, end) of row r summed by the whole block (kLongWarps warps, as described
// above) into dst's vectors: output row o with the self term when self_w is given, or a chunk's
// partial sum (self_w null). part: the block's shared scratch.
template <typename T, int V, bool SelfByRow>
__device__ void sum_on_block(int64_t begin, int64_t end, const int32_t* __restrict__ idx,
                             const int64_t* __restrict__ eid, const T* __restrict__ w,
                             const int32_t* __restrict__ pos, const T* __restrict__ x, int64_t r, int64_t o,
                             int64_t vecs, const T* __restrict__ self_w, bool backward, int64_t n_self,
                             typename Pack<T, V>::type* __restrict__ dst, typename Pack<T, V>::type* part) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t chunk = (end - begin + kLongWarps - 1) / kLongWarps;
  const int64_t wb = begin + warp * chunk < end ? begin + warp * chunk : end;
  const int64_t we = wb + chunk < end ? wb + chunk : end;
  const VT* xv = reinterpret_cast<const VT*>(x);
  for (int64_t v0 = 0; v0 < vecs; v0 += 32) {
    const int64_t v = v0 + lane;
    VT acc = P::zero();
    add_entries<T, V, true>(acc, wb, we, lane, 32, 0xffffffffu, idx, eid, w, pos, xv, v, vecs);
    part[warp * 32 + lane] = acc;
    __syncthreads();
    if (warp == 0 && v < vecs) {
      VT sum = part[lane];
      for (int k = 1; k < kLongWarps; ++k) P::fma(sum, T(1), part[k * 32 + lane]);  // exact adds
      if (self_w) add_self<T, V, SelfByRow>(sum, self_w, backward, n_self, pos, r, o, xv, v, vecs);
      dst[v] = sum;
    }
    __syncthreads();
  }
}

// One row r (output row o) summed by the whole block.
template <typename T, int V, bool SelfByRow>
__device__ void sum_row_on_block(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx,
                                 const int64_t* __restrict__ eid, const T* __restrict__ w,
                                 const int32_t* __restrict__ pos, const T* __restrict__ x, int64_t r, int64_t o,
                                 int64_t vecs, const T* __restrict__ self_w, bool backward, int64_t n_self,
                                 T* __restrict__ out, typename Pack<T, V>::type* part) {
  using VT = typename Pack<T, V>::type;
  sum_on_block<T, V, SelfByRow>(ptr[r], ptr[r + 1], idx, eid, w, pos, x, r, o, vecs, self_w, backward, n_self,
                                reinterpret_cast<VT*>(out) + o * vecs, part);
}

template <typename T, int V, bool SelfByRow>
__global__ void __launch_bounds__(kLongWarps * 32)
spmm_long_rows(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx,
               const int64_t* __restrict__ eid, const T* __restrict__ w,
               const int32_t* __restrict__ pos, const T* __restrict__ x,
               const int64_t* __restrict__ long_rows, int64_t vecs, const T* __restrict__ self_w, bool backward,
               int64_t n_self, T* __restrict__ out) {
  using VT = typename Pack<T, V>::type;
  __shared__ VT part[kLongWarps * 32];
  const int64_t r = long_rows[blockIdx.x];
  sum_row_on_block<T, V, SelfByRow>(ptr, idx, eid, w, pos, x, r, r, vecs, self_w, backward, n_self, out, part);
}

// A call that computes some rows only (AD's deeper layers: `rows`, or the backward's source rows
// flagged as read) gives a block only to those of its blocked rows that it computes. A grid over
// every blocked row of the CSR, most of whose blocks would find their row not computed and exit,
// costs more than the rows it sums on products-scale (tens of thousands of rows of >= kMidRow
// entries per rank, and the empty blocks run one after another). list_blocked_rows appends the
// output rows o of the candidates (rows[0..n) or cand[0..n)) with >= min_entries entries (and
// flagged, with flags) to list, counting them in counters[0] (zero before; spmm_listed_rows sets it
// back: listed_counters). The list's order comes from atomics, but each row's sum is one block's,
// in a fixed order: the same bits.
constexpr int64_t kListedBlocksPerSm = 4;
__global__ void list_blocked_rows(const int64_t* __restrict__ ptr, const int64_t* __restrict__ rows,
                                  const int64_t* __restrict__ cand, int64_t n, int64_t min_entries,
                                  const uint8_t* __restrict__ flags, int64_t* __restrict__ list,
                                  unsigned* __restrict__ counters) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t o = cand ? cand[i] : i;
  const int64_t r = rows ? rows[o] : o;
  if (flags && flags[r] == 0) return;  // (spmm_rows writes its zeros)
  if (ptr[r + 1] - ptr[r] >= min_entries) list[atomicAdd(counters, 1u)] = o;
}

// The listed rows (counters[0] of them), a block each: block b sums the b-th longest, and the
// (b + gridDim.x)-th, ... when the list is longer than the grid (the grid is capped: its blocks
// past the list's length, unknown at launch, exit at once). Longest first, as the length order
// of the CSR's blocked rows did: the blocks fill the SMs one row each, and a hub started last
// would end the call late (in atomic order, products-scale's deeper layers are clearly slower).
// Each block ranks the list itself (at most kLongWarps * 32 rows, a thread each, ties by output
// row; a longer list is taken as it is). Its last block sets the count back to zero (counters[1]:
// is_last_block's).
// Ranked, with chunk > 0, a row of more than `chunk` entries is split: its chunks of `chunk`
// entries are work items of their own, each a block's partial sum into partials (the row's
// chunks at consecutive slots, in rank order), and the block that completes the row's last chunk
// (done[rank], zero before and set back) adds them in chunk order with the self term. AD's deeper
// layers compute few rows, mostly hubs of thousands of entries: a block per row would leave the
// call as long as its longest row. A row of at most `chunk` entries is one item, summed by one
// block (the same bits); a split row's sum is associated by chunk (float rounding), the same on
// every run.
template <typename T, int V, bool SelfByRow>
__global__ void __launch_bounds__(kLongWarps * 32)
spmm_listed_rows(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx,
                 const int64_t* __restrict__ eid, const T* __restrict__ w,
                 const int32_t* __restrict__ pos, const T* __restrict__ x, const int64_t* __restrict__ rows,
                 const int64_t* __restrict__ list, unsigned* __restrict__ counters, int64_t vecs,
                 const T* __restrict__ self_w, bool backward, int64_t n_self, T* __restrict__ out, int64_t chunk,
                 T* __restrict__ partial_sums, unsigned* __restrict__ done) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  VT* partials = reinterpret_cast<VT*>(partial_sums);
  constexpr int kRanked = kLongWarps * 32;
  __shared__ VT part[kLongWarps * 32];
  __shared__ int64_t len[kRanked], row_o[kRanked];
  __shared__ int32_t row_items[kRanked];                              // by list position
  __shared__ int64_t first_item[kRanked + 1], o_of_rank[kRanked];  // by rank
  __shared__ bool completes;
  const int64_t listed = counters[0];  // the same for every thread of the grid
  const bool ranked = listed <= kRanked;
  const bool split = ranked && chunk > 0;
  int64_t my_rank = -1, my_o = 0, my_first = 0;
  if (ranked && threadIdx.x < listed) {
    const int64_t o = list[threadIdx.x], r = rows ? rows[o] : o;
    const int64_t l = ptr[r + 1] - ptr[r];
    len[threadIdx.x] = l;
    row_o[threadIdx.x] = my_o = o;
    // (One division per row here: in the ranking loop below it cost every block ~listed^2 / 2.)
    row_items[threadIdx.x] = int32_t(split && l > chunk ? (l + chunk - 1) / chunk : 1);
  }
  __syncthreads();
  if (ranked && threadIdx.x < listed) {
    const int64_t l = len[threadIdx.x];
    my_rank = 0;
    for (int64_t j = 0; j < listed; ++j)
      if (len[j] > l || (len[j] == l && row_o[j] < my_o)) {
        ++my_rank;
        my_first += row_items[j];
      }
    first_item[my_rank] = my_first;
    o_of_rank[my_rank] = my_o;
    if (my_rank == listed - 1) first_item[listed] = my_first + row_items[threadIdx.x];
  }
  __syncthreads();
  const int64_t items = ranked ? (listed > 0 ? first_item[listed] : 0) : listed;
  for (int64_t t = blockIdx.x; t < items; t += gridDim.x) {
    int64_t b = t;  // the item's row, by rank
    if (split) {  // the last rank whose first item is <= t
      int64_t lo = 0, hi = listed - 1;
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (first_item[mid] <= t) lo = mid;
        else hi = mid - 1;
      }
      b = lo;
    }
    const int64_t o = ranked ? o_of_rank[b] : list[b];
    const int64_t r = rows ? rows[o] : o;
    const int64_t n_items = split ? first_item[b + 1] - first_item[b] : 1;
    if (n_items == 1) {
      sum_row_on_block<T, V, SelfByRow>(ptr, idx, eid, w, pos, x, r, o, vecs, self_w, backward, n_self, out, part);
      continue;
    }
    const int64_t k = t - first_item[b], begin = ptr[r] + k * chunk;
    const int64_t end = begin + chunk < ptr[r + 1] ? begin + chunk : ptr[r + 1];
    sum_on_block<T, V, SelfByRow>(begin, end, idx, eid, w, pos, x, r, o, vecs, nullptr, backward, n_self,
                                  partials + t * vecs, part);
    __threadfence();  // this chunk's sums, visible before it counts itself done
    __syncthreads();
    if (threadIdx.x == 0) {
      completes = atomicAdd(done + b, 1u) == unsigned(n_items - 1);
      if (completes) done[b] = 0;  // (every other chunk has counted itself: the next call's zero)
    }
    __syncthreads();
    if (!completes) continue;
    __threadfence();
    const VT* xv = reinterpret_cast<const VT*>(x);
    const VT* first = partials + first_item[b] * vecs;
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
      VT sum = __ldcg(first + v);  // (L2: other blocks wrote them)
      for (int64_t c = 1; c < n_items; ++c) P::fma(sum, T(1), __ldcg(first + c * vecs + v));  // exact adds
      if (self_w) add_self<T, V, SelfByRow>(sum, self_w, backward, n_self, pos, r, o, xv, v, vecs);
      reinterpret_cast<VT*>(out)[o * vecs + v] = sum;
    }
    __syncthreads();  // (completes is rewritten by the next item)
  }
  if (is_last_block(counters + 1) && threadIdx.x == 0) counters[0] = 0;  // every block has read it
}

// grad_w[k] = <g[o], x[col[k]]> for the entries k of the computed rows (others stay 0).
template <typename T>
__global__ void edge_dots(const int64_t* __restrict__ rowptr, const int32_t* __restrict__ col,
                          const T* __restrict__ x, const T* __restrict__ g,
                          const int64_t* __restrict__ rows, int64_t n_out, int64_t f, int tpr,
                          T* __restrict__ grad_w) {
  const int64_t thread = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t o = thread / tpr;
  const int lane = threadIdx.x % tpr;
  const unsigned mask = group_mask(tpr);
  const bool valid = o < n_out;
  const int64_t r = valid ? (rows ? rows[o] : o) : 0;
  const int64_t begin = valid ? rowptr[r] : 0, end = valid ? rowptr[r + 1] : 0;
  for (int64_t k = begin; k < end; ++k) {
    const T* xs = x + int64_t(col[k]) * f;
    T acc = 0;
    for (int64_t j = lane; j < f; j += tpr) acc += g[o * f + j] * xs[j];
    for (int s = tpr / 2; s > 0; s /= 2) acc += __shfl_xor_sync(mask, acc, s, tpr);
    if (lane == 0) grad_w[k] = acc;
  }
}

// out = x * mask, the counter-based dropout mask computed in place: no [rows, cols] mask is
// stored, read, or kept for the backward (which applies the same function to the gradient).
// A group of tpr lanes walks one row's vectors (float4 / double2 where the width and alignment
// allow: coalesced 16-byte accesses), so the row's key is hashed once per row and no element
// index is divided by the width (a 64-bit division per element makes the kernel compute-bound).
// Each warp takes 32 consecutive rows at a time from a grid sized to fill the device once: their
// flags and keys are loaded and hashed by one lane each, in parallel, and the warp's groups then
// take the rows it has to write in turn. (Walking the rows one group at a time, each waiting for
// its row's flag, would let that wait bound the kernel on AD's deeper layers, where few rows are
// flagged.) A group takes R rows of its warp at a time and loads them all before the first
// products: one row at a time leaves one load in flight per warp, well below the card's bandwidth.
// flags (null: every row): rows with flag 0 are not read (forward: left unwritten; the gradient:
// zero, or untouched when accumulating). accumulate: out += x * mask on the flagged rows.
constexpr int kDropoutRows = 4;  // the rows a group of lanes has in flight (72 registers at float4)
// One vector of V elements whose first column's key is c0 (the row's key plus the column): a =
// a * mask, or, accumulating, o + a * mask (the product rounded on its own, as the separate
// dropout and sum it replaces). Both dropout kernels, so that they give the same bits.
template <typename T, int V, bool accumulate>
__device__ void apply_dropout_vector(typename Pack<T, V>::type& a, const typename Pack<T, V>::type& o, uint64_t c0,
                                     uint64_t threshold, T scale) {
  T* e = reinterpret_cast<T*>(&a);
  const T* f = reinterpret_cast<const T*>(&o);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const T keep = mix64(c0 + uint64_t(i)) >= threshold ? scale : T(0);
    e[i] = accumulate ? f[i] + mul_rn(e[i], keep) : e[i] * keep;
  }
}

template <typename T, int V, int R, bool accumulate>
__global__ void dropout_apply_rows(const T* __restrict__ x, const int64_t* __restrict__ gid, int64_t rows,
                                   int64_t cols, uint64_t key, uint64_t threshold, T scale,
                                   const uint8_t* __restrict__ flags, bool zero_unflagged, int tpr,
                                   T* __restrict__ out) {
  using VT = typename Pack<T, V>::type;
  const int64_t vecs = cols / V;
  const int lane = threadIdx.x % 32, groups = 32 / tpr, group = lane / tpr, glane = lane % tpr;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t base = warp * 32; base < rows; base += warps * 32) {
    const int64_t mine = base + lane;
    const bool valid = mine < rows;
    const bool flagged = valid && (flags == nullptr || flags[mine] != 0);
    const unsigned todo = __ballot_sync(0xffffffffu, flagged);
    const unsigned zero = zero_unflagged ? __ballot_sync(0xffffffffu, valid && !flagged) : 0u;
    const unsigned long long my_key = flagged ? mix64(key ^ uint64_t(gid[mine])) : 0ull;
    unsigned m = todo | zero;  // warp-uniform: every lane walks the same rows
    while (m != 0) {
      // The warp's next R * groups rows, the i-th to group i % groups: R rows per group, whose
      // loads are all issued before the first row's products (one row at a time, a warp had one
      // load in flight).
      int bit[R], from = -1;  // from: a row of the batch to read (a dropped-out one)
      uint64_t row_key[R];
      bool take[R], drop[R];
#pragma unroll
      for (int q = 0; q < R; ++q) {
        take[q] = drop[q] = false;
        bit[q] = 0;
        row_key[q] = 0;
        for (int g = 0; g < groups && m != 0; ++g, m &= m - 1) {
          const int b = __ffs(m) - 1;
          const uint64_t k = __shfl_sync(0xffffffffu, my_key, b);
          if (g == group) {
            bit[q] = b;
            row_key[q] = k;
            take[q] = true;
            drop[q] = (todo >> b) & 1u;
            if (drop[q] && from < 0) from = b;
          }
        }
      }
      for (int64_t v = glane; v < vecs; v += tpr) {
        VT a[R], o[R];
        if (from >= 0) {
          // Unconditional loads (rows not dropped out read `from` again): conditional ones with a
          // zero default are issued one after another (as in the SpMM's add_entries).
#pragma unroll
          for (int q = 0; q < R; ++q) {
            const int64_t r = base + (drop[q] ? bit[q] : from);
            a[q] = reinterpret_cast<const VT*>(x + r * cols)[v];
            if (accumulate) o[q] = reinterpret_cast<const VT*>(out + r * cols)[v];
          }
        }
#pragma unroll
        for (int q = 0; q < R; ++q) {
          if (!take[q]) continue;
          VT* outr = reinterpret_cast<VT*>(out + (base + bit[q]) * cols);
          if (!drop[q]) {
            outr[v] = Pack<T, V>::zero();
            continue;
          }
          apply_dropout_vector<T, V, accumulate>(a[q], o[q], row_key[q] + uint64_t(v * V), threshold, scale);
          outr[v] = a[q];
        }
      }
    }
  }
}

// The same values as dropout_apply_rows, for inputs whose rows are wider than a few vectors and
// not flagged (layer 1's input: every held row, 100 wide on products-scale). The tensor is walked
// as one flat array of vectors: a warp takes 32 * U consecutive ones, lane l the vectors
// base + l + 32 k, so every load and store of the warp is one contiguous span and every lane
// works (a group of 32 lanes per 25-vector row would leave 7 idle, and its loads would be the
// row's 400 bytes, not 512). The chunk's rows (at most 32: kFlatMinVecs) have their keys hashed by
// one lane each and shuffled to the vectors' lanes; a vector's row and column come from stepping
// the lane's first ones, no division per vector. U loads are issued before the first products.
constexpr int kFlatVecs = 4;  // U: a lane's vectors in flight
template <typename T, int V, bool accumulate>
__global__ void __launch_bounds__(256) dropout_apply_flat(const T* __restrict__ x, const int64_t* __restrict__ gid,
                                                          int64_t rows, int64_t vecs, uint64_t key,
                                                          uint64_t threshold, T scale, T* __restrict__ out) {
  using VT = typename Pack<T, V>::type;
  constexpr int U = kFlatVecs;
  const int lane = threadIdx.x % 32;
  const int64_t total = rows * vecs;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  const VT* xv = reinterpret_cast<const VT*>(x);
  VT* ov = reinterpret_cast<VT*>(out);
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * (32 * U); base < total;
       base += warps * (32 * U)) {
    const int64_t row0 = base / vecs;  // warp-uniform: one division per chunk
    const int64_t my_row = row0 + lane;
    const uint64_t my_key = my_row < rows ? mix64(key ^ uint64_t(gid[my_row])) : 0ull;
    int64_t r = row0, c = base - row0 * vecs + lane;  // the lane's first vector
    while (c >= vecs) {
      c -= vecs;
      ++r;
    }
    VT a[U], o[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t i = base + lane + 32 * k;
      const int64_t j = i < total ? i : total - 1;  // unconditional loads (the tail re-reads the last)
      a[k] = xv[j];
      if (accumulate) o[k] = ov[j];
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t i = base + lane + 32 * k;
      const uint64_t row_key = __shfl_sync(0xffffffffu, my_key, int(r - row0) & 31);
      if (i < total) {
        apply_dropout_vector<T, V, accumulate>(a[k], o[k], row_key + uint64_t(c * V), threshold, scale);
        ov[i] = a[k];
      }
      c += 32;
      while (c >= vecs) {  // vecs >= kFlatMinVecs: at most 4 steps
        c -= vecs;
        ++r;
      }
    }
  }
}
// The narrowest rows the flat kernel takes: a chunk of 32 * kFlatVecs vectors then spans at most
// ceil((32 U - 1) / vecs) + 1 <= 32 rows (one key per lane), and a lane's column steps past a row
// end at most 32 / vecs times per vector.
constexpr int64_t kFlatMinVecs = 8;
static_assert((32 * kFlatVecs - 1 + kFlatMinVecs - 1) / kFlatMinVecs + 1 <= 32, "a chunk's rows: one per lane");

// Lanes per row: enough vectors for the row's width, at most a warp; entries of low-degree rows
// are then loaded in batches that match the lanes.
int lanes_for(int64_t vecs) {
  int t = 1;
  while (t < 32 && t < vecs) t *= 2;
  return t;
}

// The two counters of list_blocked_rows and spmm_listed_rows, zero before the first and set back
// by the second. Not stream_counters': those are zero at every kernel boundary, and another host
// thread's kernels on the same stream (trainings run as threads, `adgnn train --run-workers`)
// may run between these two, while the count is not. So per host thread and stream (a few bytes
// each, never freed: CUDA memory freed at exit, after the driver, would fail).
unsigned* listed_counters() {
  const auto stream = at::cuda::getCurrentCUDAStream();
  thread_local auto* held = new std::map<std::pair<int, cudaStream_t>, at::Tensor>();
  at::Tensor& t = (*held)[std::make_pair(int(stream.device_index()), stream.stream())];
  if (!t.defined()) {
    t = at::empty({2}, at::TensorOptions().dtype(at::kInt).device(at::kCUDA, stream.device_index()));
    C10_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), stream));
  }
  return reinterpret_cast<unsigned*>(t.data_ptr<int32_t>());
}

// The CSR's rows with >= block_min entries (long_rows, n_long of them; null: none) are summed
// by a block each: every one (spmm_long_rows), or, when `rows` selects the computed ones or flags
// mark the read ones, those of them that the call computes (list_blocked_rows, then
// spmm_listed_rows). out_by_row: `rows` is a processing order whose rows write their own output
// rows (spmm_rows). entries: the CSR's entry count, which bounds the listed rows' chunks (0:
// unknown, no row split).
template <typename T>
void launch_spmm(const int64_t* ptr, const int32_t* idx, const int64_t* eid, const T* w,
                 const int32_t* pos, const at::Tensor& x, const int64_t* rows, int64_t n_out,
                 const T* self_w, bool backward, int64_t n_self, at::Tensor& out,
                 const int64_t* long_rows = nullptr, int64_t n_long = 0, bool out_by_row = false,
                 const uint8_t* flags = nullptr, int64_t block_min = kLongRow, bool self_by_row = false,
                 int64_t entries = 0) {
  const int64_t f = x.size(1);
  // With out_by_row, n_out counts the rows besides the long ones, which may be every row (a
  // dense graph): the long-row kernel still has to run.
  const bool long_only = n_out == 0 && out_by_row && n_long > 0;
  if (f == 0 || (n_out == 0 && !long_only)) return;
  if (x.size(0) == 0) {
    // The clamped loads read row 0 for the entries they skip: an input of no rows (a backward
    // where nothing was computed: every entry skipped) gets a row of zeros to read.
    const at::Tensor one = at::zeros({1, f}, x.options());
    launch_spmm<T>(ptr, idx, eid, w, pos, one, rows, n_out, self_w, backward, n_self, out, long_rows, n_long,
                   out_by_row, flags, block_min, self_by_row, entries);
    return;
  }
  const int64_t computed = out_by_row ? n_out + n_long : n_out;  // the rows this call writes
  constexpr int kVec = sizeof(T) == 4 ? 4 : 2;
  const bool vec_ok = f % kVec == 0 && reinterpret_cast<uintptr_t>(x.data_ptr<T>()) % (kVec * sizeof(T)) == 0 &&
                      reinterpret_cast<uintptr_t>(out.data_ptr<T>()) % (kVec * sizeof(T)) == 0;
  // A width that is not a multiple of the vector (products-scale's 47 classes) takes the scalar
  // kernel, which is as slow per entry as the 128-wide vectorised one (an H200 profile,
  // docs/decisions/padded-narrow-spmm.md). When the call computes a good share of the rows, gather from a
  // copy padded to the vector width instead: one extra pass over x and the output, against the
  // kernel's per-entry cost. (Few computed rows, AD's deeper layers: the copy would dominate.)
  if (!vec_ok && f > kVec && computed * 8 >= x.size(0)) {
    const int64_t fp = (f + kVec - 1) / kVec * kVec;
    at::Tensor xp = at::zeros({x.size(0), fp}, x.options());
    xp.slice(1, 0, f).copy_(x);
    at::Tensor outp = at::empty({out.size(0), fp}, out.options());
    launch_spmm<T>(ptr, idx, eid, w, pos, xp, rows, n_out, self_w, backward, n_self, outp, long_rows, n_long,
                   out_by_row, flags, block_min, self_by_row, entries);
    out.copy_(outp.slice(1, 0, f));
    return;
  }
  const int64_t vecs = vec_ok ? f / kVec : f;
  const int tpr = lanes_for(vecs);
  const int64_t blocks = (n_out * tpr + kRowsThreads - 1) / kRowsThreads;
  auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t long_min = n_long > 0 ? block_min : INT64_MAX;
  const T* xp = x.data_ptr<T>();
  T* op = out.data_ptr<T>();
  // Some rows computed: the rows (forward) or the flagged blocked rows (backward) are the
  // candidates for a block (list_blocked_rows).
  const bool listed = n_long > 0 && ((rows && !out_by_row) || flags);
  auto launch = [&](auto rows_kernel, auto long_kernel, auto listed_kernel) {
    if (n_out > 0) {  // (none when every row is long)
      rows_kernel<<<blocks, kRowsThreads, 0, stream>>>(ptr, idx, eid, w, pos, xp, rows, n_out, vecs, tpr, self_w,
                                                       backward, n_self, long_min, out_by_row, flags, op);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n_long == 0) return;
    if (!listed) {
      long_kernel<<<n_long, kLongWarps * 32, 0, stream>>>(ptr, idx, eid, w, pos, xp, long_rows, vecs, self_w,
                                                          backward, n_self, op);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    const bool by_rows = rows && !out_by_row;
    const int64_t n_cand = by_rows ? n_out : n_long;
    at::Tensor list = at::empty({n_cand}, x.options().dtype(at::kLong));
    unsigned* counters = listed_counters();
    // At most kListedBlocksPerSm rounds of blocks: the first rows go to SMs as they free up.
    const int64_t cap = kListedBlocksPerSm * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    list_blocked_rows<<<(n_cand + 255) / 256, 256, 0, stream>>>(ptr, by_rows ? rows : nullptr,
                                                                 by_rows ? nullptr : long_rows, n_cand, block_min,
                                                                 flags, list.data_ptr<int64_t>(), counters);
    // Long rows in chunks of kRowChunk entries: a slot of partial sums per chunk, at most one per
    // kRowChunk entries of the CSR plus one per ranked row.
    const bool chunked = entries > 0;
    const int64_t slots = chunked ? std::min<int64_t>(n_cand, kLongWarps * 32) + entries / kRowChunk : 0;
    at::Tensor partials = chunked ? at::empty({slots, vecs * (vec_ok ? kVec : 1)}, x.options()) : at::Tensor();
    unsigned* done = chunked ? stream_counters(kLongWarps * 32) : nullptr;
    const int64_t grid = std::min(std::min(n_cand, n_long) + slots, cap);
    listed_kernel<<<grid, kLongWarps * 32, 0, stream>>>(
        ptr, idx, eid, w, pos, xp, by_rows ? rows : nullptr, list.data_ptr<int64_t>(), counters, vecs, self_w,
        backward, n_self, op, chunked ? kRowChunk : 0, chunked ? partials.data_ptr<T>() : nullptr, done);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) {
      // The count may be left non-zero (the first launch went, the second not): zero it for the
      // next call (best effort: after a sticky error nothing runs any more).
      (void)cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned), stream);
      C10_CUDA_CHECK(launched);
    }
  };
  if (vec_ok && self_by_row)
    launch(spmm_rows<T, kVec, true>, spmm_long_rows<T, kVec, true>, spmm_listed_rows<T, kVec, true>);
  else if (vec_ok)
    launch(spmm_rows<T, kVec, false>, spmm_long_rows<T, kVec, false>, spmm_listed_rows<T, kVec, false>);
  else if (self_by_row)
    launch(spmm_rows<T, 1, true>, spmm_long_rows<T, 1, true>, spmm_listed_rows<T, 1, true>);
  else
    launch(spmm_rows<T, 1, false>, spmm_long_rows<T, 1, false>, spmm_listed_rows<T, 1, false>);
}

// A block per row: thread 0 flags the row, the threads its entries' columns. Threads that flag
// one shared neighbour all store the same byte value 1, so the races are benign. (A warp per row
// would walk a hub's thousands of entries 32 at a time: slow for the few hub rows of AD's deeper
// layers.)
__global__ void mark_rows_read_rows(const int64_t* __restrict__ rowptr, const int32_t* __restrict__ col,
                                    const int64_t* __restrict__ rows, uint8_t* __restrict__ flags) {
  const int64_t r = rows[blockIdx.x];
  if (threadIdx.x == 0) flags[r] = 1;
  for (int64_t k = rowptr[r] + threadIdx.x; k < rowptr[r + 1]; k += blockDim.x) flags[col[k]] = 1;
}

// The backward of very few computed rows (AD's deeper layers on arxiv-scale: a few dozen hubs or
// fewer) by reader lists. The transpose scan walks every entry of each source row that a computed
// row reads, and those are neighbours of hubs, long themselves: far more entries than the few that
// matter. Here each computed entry k (of row rows[i], column j) links itself into
// j's list (link_readers: link[k] = {previous head of j, i}); the list heads are then compacted
// into a list of owners (list_owners), and one warp per owner sums its list in entry order, the
// order of the transpose's row (sum_reader_lists). The atomics only decide the lists' order in
// memory; the sums sort it away: deterministic, and the same additions as one warp walking the
// transpose (spmm_rows), so the same bits.
constexpr int kListThreads = 256;
__global__ void link_readers(const int64_t* __restrict__ rowptr, const int32_t* __restrict__ col,
                             const int64_t* __restrict__ rows, int32_t* __restrict__ head, int2* __restrict__ link) {
  const int64_t r = rows[blockIdx.x];
  for (int64_t k = rowptr[r] + threadIdx.x; k < rowptr[r + 1]; k += blockDim.x)
    link[k] = make_int2(atomicExch(&head[col[k]], int32_t(k)), int32_t(blockIdx.x));
}

// owners[0, count): the entries that head their column's list (its last link), and -1 - i for a
// computed row rows[i] that no computed row reads but that has a self term of its own. At most
// `capacity` (the rows' entries and the rows, from the caller's count: a wrong count loses
// owners, it does not write past the buffer).
__device__ inline void add_owner(int32_t* count_less_one, int32_t* owners, int64_t capacity, int32_t owner) {
  const int64_t slot = int64_t(atomicAdd(count_less_one, 1)) + 1;
  if (slot < capacity) owners[slot] = owner;
}
__global__ void list_owners(const int64_t* __restrict__ rowptr, const int32_t* __restrict__ col,
                            const int64_t* __restrict__ rows, const int32_t* __restrict__ head, bool self_terms,
                            int64_t capacity, int32_t* __restrict__ count_less_one, int32_t* __restrict__ owners) {
  const int64_t r = rows[blockIdx.x];
  for (int64_t k = rowptr[r] + threadIdx.x; k < rowptr[r + 1]; k += blockDim.x)
    if (head[col[k]] == int32_t(k)) add_owner(count_less_one, owners, capacity, int32_t(k));
  if (threadIdx.x == 0 && self_terms && head[r] < 0)
    add_owner(count_less_one, owners, capacity, -1 - int32_t(blockIdx.x));
}

// One warp per owner: source row j = col[k] gets the sum of w[k'] g[i(k')] over its list, in
// increasing k' (lists of at most 32: one per lane, ranked by shuffles), then its self term when
// it is a computed row (spmm_rows' order). A longer list (a source row that more than 32 computed
// rows read, or a repeated column) sums j's row of the transpose instead, skipping the rows not
// computed: with `long_owners` (more than 32 computed rows, where such rows can be many and long)
// it is listed there for sum_long_reader_lists, a block per row; else this warp walks it.
template <typename T, int V>
__global__ void __launch_bounds__(kListThreads)
sum_reader_lists(const int32_t* __restrict__ count_less_one, int64_t max_owners, const int32_t* __restrict__ owners,
                 const int32_t* __restrict__ col, const int2* __restrict__ link, const int64_t* __restrict__ rows,
                 const T* __restrict__ w, const T* __restrict__ g, const T* __restrict__ self_w,
                 const int32_t* __restrict__ pos, int64_t n_dst, const int64_t* __restrict__ t_ptr,
                 const int32_t* __restrict__ t_row, const int64_t* __restrict__ t_entry, int64_t vecs,
                 bool self_by_row, int32_t* __restrict__ long_count_less_one, int32_t* __restrict__ long_owners,
                 int64_t long_capacity, T* __restrict__ out) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp > *count_less_one || warp >= max_owners) return;  // the whole warp
  const VT* gv = reinterpret_cast<const VT*>(g);
  VT* ov = reinterpret_cast<VT*>(out);
  const int32_t owner = owners[warp];
  if (owner < 0) {  // a computed row that nobody reads: its self term alone
    const int64_t i = -1 - int64_t(owner), r = rows[i];
    for (int64_t v = lane; v < vecs; v += 32) {
      VT acc = P::zero();
      P::fma(acc, self_w[self_by_row ? r : i], gv[i * vecs + v]);
      ov[r * vecs + v] = acc;
    }
    return;
  }
  const int64_t j = col[owner];
  // The list, one link per lane (the walk is warp-uniform: every lane loads the same links).
  int32_t item = -1, k = owner;
  int m = 0;
  for (; k >= 0 && m < 32; ++m) {
    if (lane == m) item = k;
    k = link[k].x;
  }
  const bool listed = k < 0;  // else longer than 32: the transpose's row
  if (!listed && long_owners) {
    if (lane == 0) add_owner(long_count_less_one, long_owners, long_capacity, int32_t(j));
    return;  // the whole warp
  }
  int32_t sorted_i = 0;
  T sorted_a = T(0);
  if (listed) {
    int rank = 0;  // this lane's item among the list's, in increasing entry order
    for (int s = 0; s < m; ++s) rank += __shfl_sync(0xffffffffu, item, s) < item;
    const int32_t my_i = lane < m ? link[item].y : 0;
    const T my_a = lane < m ? (w ? w[item] : T(1)) : T(0);
    int src = 0;  // on lane s: the lane holding the item of rank s
    for (int s = 0; s < m; ++s) {
      const unsigned b = __ballot_sync(0xffffffffu, lane < m && rank == s);
      if (lane == s) src = __ffs(b) - 1;
    }
    sorted_i = __shfl_sync(0xffffffffu, my_i, src);
    sorted_a = __shfl_sync(0xffffffffu, my_a, src);
  }
  const int32_t self_at = j < n_dst ? pos[j] : -1;
  for (int64_t v0 = 0; v0 < vecs; v0 += 32) {
    const int64_t v = v0 + lane;
    VT acc = P::zero();
    if (listed) {
      // Eight gathers in flight before their FMAs (in list order: the sum of one at a time).
      constexpr int U = 8;
      for (int s = 0; s < m; s += U) {
        VT vals[U];
        T as[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int32_t i = __shfl_sync(0xffffffffu, sorted_i, (s + u) & 31);
          as[u] = __shfl_sync(0xffffffffu, sorted_a, (s + u) & 31);
          vals[u] = s + u < m && v < vecs ? gv[int64_t(i) * vecs + v] : P::zero();
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (s + u < m) P::fma(acc, as[u], vals[u]);
      }
    } else {
      add_entries<T, V>(acc, t_ptr[j], t_ptr[j + 1], lane, 32, 0xffffffffu, t_row, t_entry, w, pos, gv, v, vecs);
    }
    if (v < vecs) {
      if (self_w && self_at >= 0) P::fma(acc, self_w[self_by_row ? j : self_at], gv[int64_t(self_at) * vecs + v]);
      ov[j * vecs + v] = acc;
    }
  }
}

// The source rows that more than 32 computed rows read (sum_reader_lists' long_owners): each
// summed over its row of the transpose by a whole block (sum_row_on_block, as spmm_long_rows),
// blocks striding over them.
template <typename T, int V, bool SelfByRow>
__global__ void __launch_bounds__(kLongWarps * 32)
sum_long_reader_lists(const int32_t* __restrict__ long_count_less_one, int64_t long_capacity,
                      const int32_t* __restrict__ long_owners, const int64_t* __restrict__ t_ptr,
                      const int32_t* __restrict__ t_row, const int64_t* __restrict__ t_entry,
                      const T* __restrict__ w, const int32_t* __restrict__ pos, const T* __restrict__ g, int64_t vecs,
                      const T* __restrict__ self_w, int64_t n_dst, T* __restrict__ out) {
  __shared__ typename Pack<T, V>::type part[kLongWarps * 32];
  const int64_t count = std::min<int64_t>(int64_t(*long_count_less_one) + 1, long_capacity);
  for (int64_t q = blockIdx.x; q < count; q += gridDim.x) {  // (count: the same for the whole block)
    const int64_t j = long_owners[q];
    sum_row_on_block<T, V, SelfByRow>(t_ptr, t_row, t_entry, w, pos, g, j, j, vecs, self_w, true, n_dst, out, part);
  }
}

}  // namespace

void mark_rows_read_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows, at::Tensor& flags) {
  TORCH_CHECK(rowptr.is_cuda() && rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kInt &&
                  rows.scalar_type() == at::kLong && flags.scalar_type() == at::kByte && flags.is_contiguous(),
              "mark_rows_read_cuda: int64 rowptr and rows, int32 col, contiguous uint8 flags on the GPU");
  const int64_t n = rows.numel();
  if (n == 0) return;
  const at::Tensor rc = rows.contiguous(), cc = col.contiguous(), pc = rowptr.contiguous();
  TORCH_CHECK(n < (int64_t(1) << 31), "mark_rows_read_cuda: at most 2^31 - 1 rows");
  mark_rows_read_rows<<<unsigned(n), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      pc.data_ptr<int64_t>(), cc.data_ptr<int32_t>(), rc.data_ptr<int64_t>(), flags.data_ptr<uint8_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor dropout_apply_cuda(const at::Tensor& x, const at::Tensor& gid, uint64_t key, uint64_t threshold,
                              float scale, const at::Tensor& row_flags, bool zero_unflagged,
                              const at::Tensor& accumulate_into) {
  const at::Tensor xc = x.contiguous();
  const uint8_t* flags = nullptr;
  if (row_flags.defined()) {
    TORCH_CHECK(row_flags.is_cuda() && row_flags.scalar_type() == at::kByte && row_flags.numel() == xc.size(0),
                "dropout_apply_cuda: row_flags must be a CUDA uint8 tensor with one entry per row");
    flags = row_flags.data_ptr<uint8_t>();
  }
  const bool accumulate = accumulate_into.defined();
  TORCH_CHECK(!accumulate || (accumulate_into.is_contiguous() && accumulate_into.sizes() == xc.sizes() &&
                              accumulate_into.scalar_type() == xc.scalar_type() && !zero_unflagged),
              "dropout_apply_cuda: accumulate into a contiguous tensor of x's shape and type (no zeroing)");
  const int64_t rows = xc.size(0), cols = xc.size(1);
  at::Tensor out = accumulate ? accumulate_into : at::empty_like(xc);
  if (rows * cols == 0) return out;
  const int threads = 256;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "dropout_apply_cuda", [&] {
    using T = scalar_t;
    constexpr int kVec = sizeof(T) == 4 ? 4 : 2;
    const bool vec_ok = cols % kVec == 0 && reinterpret_cast<uintptr_t>(xc.data_ptr<T>()) % (kVec * sizeof(T)) == 0 &&
                        reinterpret_cast<uintptr_t>(out.data_ptr<T>()) % (kVec * sizeof(T)) == 0;
    const int tpr = lanes_for(vec_ok ? cols / kVec : cols);
    // A warp per 32 rows at a time, the grid as many blocks as are resident at once.
    auto launch = [&](auto kernel) {
      const int64_t blocks = resident_blocks(kernel, threads, (rows + threads - 1) / threads);
      kernel<<<blocks, threads, 0, stream>>>(xc.data_ptr<T>(), gid.data_ptr<int64_t>(), rows, cols, key, threshold,
                                             static_cast<T>(scale), flags, zero_unflagged, tpr, out.data_ptr<T>());
    };
    if (vec_ok && flags == nullptr && cols / kVec >= kFlatMinVecs) {  // (zeroing: flags only)
      auto flat = [&](auto kernel) {
        const int64_t blocks = resident_blocks(kernel, threads, (rows * (cols / kVec) + threads * kFlatVecs - 1) /
                                                                    (threads * kFlatVecs));
        kernel<<<blocks, threads, 0, stream>>>(xc.data_ptr<T>(), gid.data_ptr<int64_t>(), rows, cols / kVec, key,
                                               threshold, static_cast<T>(scale), out.data_ptr<T>());
      };
      if (accumulate) flat(dropout_apply_flat<T, kVec, true>);
      else flat(dropout_apply_flat<T, kVec, false>);
    } else if (vec_ok && accumulate) launch(dropout_apply_rows<T, kVec, kDropoutRows, true>);
    else if (vec_ok) launch(dropout_apply_rows<T, kVec, kDropoutRows, false>);
    else if (accumulate) launch(dropout_apply_rows<T, 1, kDropoutRows, true>);
    else launch(dropout_apply_rows<T, 1, kDropoutRows, false>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

namespace {
// The rows a call sums with a block each: the schedule's first `count`, those with >= min_entries
// (kLongRow), or in a call over few rows (AD's deeper layers) >= kMidRow (kernels.h).
struct BlockRows {
  int64_t count, min_entries;
};
BlockRows block_rows(const RowSchedule& schedule, bool few_rows) {
  if (few_rows && schedule.order.defined()) return {schedule.n_mid, kMidRow};
  return {schedule.n_long, kLongRow};
}
// Each CSR row's position in `rows` (int32, -1: not among them): `given` when the caller has it.
at::Tensor row_positions(const at::Tensor& rows, int64_t n, const at::Tensor& given) {
  if (given.defined()) return given;
  const auto idx = rows.options().dtype(at::kInt);
  return at::full({n}, -1, idx).index_put_({rows}, at::arange(rows.numel(), idx));
}
}  // namespace

at::Tensor aggregate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                          const at::Tensor& x, const at::Tensor& rows, const at::Tensor& self_w,
                          const RowSchedule& schedule, bool self_by_row) {
  const int64_t n_out = rows.defined() ? rows.numel() : rowptr.numel() - 1;
  at::Tensor out = at::empty({n_out, x.size(1)}, x.options());
  const int64_t* order = schedule.order.defined() ? schedule.order.data_ptr<int64_t>() : nullptr;
  const BlockRows blocked = block_rows(schedule, rows.defined() && n_out * 8 < rowptr.numel() - 1);
  const int64_t n_long = blocked.count;
  // Every row, in length order: the long rows lead it and are spmm_long_rows', so the row kernel
  // takes the rest, writing each row's output at its own index.
  const bool by_order = !rows.defined() && order;
  const int64_t* row_list = rows.defined() ? rows.data_ptr<int64_t>() : by_order ? order + n_long : nullptr;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "aggregate_cuda", [&] {
    launch_spmm<scalar_t>(rowptr.data_ptr<int64_t>(), col.data_ptr<int32_t>(), nullptr,
                          w.defined() ? w.data_ptr<scalar_t>() : nullptr, nullptr, x, row_list,
                          by_order ? n_out - n_long : n_out,
                          self_w.defined() ? self_w.data_ptr<scalar_t>() : nullptr, false, 0, out,
                          order, n_long, by_order, nullptr, blocked.min_entries, self_by_row, col.numel());
  });
  return out;
}

at::Tensor aggregate_entries_cuda(const at::Tensor& ptr, const at::Tensor& idx, const at::Tensor& eid,
                                  const at::Tensor& w, const at::Tensor& x) {
  const int64_t n_out = ptr.numel() - 1, f = x.size(1);
  at::Tensor out = at::empty({n_out, f}, x.options());
  if (n_out == 0 || f == 0) return out;
  const at::Tensor xc = x.numel() > 0 ? x.contiguous() : at::zeros({1, f}, x.options());  // (row 0 for the clamped loads)
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "aggregate_entries_cuda", [&] {
    using T = scalar_t;
    constexpr int kVec = sizeof(T) == 4 ? 4 : 2;
    const bool vec_ok = f % kVec == 0 && reinterpret_cast<uintptr_t>(xc.data_ptr<T>()) % (kVec * sizeof(T)) == 0 &&
                        reinterpret_cast<uintptr_t>(out.data_ptr<T>()) % (kVec * sizeof(T)) == 0;
    const int64_t vecs = vec_ok ? f / kVec : f;
    auto launch = [&](auto kernel) {
      const int64_t blocks = resident_blocks(kernel, kTileThreads, (n_out + kTileThreads - 1) / kTileThreads);
      kernel<<<blocks, kTileThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          ptr.data_ptr<int64_t>(), idx.data_ptr<int32_t>(), eid.data_ptr<int64_t>(),
          w.defined() ? w.data_ptr<T>() : nullptr, xc.data_ptr<T>(), n_out, vecs, lanes_for(vecs), out.data_ptr<T>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if (vec_ok) launch(spmm_segment_tiles<T, kVec>);
    else launch(spmm_segment_tiles<T, 1>);
  });
  return out;
}

at::Tensor aggregate_backward_x_cuda(const Transposed& t, const at::Tensor& w,
                                     const at::Tensor& grad_out, const at::Tensor& rows,
                                     int64_t num_dst_rows, const at::Tensor& self_w,
                                     const at::Tensor& rows_pos, const at::Tensor& read_flags, bool self_by_row) {
  const int64_t num_src = t.rowptr.numel() - 1;
  // Output position of each computed destination row; -1: not computed, its entries skipped.
  const at::Tensor pos = rows.defined() ? row_positions(rows, num_dst_rows, rows_pos) : at::Tensor();
  at::Tensor grad_x = at::empty({num_src, grad_out.size(1)}, grad_out.options());
  // Every source row, in length order (as aggregate_cuda), with aggregate_cuda's blocked rows.
  const int64_t* order = t.schedule.order.defined() ? t.schedule.order.data_ptr<int64_t>() : nullptr;
  const BlockRows blocked = block_rows(t.schedule, pos.defined() && rows.numel() * 8 < num_dst_rows);
  const int64_t n_long = blocked.count;
  // Few destination rows computed (read_flags given): the source rows flagged 0 read none of
  // them and are written as zeros at once; the rows in index order (the order's extra load per
  // row would cost the many skipped rows more than it saves the few summed).
  const bool flagged = read_flags.defined();
  TORCH_CHECK(!flagged || (read_flags.scalar_type() == at::kByte && read_flags.is_contiguous() &&
                           read_flags.numel() == num_src),
              "aggregate_backward_x_cuda: read_flags must be contiguous uint8, one per source row");
  const bool by_order = order && !flagged;
  AT_DISPATCH_FLOATING_TYPES(grad_out.scalar_type(), "aggregate_backward_x_cuda", [&] {
    launch_spmm<scalar_t>(t.rowptr.data_ptr<int64_t>(), t.row.data_ptr<int32_t>(),
                          t.entry.data_ptr<int64_t>(), w.defined() ? w.data_ptr<scalar_t>() : nullptr,
                          pos.defined() ? pos.data_ptr<int32_t>() : nullptr, grad_out,
                          by_order ? order + n_long : nullptr,
                          by_order ? num_src - n_long : num_src,
                          self_w.defined() ? self_w.data_ptr<scalar_t>() : nullptr, true, num_dst_rows, grad_x,
                          order, n_long, by_order, flagged ? read_flags.data_ptr<uint8_t>() : nullptr,
                          blocked.min_entries, self_by_row, t.row.numel());
  });
  return grad_x;
}

at::Tensor aggregate_backward_x_lists_cuda(const at::Tensor& rowptr, const at::Tensor& col, const Transposed& t,
                                           const at::Tensor& w, const at::Tensor& grad_out, const at::Tensor& rows,
                                           const at::Tensor& rows_pos, int64_t num_src, const at::Tensor& self_w,
                                           int64_t entries, bool self_by_row) {
  const int64_t n_dst = rowptr.numel() - 1, n_rows = rows.numel();
  TORCH_CHECK(rowptr.is_cuda() && rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kInt &&
                  rows.scalar_type() == at::kLong && grad_out.size(0) == n_rows && num_src >= n_dst &&
                  col.numel() < (int64_t(1) << 31) && n_rows < (int64_t(1) << 31) && entries >= 0,
              "aggregate_backward_x_lists_cuda: int64 rowptr and rows, int32 col (< 2^31 entries) on the GPU, one "
              "gradient row per computed row, num_src >= the destination rows and the rows' entry count");
  const at::Tensor pos = row_positions(rows, n_dst, rows_pos);
  const at::Tensor g = grad_out.contiguous(), rc = rows.contiguous(), cc = col.contiguous();
  at::Tensor grad_x = zeroed_cuda({num_src, g.size(1)}, g.options());
  if (n_rows == 0 || g.size(1) == 0) return grad_x;
  // head[s] (-1: an empty list), then the owners' and the long lists' counts less one: all -1,
  // one memset.
  at::Tensor head = at::empty({num_src + 2}, rows.options().dtype(at::kInt));
  auto stream = at::cuda::getCurrentCUDAStream();
  C10_CUDA_CHECK(cudaMemsetAsync(head.data_ptr<int32_t>(), 0xff, (num_src + 2) * sizeof(int32_t), stream));
  // More than 32 computed rows: lists longer than 32 (at most one per 33 of the entries) go to
  // sum_long_reader_lists. Up to 32, only a repeated column makes one, and its warp walks it.
  const bool defer_long = n_rows > 32;
  const at::Tensor long_owners = defer_long ? at::empty({entries / 33 + 1}, head.options()) : at::Tensor();
  // link: two int32 per CSR entry, written at the computed rows' entries only.
  at::Tensor link = at::empty({std::max<int64_t>(col.numel(), 1), 2}, head.options());
  at::Tensor owners = at::empty({entries + n_rows}, head.options());
  int2* links = reinterpret_cast<int2*>(link.data_ptr<int32_t>());
  const unsigned grid_rows = unsigned(n_rows);
  link_readers<<<grid_rows, kListThreads, 0, stream>>>(rowptr.data_ptr<int64_t>(), cc.data_ptr<int32_t>(),
                                                      rc.data_ptr<int64_t>(), head.data_ptr<int32_t>(), links);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  list_owners<<<grid_rows, kListThreads, 0, stream>>>(rowptr.data_ptr<int64_t>(), cc.data_ptr<int32_t>(),
                                                     rc.data_ptr<int64_t>(), head.data_ptr<int32_t>(),
                                                     self_w.defined(), owners.numel(),
                                                     head.data_ptr<int32_t>() + num_src, owners.data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t f = g.size(1);
  const int64_t blocks = (owners.numel() * 32 + kListThreads - 1) / kListThreads;
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "aggregate_backward_x_lists_cuda", [&] {
    using T = scalar_t;
    constexpr int kVec = sizeof(T) == 4 ? 4 : 2;
    const bool vec_ok = f % kVec == 0 && reinterpret_cast<uintptr_t>(g.data_ptr<T>()) % (kVec * sizeof(T)) == 0 &&
                        reinterpret_cast<uintptr_t>(grad_x.data_ptr<T>()) % (kVec * sizeof(T)) == 0;
    auto launch = [&](auto kernel, int64_t vecs) {
      kernel<<<blocks, kListThreads, 0, stream>>>(
          head.data_ptr<int32_t>() + num_src, owners.numel(), owners.data_ptr<int32_t>(), cc.data_ptr<int32_t>(), links,
          rc.data_ptr<int64_t>(), w.defined() ? w.data_ptr<T>() : nullptr, g.data_ptr<T>(),
          self_w.defined() ? self_w.data_ptr<T>() : nullptr, pos.data_ptr<int32_t>(), n_dst,
          t.rowptr.data_ptr<int64_t>(), t.row.data_ptr<int32_t>(), t.entry.data_ptr<int64_t>(), vecs, self_by_row,
          head.data_ptr<int32_t>() + num_src + 1, defer_long ? long_owners.data_ptr<int32_t>() : nullptr,
          defer_long ? long_owners.numel() : 0, grad_x.data_ptr<T>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    auto launch_long = [&](auto kernel, int64_t vecs) {
      const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
      kernel<<<unsigned(std::min<int64_t>(long_owners.numel(), 2 * sms)), kLongWarps * 32, 0, stream>>>(
          head.data_ptr<int32_t>() + num_src + 1, long_owners.numel(), long_owners.data_ptr<int32_t>(),
          t.rowptr.data_ptr<int64_t>(), t.row.data_ptr<int32_t>(), t.entry.data_ptr<int64_t>(),
          w.defined() ? w.data_ptr<T>() : nullptr, pos.data_ptr<int32_t>(), g.data_ptr<T>(), vecs,
          self_w.defined() ? self_w.data_ptr<T>() : nullptr, n_dst, grad_x.data_ptr<T>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if (vec_ok) launch(sum_reader_lists<T, kVec>, f / kVec);
    else launch(sum_reader_lists<T, 1>, f);
    if (!defer_long) return;
    if (vec_ok && self_by_row) launch_long(sum_long_reader_lists<T, kVec, true>, f / kVec);
    else if (vec_ok) launch_long(sum_long_reader_lists<T, kVec, false>, f / kVec);
    else if (self_by_row) launch_long(sum_long_reader_lists<T, 1, true>, f);
    else launch_long(sum_long_reader_lists<T, 1, false>, f);
  });
  return grad_x;
}

at::Tensor aggregate_backward_w_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                     const at::Tensor& x, const at::Tensor& grad_out,
                                     const at::Tensor& rows) {
  const int64_t n_out = rows.defined() ? rows.numel() : rowptr.numel() - 1;
  const int64_t f = x.size(1);
  at::Tensor grad_w = at::zeros({col.numel()}, x.options());
  if (n_out == 0) return grad_w;
  const int tpr = lanes_for(f);
  const int threads = 256;
  const int64_t blocks = (n_out * tpr + threads - 1) / threads;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "aggregate_backward_w_cuda", [&] {
    edge_dots<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        rowptr.data_ptr<int64_t>(), col.data_ptr<int32_t>(), x.data_ptr<scalar_t>(),
        grad_out.data_ptr<scalar_t>(), rows.defined() ? rows.data_ptr<int64_t>() : nullptr, n_out,
        f, tpr, grad_w.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_w;
}

}  // namespace adgnn::kernels
