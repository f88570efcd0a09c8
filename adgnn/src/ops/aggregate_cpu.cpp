// CPU CSR aggregation: row-parallel forward, source-parallel backward over the transposed CSR,
// so results do not depend on the thread count. bfloat16 rows are summed in float32 (a row's sum
// is held in float and rounded once when stored).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

// Row ids of the computed rows, as int64 on CPU (identity when `rows` is undefined).
int64_t rows_count(const at::Tensor& rowptr, const at::Tensor& rows) {
  return rows.defined() ? rows.numel() : rowptr.numel() - 1;
}

// One output row's sums in the accumulation type A of storage type T: the row itself where they
// are the same type, else a float buffer stored (rounded) into the row by store().
template <typename T>
class RowSums {
 public:
  using A = at::opmath_type<T>;
  explicit RowSums(int64_t f) : f_(f) {
    if (!std::is_same_v<A, T>) buf_.resize(size_t(f));
  }
  A* begin(T* row) {
    if constexpr (std::is_same_v<A, T>) return row;
    std::fill(buf_.begin(), buf_.end(), A(0));
    return buf_.data();
  }
  void store(T* row) {
    if constexpr (!std::is_same_v<A, T>)
      for (int64_t j = 0; j < f_; ++j) row[j] = T(buf_[size_t(j)]);
  }

 private:
  int64_t f_;
  std::vector<A> buf_;
};

}  // namespace

at::Tensor aggregate_cpu(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                         const at::Tensor& x, const at::Tensor& rows, const at::Tensor& self_w, bool self_by_row) {
  const int64_t n_out = rows_count(rowptr, rows);
  const int64_t f = x.size(1);
  at::Tensor out = at::zeros({n_out, f}, x.options());
  const int64_t* rp = rowptr.data_ptr<int64_t>();
  const int32_t* ci = col.data_ptr<int32_t>();
  const int64_t* ri = rows.defined() ? rows.data_ptr<int64_t>() : nullptr;
  const int64_t nnz = col.numel();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "aggregate_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* wp = w.defined() ? w.data_ptr<scalar_t>() : nullptr;
    const scalar_t* sp = self_w.defined() ? self_w.data_ptr<scalar_t>() : nullptr;
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, n_out, 64, [&](int64_t begin, int64_t end) {
      RowSums<scalar_t> sums(f);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = ri ? ri[i] : i;
        A* o = sums.begin(op + i * f);
        for (int64_t k = rp[r]; k < rp[r + 1]; ++k) {
          if (k + kPrefetch < nnz) prefetch_row(xp + int64_t(ci[k + kPrefetch]) * f, f);
          const scalar_t* src = xp + int64_t(ci[k]) * f;
          const A a = wp ? A(wp[k]) : A(1);
          for (int64_t j = 0; j < f; ++j) o[j] += a * A(src[j]);
        }
        if (sp) {
          const scalar_t* self = xp + r * f;
          const A a = A(sp[self_by_row ? r : i]);
          for (int64_t j = 0; j < f; ++j) o[j] += a * A(self[j]);
        }
        sums.store(op + i * f);
      }
    });
  });
  return out;
}

at::Tensor aggregate_backward_x_cpu(const Transposed& t, const at::Tensor& w,
                                    const at::Tensor& grad_out, const at::Tensor& rows,
                                    int64_t num_dst_rows, const at::Tensor& self_w, bool self_by_row) {
  const int64_t num_src = t.rowptr.numel() - 1;
  const int64_t f = grad_out.size(1);
  // Output position of each computed destination row (-1: not computed, its entries skipped).
  std::vector<int64_t> pos;
  if (rows.defined()) {
    pos.assign(static_cast<size_t>(num_dst_rows), -1);
    const int64_t* ri = rows.data_ptr<int64_t>();
    for (int64_t i = 0; i < rows.numel(); ++i) pos[static_cast<size_t>(ri[i])] = i;
  }
  const int64_t* tp = t.rowptr.data_ptr<int64_t>();
  const int32_t* tr = t.row.data_ptr<int32_t>();
  const int64_t* te = t.entry.data_ptr<int64_t>();
  at::Tensor grad_x = at::zeros({num_src, f}, grad_out.options());
  const int64_t nnz = t.row.numel();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, grad_out.scalar_type(), "aggregate_backward_x_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    const scalar_t* gp = grad_out.data_ptr<scalar_t>();
    const scalar_t* wp = w.defined() ? w.data_ptr<scalar_t>() : nullptr;
    const scalar_t* sp = self_w.defined() ? self_w.data_ptr<scalar_t>() : nullptr;
    scalar_t* xp = grad_x.data_ptr<scalar_t>();
    at::parallel_for(0, num_src, 64, [&](int64_t begin, int64_t end) {
      RowSums<scalar_t> sums(f);
      for (int64_t s = begin; s < end; ++s) {
        A* dst = sums.begin(xp + s * f);
        for (int64_t p = tp[s]; p < tp[s + 1]; ++p) {
          if (p + kPrefetch < nnz) {
            const int64_t ahead = pos.empty() ? tr[p + kPrefetch] : pos[static_cast<size_t>(tr[p + kPrefetch])];
            if (ahead >= 0) prefetch_row(gp + ahead * f, f);
          }
          const int64_t i = pos.empty() ? tr[p] : pos[static_cast<size_t>(tr[p])];
          if (i < 0) continue;
          const A a = wp ? A(wp[te[p]]) : A(1);
          const scalar_t* g = gp + i * f;
          for (int64_t j = 0; j < f; ++j) dst[j] += a * A(g[j]);
        }
        if (sp && s < num_dst_rows) {
          const int64_t i = pos.empty() ? s : pos[static_cast<size_t>(s)];
          if (i >= 0)
            for (int64_t j = 0; j < f; ++j) dst[j] += A(sp[self_by_row ? s : i]) * A(gp[i * f + j]);
        }
        sums.store(xp + s * f);
      }
    });
  });
  return grad_x;
}

