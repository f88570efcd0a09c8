// The backward of a few computed rows groups their CSR entries by source row (kernels.h,
// regroup_by_source_cuda): a handful of kernels and one radix sort of 32-bit keys over only the
// bits a source index needs, where the ATen operations take ~35 launches per call (edges_of_rows'
// gathers and repeat_interleave, a 64-bit or 32-bit sort, the counts' index_add and cumsum, the
// permutation's gathers), a cost paid at every deeper layer (docs/decisions/regroup-kernel.md).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

// lengths[i] = the entry count of row rows[i] (64-bit, as their running sum: a wrong count from
// the host must not hide an overflow).
__global__ void row_lengths(const int64_t* __restrict__ rowptr, const int64_t* __restrict__ rows, int64_t n_rows,
                            int64_t* __restrict__ lengths) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_rows; i += stride)
    lengths[i] = rowptr[rows[i] + 1] - rowptr[rows[i]];
}

// A thread per entry e < min(capacity, the rows' total): its row i (the first with row_end[i] > e,
// by binary search), numbered e = row_end[i - 1] + j in the order of `rows` and then of the CSR,
// gets key col (the source row), value e, and its row i and CSR position k kept by number;
// counts[col] += 1. A warp per row would walk a hub's thousands of entries 32 at a time: AD's
// deeper layers compute few rows, mostly hubs, and their longest row would set the call's time.
// Numbers past `capacity` (the caller's entry count, when wrong) are dropped: a wrong count gives a
// wrong gradient, no stray write.
__global__ void number_entries(const int64_t* __restrict__ rowptr, const int32_t* __restrict__ col,
                               const int64_t* __restrict__ rows, const int64_t* __restrict__ row_end,
                               int64_t n_rows, int64_t capacity, int32_t* __restrict__ key, int32_t* __restrict__ value,
                               int32_t* __restrict__ entry_row, int64_t* __restrict__ entry_pos,
                               int32_t* __restrict__ counts) {
  const int64_t total = row_end[n_rows - 1], n = total < capacity ? total : capacity;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    int64_t lo = 0, hi = n_rows - 1;  // row_end[hi] > e
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (row_end[mid] > e) hi = mid;
      else lo = mid + 1;
    }
    const int64_t first = lo == 0 ? 0 : row_end[lo - 1];
    const int64_t k = rowptr[rows[lo]] + (e - first);
    const int32_t c = col[k];
    key[e] = c;
    value[e] = int32_t(e);
    entry_row[e] = int32_t(lo);
    entry_pos[e] = k;
    atomicAdd(&counts[c], 1);
  }
}

// The sorted numbers' rows and CSR positions. The numbers past the rows' true count `*total` (an
// entry count from the host above it) were never written; sorted after the others (their keys are
// all ones), they read nothing: row 0, entry 0.
__global__ void gather_entries(const int32_t* __restrict__ sorted, int64_t n, const int64_t* __restrict__ total,
                               const int32_t* __restrict__ entry_row, const int64_t* __restrict__ entry_pos,
                               int32_t* __restrict__ idx, int64_t* __restrict__ eid) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t t = *total, written = t < n ? t : n;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const int32_t e = sorted[p];
    const bool ok = e >= 0 && e < written;
    idx[p] = ok ? entry_row[e] : 0;
    eid[p] = ok ? entry_pos[e] : 0;
  }
}

// cub's temporary storage from PyTorch's caching allocator (freed when the tensor goes).
at::Tensor scratch(size_t bytes, const at::TensorOptions& options) {
  return at::empty({int64_t(std::max<size_t>(bytes, 1))}, options.dtype(at::kByte));
}

// out[i] = in[0] + ... + in[i] (summed in In's type).
template <typename In, typename Out>
void inclusive_sum(const In* in, Out* out, int64_t n, const at::TensorOptions& options, cudaStream_t stream) {
  size_t bytes = 0;
  C10_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, in, out, n, stream));
  at::Tensor tmp = scratch(bytes, options);
  C10_CUDA_CHECK(cub::DeviceScan::InclusiveSum(tmp.data_ptr(), bytes, in, out, n, stream));
}

}  // namespace

