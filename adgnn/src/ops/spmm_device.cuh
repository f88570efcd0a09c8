// Device functions of the CSR aggregation's kernels (internal; .cu files only): a row's entries
// summed by a group of lanes (add_entries) or by a whole block (sum_on_block), and the self term.
// aggregate_cuda.cu (the row kernels) and aggregate_lists_cuda.cu (the reader-list backward)
// share them, so both sum in the same order.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/cuda_rows.cuh"

namespace adgnn::kernels {

// Each CSR row's position in `rows` (int32, -1: not among them): `given` when the caller has it.
at::Tensor row_positions(const at::Tensor& rows, int64_t n, const at::Tensor& given);

// The lanes of this thread's group: shuffles name only them, since the groups of one warp walk
// rows of different lengths (blocks are whole warps and tpr divides 32, so groups never straddle
// warps).
__device__ inline unsigned group_mask(int tpr) {
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
__device__ void add_entries(typename Pack<T, V>::acc& acc, int64_t begin, int64_t end, int lane, int width,
                            unsigned mask, const int32_t* __restrict__ idx, const int64_t* __restrict__ eid,
                            const T* __restrict__ w, const int32_t* __restrict__ pos,
                            const typename Pack<T, V>::type* __restrict__ xv, int64_t v, int64_t vecs) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  using A = at::opmath_type<T>;
  for (int64_t b = begin; b < end; b += width) {
    const int64_t p = b + lane;
    int32_t c = -1;
    A a = A(0);
    if (p < end) {
      c = idx[p];
      if (pos) c = pos[c];
      a = w ? A(w[eid ? eid[p] : p]) : A(1);
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
          const A aj = __shfl_sync(mask, a, j, width);
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
        else vals[u] = (j + u < n && cj >= 0 && v < vecs) ? xv[int64_t(cj) * vecs + v] : P::zeros();
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const A au = __shfl_sync(mask, a, j + u, width);  // after the loads: no register held across them
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
__device__ void add_self(typename Pack<T, V>::acc& acc, const T* __restrict__ self_w, bool backward,
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
  if (q >= 0) Pack<T, V>::fma(acc, at::opmath_type<T>(self_w[wi]), xv[q * vecs + v]);
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

// The rows of long_rows (>= long_min entries), or the listed ones: one block per row, its
// warps take contiguous slices of the entries (the loads of spmm_rows, eight in flight), then
// warp 0 adds the warps' partial sums in warp order and the self term: a fixed order, so
// deterministic; the sum is grouped differently from spmm_rows' (last bits may differ).
// 16 warps (512 threads) rather than 32: the clamped loads (add_entries) then keep about six
// gathers in flight per warp at 62 registers; on products-scale both layer 1's long rows and the
// deeper layers' listed rows are faster than with 32 warps (`adgnn bench`, docs/decisions/clamped-gathers.md).
constexpr int kLongWarps = 16;
// The entries [begin, end) of row r summed by the whole block (kLongWarps warps, as described
// above) into dst's vectors: output row o with the self term when self_w is given (D: the
// storage vector), or a chunk's partial sum (self_w null; D: the accumulator, unrounded). part:
// the block's shared scratch.
template <typename T, int V, bool SelfByRow, typename D>
__device__ void sum_on_block(int64_t begin, int64_t end, const int32_t* __restrict__ idx,
                             const int64_t* __restrict__ eid, const T* __restrict__ w,
                             const int32_t* __restrict__ pos, const T* __restrict__ x, int64_t r, int64_t o,
                             int64_t vecs, const T* __restrict__ self_w, bool backward, int64_t n_self,
                             D* __restrict__ dst, typename Pack<T, V>::acc* part) {
  using P = Pack<T, V>;
  using VT = typename P::type;
  using AV = typename P::acc;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t chunk = (end - begin + kLongWarps - 1) / kLongWarps;
  const int64_t wb = begin + warp * chunk < end ? begin + warp * chunk : end;
  const int64_t we = wb + chunk < end ? wb + chunk : end;
  const VT* xv = reinterpret_cast<const VT*>(x);
  for (int64_t v0 = 0; v0 < vecs; v0 += 32) {
    const int64_t v = v0 + lane;
    AV acc = P::zero();
    add_entries<T, V, true>(acc, wb, we, lane, 32, 0xffffffffu, idx, eid, w, pos, xv, v, vecs);
    part[warp * 32 + lane] = acc;
    __syncthreads();
    if (warp == 0 && v < vecs) {
      AV sum = part[lane];
      for (int k = 1; k < kLongWarps; ++k) P::add(sum, part[k * 32 + lane]);
      if (self_w) add_self<T, V, SelfByRow>(sum, self_w, backward, n_self, pos, r, o, xv, v, vecs);
      if constexpr (std::is_same_v<D, VT>) dst[v] = P::store(sum);
      else dst[v] = sum;
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
                                 T* __restrict__ out, typename Pack<T, V>::acc* part) {
  using VT = typename Pack<T, V>::type;
  sum_on_block<T, V, SelfByRow>(ptr[r], ptr[r + 1], idx, eid, w, pos, x, r, o, vecs, self_w, backward, n_self,
                                reinterpret_cast<VT*>(out) + o * vecs, part);
}

}  // namespace adgnn::kernels
