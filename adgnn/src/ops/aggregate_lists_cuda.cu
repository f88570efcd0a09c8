// The CUDA backward of a few computed rows by reader lists (kernels::aggregate_backward_x_lists_cuda).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "ops/cuda_rows.cuh"
#include "ops/kernels.h"
#include "ops/spmm_device.cuh"

namespace adgnn::kernels {

namespace {

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
  using A = at::opmath_type<T>;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp > *count_less_one || warp >= max_owners) return;  // the whole warp
  const VT* gv = reinterpret_cast<const VT*>(g);
  VT* ov = reinterpret_cast<VT*>(out);
  const int32_t owner = owners[warp];
  if (owner < 0) {  // a computed row that nobody reads: its self term alone
    const int64_t i = -1 - int64_t(owner), r = rows[i];
    for (int64_t v = lane; v < vecs; v += 32) {
      typename P::acc acc = P::zero();
      P::fma(acc, A(self_w[self_by_row ? r : i]), gv[i * vecs + v]);
      ov[r * vecs + v] = P::store(acc);
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
  A sorted_a = A(0);
  if (listed) {
    int rank = 0;  // this lane's item among the list's, in increasing entry order
    for (int s = 0; s < m; ++s) rank += __shfl_sync(0xffffffffu, item, s) < item;
    const int32_t my_i = lane < m ? link[item].y : 0;
    const A my_a = lane < m ? (w ? A(w[item]) : A(1)) : A(0);
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
    typename P::acc acc = P::zero();
    if (listed) {
      // Eight gathers in flight before their FMAs (in list order: the sum of one at a time).
      constexpr int U = 8;
      for (int s = 0; s < m; s += U) {
        VT vals[U];
        A as[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int32_t i = __shfl_sync(0xffffffffu, sorted_i, (s + u) & 31);
          as[u] = __shfl_sync(0xffffffffu, sorted_a, (s + u) & 31);
          vals[u] = s + u < m && v < vecs ? gv[int64_t(i) * vecs + v] : P::zeros();
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (s + u < m) P::fma(acc, as[u], vals[u]);
      }
    } else {
      add_entries<T, V>(acc, t_ptr[j], t_ptr[j + 1], lane, 32, 0xffffffffu, t_row, t_entry, w, pos, gv, v, vecs);
    }
    if (v < vecs) {
      if (self_w && self_at >= 0) P::fma(acc, A(self_w[self_by_row ? j : self_at]), gv[int64_t(self_at) * vecs + v]);
      ov[j * vecs + v] = P::store(acc);
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
  __shared__ typename Pack<T, V>::acc part[kLongWarps * 32];
  const int64_t count = std::min<int64_t>(int64_t(*long_count_less_one) + 1, long_capacity);
  for (int64_t q = blockIdx.x; q < count; q += gridDim.x) {  // (count: the same for the whole block)
    const int64_t j = long_owners[q];
    sum_row_on_block<T, V, SelfByRow>(t_ptr, t_row, t_entry, w, pos, g, j, j, vecs, self_w, true, n_dst, out, part);
  }
}

}  // namespace

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
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, g.scalar_type(), "aggregate_backward_x_lists_cuda", [&] {
    using T = scalar_t;
    constexpr int kVec = kPackWidth<T>;
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

}  // namespace adgnn::kernels