RegroupedEntries regroup_by_source_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                                        int64_t num_src, int64_t entries) {
  const int64_t n_rows = rows.numel();
  TORCH_CHECK(rowptr.is_cuda() && col.device() == rowptr.device() && rows.device() == rowptr.device() &&
                  rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kInt &&
                  rows.scalar_type() == at::kLong && rowptr.is_contiguous() && col.is_contiguous() &&
                  entries >= 0 && entries < (int64_t(1) << 31) && num_src >= 0 && num_src < (int64_t(1) << 31),
              "regroup_by_source_cuda: int64 rowptr and rows, int32 col on one GPU, the rows' entry count and "
              "the source rows below 2^31");
  const auto opts = rowptr.options();
  const auto i32 = opts.dtype(at::kInt);
  auto stream = at::cuda::getCurrentCUDAStream();
  RegroupedEntries r;
  r.ptr = at::empty({num_src + 1}, opts);
  C10_CUDA_CHECK(cudaMemsetAsync(r.ptr.data_ptr<int64_t>(), 0, sizeof(int64_t), stream));
  r.idx = at::empty({entries}, i32);
  r.eid = at::empty({entries}, opts);
  if (num_src == 0) return r;
  at::Tensor counts = at::empty({num_src}, i32);
  C10_CUDA_CHECK(cudaMemsetAsync(counts.data_ptr<int32_t>(), 0, num_src * sizeof(int32_t), stream));
  if (entries > 0 && n_rows > 0) {
    const at::Tensor rc = rows.contiguous();
    at::Tensor lengths = at::empty({n_rows}, opts), row_end = at::empty({n_rows}, opts);
    const int threads = 256;
    row_lengths<<<grid_for(n_rows, threads), threads, 0, stream>>>(rowptr.data_ptr<int64_t>(), rc.data_ptr<int64_t>(),
                                                                   n_rows, lengths.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    inclusive_sum(lengths.data_ptr<int64_t>(), row_end.data_ptr<int64_t>(), n_rows, opts, stream);
    // The numbering's arrays; the sort's keys and values in and out. The keys start as all ones:
    // where the host's count exceeds the rows' entries, the numbers never written sort last.
    at::Tensor keys = at::empty({2, entries}, i32), values = at::empty({2, entries}, i32);
    C10_CUDA_CHECK(cudaMemsetAsync(keys.data_ptr<int32_t>(), 0xff, entries * sizeof(int32_t), stream));
    at::Tensor entry_row = at::empty({entries}, i32), entry_pos = at::empty({entries}, opts);
    number_entries<<<grid_for(entries, threads), threads, 0, stream>>>(
        rowptr.data_ptr<int64_t>(), col.data_ptr<int32_t>(), rc.data_ptr<int64_t>(), row_end.data_ptr<int64_t>(),
        n_rows, entries, keys[0].data_ptr<int32_t>(), values[0].data_ptr<int32_t>(), entry_row.data_ptr<int32_t>(),
        entry_pos.data_ptr<int64_t>(), counts.data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // LSD radix sort, stable: a source's entries stay in their numbering order (the ATen path's
    // stable sort), over the bits of the largest source index only.
    int bits = 1;
    while (bits < 31 && (int64_t(1) << bits) < num_src) ++bits;
    size_t bytes = 0;
    C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys[0].data_ptr<int32_t>(),
                                                   keys[1].data_ptr<int32_t>(), values[0].data_ptr<int32_t>(),
                                                   values[1].data_ptr<int32_t>(), entries, 0, bits, stream));
    at::Tensor tmp = scratch(bytes, opts);
    C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data_ptr(), bytes, keys[0].data_ptr<int32_t>(),
                                                   keys[1].data_ptr<int32_t>(), values[0].data_ptr<int32_t>(),
                                                   values[1].data_ptr<int32_t>(), entries, 0, bits, stream));
    gather_entries<<<grid_for(entries, threads), threads, 0, stream>>>(
        values[1].data_ptr<int32_t>(), entries, row_end.data_ptr<int64_t>() + n_rows - 1,
        entry_row.data_ptr<int32_t>(), entry_pos.data_ptr<int64_t>(),
        r.idx.data_ptr<int32_t>(), r.eid.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  inclusive_sum(counts.data_ptr<int32_t>(), r.ptr.data_ptr<int64_t>() + 1, num_src, opts, stream);
  return r;
}

}  // namespace adgnn::kernels