at::Tensor aggregate_entries_cpu(const at::Tensor& ptr, const at::Tensor& idx, const at::Tensor& eid,
                                 const at::Tensor& w, const at::Tensor& x) {
  const int64_t n_out = ptr.numel() - 1, f = x.size(1);
  at::Tensor out = at::zeros({n_out, f}, x.options());
  const int64_t* pp = ptr.data_ptr<int64_t>();
  const int32_t* ip = idx.data_ptr<int32_t>();
  const int64_t* ep = eid.data_ptr<int64_t>();
  const int64_t nnz = idx.numel();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "aggregate_entries_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* wp = w.defined() ? w.data_ptr<scalar_t>() : nullptr;
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, n_out, 64, [&](int64_t begin, int64_t end) {
      RowSums<scalar_t> sums(f);
      for (int64_t i = begin; i < end; ++i) {
        A* o = sums.begin(op + i * f);
        for (int64_t k = pp[i]; k < pp[i + 1]; ++k) {
          if (k + kPrefetch < nnz) prefetch_row(xp + int64_t(ip[k + kPrefetch]) * f, f);
          const A a = wp ? A(wp[ep[k]]) : A(1);
          const scalar_t* src = xp + int64_t(ip[k]) * f;
          for (int64_t j = 0; j < f; ++j) o[j] += a * A(src[j]);
        }
        sums.store(op + i * f);
      }
    });
  });
  return out;
}

at::Tensor aggregate_backward_w_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                    const at::Tensor& x, const at::Tensor& grad_out,
                                    const at::Tensor& rows) {
  const int64_t n_out = rows_count(rowptr, rows);
  const int64_t f = x.size(1);
  at::Tensor grad_w = at::zeros({col.numel()}, x.options());
  const int64_t nnz = col.numel();
  const int64_t* rp = rowptr.data_ptr<int64_t>();
  const int32_t* ci = col.data_ptr<int32_t>();
  const int64_t* ri = rows.defined() ? rows.data_ptr<int64_t>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "aggregate_backward_w_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* gp = grad_out.data_ptr<scalar_t>();
    scalar_t* wp = grad_w.data_ptr<scalar_t>();
    at::parallel_for(0, n_out, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = ri ? ri[i] : i;
        const scalar_t* g = gp + i * f;
        for (int64_t k = rp[r]; k < rp[r + 1]; ++k) {
          if (k + kPrefetch < nnz) prefetch_row(xp + int64_t(ci[k + kPrefetch]) * f, f);
          const scalar_t* src = xp + int64_t(ci[k]) * f;
          A acc = 0;
          for (int64_t j = 0; j < f; ++j) acc += A(g[j]) * A(src[j]);
          wp[k] = scalar_t(acc);
        }
      }
    });
  });
  return grad_w;
}

static void mark_rows_read_cpu(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                               at::Tensor& flags) {
  TORCH_CHECK(rowptr.is_cpu() && rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kInt &&
                  rows.scalar_type() == at::kLong && flags.scalar_type() == at::kByte && flags.is_contiguous(),
              "mark_rows_read: int64 rowptr and rows, int32 col, contiguous uint8 flags on the CPU");
  const at::Tensor rc = rows.contiguous(), cc = col.contiguous(), pc = rowptr.contiguous();
  const int64_t* rp = pc.data_ptr<int64_t>();
  const int32_t* ci = cc.data_ptr<int32_t>();
  const int64_t* ri = rc.data_ptr<int64_t>();
  uint8_t* f = flags.data_ptr<uint8_t>();
  // One thread: the computed rows are few where flags are asked for, and threads would race on
  // shared neighbours' flags.
  for (int64_t i = 0; i < rc.numel(); ++i) {
    const int64_t r = ri[i];
    f[r] = 1;
    for (int64_t k = rp[r]; k < rp[r + 1]; ++k) f[ci[k]] = 1;
  }
}

void mark_rows_read(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows, at::Tensor& flags) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (flags.is_cuda()) return mark_rows_read_cuda(rowptr, col, rows, flags);
#endif
  mark_rows_read_cpu(rowptr, col, rows, flags);
}

}  // namespace adgnn::kernels
