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
#include <type_traits>
#include <utility>

#include "ops/cuda_rows.cuh"
#include "ops/spmm_device.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

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
    typename P::acc acc = P::zero();
    add_entries<T, V, true>(acc, begin, end, lane, tpr, mask, idx, eid, w, pos, xv, v, vecs);
    if (self_w && valid && !zero && v < vecs)
      add_self<T, V, SelfByRow>(acc, self_w, backward, n_self, pos, r, oo, xv, v, vecs);
    if (valid && v < vecs) reinterpret_cast<VT*>(out)[oo * vecs + v] = P::store(acc);
  }
}

// spmm_rows' sums for rows narrower than a warp's vectors (vl = lanes_for(vecs) < 32 lanes), one
// warp per row: the row's entries are dealt in turn to the warp's S = 32 / vl groups of vl lanes
// (entry j + u S + s to group s), each group sums its share, and shuffles add the S partial sums
// (the same tree on every run: deterministic, grouped differently from spmm_rows). spmm_rows gives
// each such row a group of its own: the groups of one warp then walk rows of different lengths
// one after the other, and a short row's group idles while its neighbour's long row runs.
// Forwards only, over every row or listed rows (no positions, no flags); bfloat16 only
// (docs/decisions/dealt-rows.md). Six gathers in flight per lane: at 64 registers eight spill.
template <typename T, int V, bool SelfByRow>
__global__ void __launch_bounds__(kRowsThreads, kRowsMinBlocks)
spmm_dealt_rows(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx, const int64_t* __restrict__ eid,
                const T* __restrict__ w, const T* __restrict__ x, const int64_t* __restrict__ rows, int64_t n_out,
                int64_t vecs, int vl, const T* __restrict__ self_w, int64_t long_min, bool out_by_row,
                T* __restrict__ out) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  using A = at::opmath_type<T>;
  constexpr int U = 6;
  const int64_t o = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32, group = lane / vl, groups = 32 / vl;
  bool valid = o < n_out;
  const int64_t r = valid ? (rows ? rows[o] : o) : 0;
  const int64_t oo = out_by_row ? r : o;
  int64_t begin = valid ? ptr[r] : 0, end = valid ? ptr[r + 1] : 0;
  if (end - begin >= long_min) {  // a block of its own writes this row
    valid = false;
    begin = end = 0;
  }
  const VT* xv = reinterpret_cast<const VT*>(x);
  for (int64_t v0 = 0; v0 < vecs; v0 += vl) {
    const int64_t v = v0 + lane % vl;
    typename P::acc acc = P::zero();
    for (int64_t b = begin; b < end; b += 32) {  // each lane loads one entry (column, weight)
      const int64_t p = b + lane;
      int32_t c = 0;
      A a = A(0);
      if (p < end) {
        c = idx[p];
        a = w ? A(w[eid ? eid[p] : p]) : A(1);
      }
      const int n = int(end - b < 32 ? end - b : 32);
      for (int j = 0; j < n; j += U * groups) {
        VT vals[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {  // clamped, unconditional gathers (add_entries)
          const int e = j + u * groups + group;
          const int32_t ce = __shfl_sync(0xffffffffu, c, e & 31);
          vals[u] = xv[int64_t(e < n ? ce : 0) * vecs + (v < vecs ? v : 0)];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int e = j + u * groups + group;
          const A ae = __shfl_sync(0xffffffffu, a, e & 31);
          if (e < n && v < vecs) P::fma(acc, ae, vals[u]);
        }
      }
    }
    for (int s = vl; s < 32; s *= 2) P::add(acc, P::shfl_xor(acc, s));
    if (group == 0 && valid && v < vecs) {
      if (self_w) add_self<T, V, SelfByRow>(acc, self_w, false, 0, nullptr, r, oo, xv, v, vecs);
      reinterpret_cast<VT*>(out)[oo * vecs + v] = P::store(acc);
    }
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
        typename P::acc acc = P::zero();
        if (end > begin) add_entries<T, V, true>(acc, begin, end, glane, tpr, mask, idx, eid, w, nullptr, xv, v, vecs);
        if (v < vecs) ov[o * vecs + v] = P::store(acc);
      }
    }
  }
}

