// CUDA counter-based dropout (dropout.cpp's kernels: kernels::dropout_apply_cuda).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

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
// The products in A (float32 for bfloat16 rows), rounded to T once.
template <typename T, int V, bool accumulate, typename A = at::opmath_type<T>>
__device__ void apply_dropout_vector(typename Pack<T, V>::type& a, const typename Pack<T, V>::type& o, uint64_t c0,
                                     uint64_t threshold, A scale) {
  T* e = reinterpret_cast<T*>(&a);
  const T* f = reinterpret_cast<const T*>(&o);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const A keep = mix64(c0 + uint64_t(i)) >= threshold ? scale : A(0);
    e[i] = T(accumulate ? A(f[i]) + mul_rn(A(e[i]), keep) : A(e[i]) * keep);
  }
}

template <typename T, int V, int R, bool accumulate>
__global__ void dropout_apply_rows(const T* __restrict__ x, const int64_t* __restrict__ gid, int64_t rows,
                                   int64_t cols, uint64_t key, uint64_t threshold, at::opmath_type<T> scale,
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
            outr[v] = Pack<T, V>::zeros();
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
                                                          uint64_t threshold, at::opmath_type<T> scale,
                                                          T* __restrict__ out) {
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

}  // namespace

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
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, xc.scalar_type(), "dropout_apply_cuda", [&] {
    using T = scalar_t;
    using A = at::opmath_type<T>;
    constexpr int kVec = kPackWidth<T>;
    const bool vec_ok = cols % kVec == 0 && reinterpret_cast<uintptr_t>(xc.data_ptr<T>()) % (kVec * sizeof(T)) == 0 &&
                        reinterpret_cast<uintptr_t>(out.data_ptr<T>()) % (kVec * sizeof(T)) == 0;
    const int tpr = lanes_for(vec_ok ? cols / kVec : cols);
    // A warp per 32 rows at a time, the grid as many blocks as are resident at once.
    auto launch = [&](auto kernel) {
      const int64_t blocks = resident_blocks(kernel, threads, (rows + threads - 1) / threads);
      kernel<<<blocks, threads, 0, stream>>>(xc.data_ptr<T>(), gid.data_ptr<int64_t>(), rows, cols, key, threshold,
                                             static_cast<A>(scale), flags, zero_unflagged, tpr, out.data_ptr<T>());
    };
    if (vec_ok && flags == nullptr && cols / kVec >= kFlatMinVecs) {  // (zeroing: flags only)
      auto flat = [&](auto kernel) {
        const int64_t blocks = resident_blocks(kernel, threads, (rows * (cols / kVec) + threads * kFlatVecs - 1) /
                                                                    (threads * kFlatVecs));
        kernel<<<blocks, threads, 0, stream>>>(xc.data_ptr<T>(), gid.data_ptr<int64_t>(), rows, cols / kVec, key,
                                               threshold, static_cast<A>(scale), out.data_ptr<T>());
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

}  // namespace adgnn::kernels