template <typename T, int V, bool SelfByRow>
__global__ void __launch_bounds__(kLongWarps * 32)
spmm_long_rows(const int64_t* __restrict__ ptr, const int32_t* __restrict__ idx,
               const int64_t* __restrict__ eid, const T* __restrict__ w,
               const int32_t* __restrict__ pos, const T* __restrict__ x,
               const int64_t* __restrict__ long_rows, int64_t vecs, const T* __restrict__ self_w, bool backward,
               int64_t n_self, T* __restrict__ out) {
  __shared__ typename Pack<T, V>::acc part[kLongWarps * 32];
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
                 at::opmath_type<T>* __restrict__ partial_sums, unsigned* __restrict__ done) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  using AV = typename P::acc;
  AV* partials = reinterpret_cast<AV*>(partial_sums);  // unrounded: the chunks add in float32
  constexpr int kRanked = kLongWarps * 32;
  __shared__ AV part[kLongWarps * 32];
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
    const AV* first = partials + first_item[b] * vecs;
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
      AV sum = P::ldcg(first + v);  // (L2: other blocks wrote them)
      for (int64_t c = 1; c < n_items; ++c) P::add(sum, P::ldcg(first + c * vecs + v));
      if (self_w) add_self<T, V, SelfByRow>(sum, self_w, backward, n_self, pos, r, o, xv, v, vecs);
      reinterpret_cast<VT*>(out)[o * vecs + v] = P::store(sum);
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
    at::opmath_type<T> acc = 0;
    for (int64_t j = lane; j < f; j += tpr) acc += at::opmath_type<T>(g[o * f + j]) * at::opmath_type<T>(xs[j]);
    for (int s = tpr / 2; s > 0; s /= 2) acc += __shfl_xor_sync(mask, acc, s, tpr);
    if (lane == 0) grad_w[k] = T(acc);
  }
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

// One CSR aggregation's launch (launch_spmm): out[o] = sum over the entries k of CSR row r of
// w[eid[k]] x[idx[k]], plus the self term, for the rows the call computes.
template <typename T>
struct SpmmLaunch {
  const int64_t* ptr = nullptr;   // the CSR's row pointer
  const int32_t* idx = nullptr;   // its columns: rows of x
  const int64_t* eid = nullptr;   // each entry's index into w (a transpose's entries); null: k itself
  const T* w = nullptr;           // one weight per entry; null: ones
  // Backward over a transpose: each destination row's position among the computed rows (-1: not
  // computed, its entries skipped); null: every row computed (the forward).
  const int32_t* pos = nullptr;
  const int64_t* rows = nullptr;  // the rows computed, in output order; null: 0..n_out-1
  int64_t n_out = 0;              // how many (besides the long rows where out_by_row)
  const T* self_w = nullptr;      // the self term's weights (add_self); null: none
  bool backward = false;          // the self term of a backward over a transpose
  int64_t n_self = 0;             // backward: the destination rows that have a self term
  // The CSR's rows with >= block_min entries (n_long of them; null: none) are summed by a block
  // each: every one (spmm_long_rows), or, when `rows` selects the computed ones or flags mark the
  // read ones, those of them that the call computes (list_blocked_rows, then spmm_listed_rows).
  const int64_t* long_rows = nullptr;
  int64_t n_long = 0;
  int64_t block_min = kLongRow;
  bool out_by_row = false;  // `rows` is a processing order whose rows write their own output rows
  // Backward over a transpose when few rows were computed: rows flagged 0 read none of them and
  // are written as zeros; null: none.
  const uint8_t* flags = nullptr;
  bool self_by_row = false;  // self_w holds one weight per CSR row (add_self's ByRow)
  int64_t entries = 0;       // the CSR's entry count: bounds the listed rows' chunks (0: no split)
};

// spmm_dealt_rows where it is used: bfloat16's 8-value vectors (nullptr otherwise).
template <typename T, int V, bool SelfByRow>
constexpr auto dealt_rows_kernel() {
  if constexpr (V == 8) return spmm_dealt_rows<T, V, SelfByRow>;
  else return nullptr;
}

template <typename T>
void launch_spmm(const SpmmLaunch<T>& a, const at::Tensor& x, at::Tensor& out) {
  const int64_t *ptr = a.ptr, *eid = a.eid, *rows = a.rows, *long_rows = a.long_rows;
  const int32_t *idx = a.idx, *pos = a.pos;
  const T *w = a.w, *self_w = a.self_w;
  const int64_t n_out = a.n_out, n_self = a.n_self, n_long = a.n_long, block_min = a.block_min, entries = a.entries;
  const bool backward = a.backward, out_by_row = a.out_by_row, self_by_row = a.self_by_row;
  const uint8_t* flags = a.flags;
  const int64_t f = x.size(1);
  // With out_by_row, n_out counts the rows besides the long ones, which may be every row (a
  // dense graph): the long-row kernel still has to run.
  const bool long_only = n_out == 0 && out_by_row && n_long > 0;
  if (f == 0 || (n_out == 0 && !long_only)) return;
  if (x.size(0) == 0) {
    // The clamped loads read row 0 for the entries they skip: an input of no rows (a backward
    // where nothing was computed: every entry skipped) gets a row of zeros to read.
    const at::Tensor one = at::zeros({1, f}, x.options());
    launch_spmm<T>(a, one, out);
    return;
  }
  const int64_t computed = out_by_row ? n_out + n_long : n_out;  // the rows this call writes
  constexpr int kVec = kPackWidth<T>;
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
    launch_spmm<T>(a, xp, outp);
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
  // A forward's rows narrower than a warp's vectors: spmm_dealt_rows (where it exists).
  const bool dealt = vec_ok && tpr < 32 && !pos && !flags && !backward;
  auto launch = [&](auto rows_kernel, auto dealt_kernel, auto long_kernel, auto listed_kernel) {
    bool rows_done = n_out == 0;  // (none when every row is long)
    if constexpr (!std::is_null_pointer_v<decltype(dealt_kernel)>) {
      if (!rows_done && dealt) {
        dealt_kernel<<<(n_out * 32 + kRowsThreads - 1) / kRowsThreads, kRowsThreads, 0, stream>>>(
            ptr, idx, eid, w, xp, rows, n_out, vecs, tpr, self_w, long_min, out_by_row, op);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        rows_done = true;
      }
    }
    if (!rows_done) {
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
    at::Tensor partials = chunked ? at::empty({slots, vecs * (vec_ok ? kVec : 1)},
                                              x.options().dtype(at::toOpMathType(x.scalar_type())))
                                  : at::Tensor();
    unsigned* done = chunked ? stream_counters(kLongWarps * 32) : nullptr;
    const int64_t grid = std::min(std::min(n_cand, n_long) + slots, cap);
    listed_kernel<<<grid, kLongWarps * 32, 0, stream>>>(
        ptr, idx, eid, w, pos, xp, by_rows ? rows : nullptr, list.data_ptr<int64_t>(), counters, vecs, self_w,
        backward, n_self, op, chunked ? kRowChunk : 0, chunked ? partials.data_ptr<at::opmath_type<T>>() : nullptr, done);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) {
      // The count may be left non-zero (the first launch went, the second not): zero it for the
      // next call (best effort: after a sticky error nothing runs any more).
      (void)cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned), stream);
      C10_CUDA_CHECK(launched);
    }
  };
  if (vec_ok && self_by_row)
    launch(spmm_rows<T, kVec, true>, dealt_rows_kernel<T, kVec, true>(), spmm_long_rows<T, kVec, true>, spmm_listed_rows<T, kVec, true>);
  else if (vec_ok)
    launch(spmm_rows<T, kVec, false>, dealt_rows_kernel<T, kVec, false>(), spmm_long_rows<T, kVec, false>, spmm_listed_rows<T, kVec, false>);
  else if (self_by_row)
    launch(spmm_rows<T, 1, true>, nullptr, spmm_long_rows<T, 1, true>, spmm_listed_rows<T, 1, true>);
  else
    launch(spmm_rows<T, 1, false>, nullptr, spmm_long_rows<T, 1, false>, spmm_listed_rows<T, 1, false>);
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
}  // namespace

at::Tensor row_positions(const at::Tensor& rows, int64_t n, const at::Tensor& given) {
  if (given.defined()) return given;
  const auto idx = rows.options().dtype(at::kInt);
  return at::full({n}, -1, idx).index_put_({rows}, at::arange(rows.numel(), idx));
}

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
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "aggregate_cuda", [&] {
    SpmmLaunch<scalar_t> a;
    a.ptr = rowptr.data_ptr<int64_t>();
    a.idx = col.data_ptr<int32_t>();
    a.w = w.defined() ? w.data_ptr<scalar_t>() : nullptr;
    a.rows = row_list;
    a.n_out = by_order ? n_out - n_long : n_out;
    a.self_w = self_w.defined() ? self_w.data_ptr<scalar_t>() : nullptr;
    a.long_rows = order;
    a.n_long = n_long;
    a.block_min = blocked.min_entries;
    a.out_by_row = by_order;
    a.self_by_row = self_by_row;
    a.entries = col.numel();
    launch_spmm(a, x, out);
  });
  return out;
}

at::Tensor aggregate_entries_cuda(const at::Tensor& ptr, const at::Tensor& idx, const at::Tensor& eid,
                                  const at::Tensor& w, const at::Tensor& x) {
  const int64_t n_out = ptr.numel() - 1, f = x.size(1);
  at::Tensor out = at::empty({n_out, f}, x.options());
  if (n_out == 0 || f == 0) return out;
  const at::Tensor xc = x.numel() > 0 ? x.contiguous() : at::zeros({1, f}, x.options());  // (row 0 for the clamped loads)
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "aggregate_entries_cuda", [&] {
    using T = scalar_t;
    constexpr int kVec = kPackWidth<T>;
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
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, grad_out.scalar_type(), "aggregate_backward_x_cuda", [&] {
    SpmmLaunch<scalar_t> a;
    a.ptr = t.rowptr.data_ptr<int64_t>();
    a.idx = t.row.data_ptr<int32_t>();
    a.eid = t.entry.data_ptr<int64_t>();
    a.w = w.defined() ? w.data_ptr<scalar_t>() : nullptr;
    a.pos = pos.defined() ? pos.data_ptr<int32_t>() : nullptr;
    a.rows = by_order ? order + n_long : nullptr;
    a.n_out = by_order ? num_src - n_long : num_src;
    a.self_w = self_w.defined() ? self_w.data_ptr<scalar_t>() : nullptr;
    a.backward = true;
    a.n_self = num_dst_rows;
    a.long_rows = order;
    a.n_long = n_long;
    a.block_min = blocked.min_entries;
    a.out_by_row = by_order;
    a.flags = flagged ? read_flags.data_ptr<uint8_t>() : nullptr;
    a.self_by_row = self_by_row;
    a.entries = t.row.numel();
    launch_spmm(a, grad_out, grad_x);
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
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "aggregate_backward_w_cuda", [&] {
    edge_dots<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        rowptr.data_ptr<int64_t>(), col.data_ptr<int32_t>(), x.data_ptr<scalar_t>(),
        grad_out.data_ptr<scalar_t>(), rows.defined() ? rows.data_ptr<int64_t>() : nullptr, n_out,
        f, tpr, grad_w.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_w;
}

}  // namespace adgnn::kernels
