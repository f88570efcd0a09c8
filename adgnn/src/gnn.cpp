// Graph tensors and the differentiable CSR aggregation.
#include <torch/torch.h>

#include <algorithm>

#include "adgnn/gnn.h"

#ifdef ADGNN_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif
#include "kernels.h"

namespace adgnn {

namespace {

at::Tensor to_tensor(const std::vector<int64_t>& v) {
  return torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kInt64)
      .clone();
}
at::Tensor to_tensor(const std::vector<int32_t>& v) {
  return torch::from_blob(const_cast<int32_t*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kInt32)
      .clone();
}

class CsrAggregate : public torch::autograd::Function<CsrAggregate> {
 public:
  // Autograd cannot carry undefined inputs: absent weight / rows travel as empty tensors plus
  // a flag.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rowptr,
                            const at::Tensor& col, const at::Tensor& weight_in, const at::Tensor& x,
                            const at::Tensor& rows_in, bool has_weight, bool has_rows) {
    ctx->save_for_backward({rowptr, col, weight_in, x, rows_in});
    ctx->saved_data["has_weight"] = has_weight;
    ctx->saved_data["has_rows"] = has_rows;
    const at::Tensor weight = has_weight ? weight_in : at::Tensor();
    const at::Tensor rows = has_rows ? rows_in : at::Tensor();
    if (x.is_cuda()) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
      return kernels::aggregate_cuda(rowptr, col, weight, x, rows);
#else
      TORCH_CHECK(false, "csr_aggregate: this build has no CUDA kernels (configure with -DADGNN_CUDA=ON)");
#endif
    }
    return kernels::aggregate_cpu(rowptr, col, weight, x, rows);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor rowptr = saved[0], col = saved[1], x = saved[3];
    const at::Tensor weight = ctx->saved_data["has_weight"].toBool() ? saved[2] : at::Tensor();
    const at::Tensor rows = ctx->saved_data["has_rows"].toBool() ? saved[4] : at::Tensor();
    const at::Tensor g = grads[0].contiguous();
    at::Tensor grad_x, grad_w;
    if (x.is_cuda()) {
      // Edge list of the computed rows; index_add_ here is the reference path (atomics).
      const at::Tensor r = rows.defined() ? rows : torch::arange(rowptr.numel() - 1, rowptr.options());
      const at::Tensor counts = rowptr.index_select(0, r + 1) - rowptr.index_select(0, r);
      const at::Tensor out_idx = torch::repeat_interleave(counts);
      const at::Tensor starts = rowptr.index_select(0, r);
      const at::Tensor offs = torch::arange(out_idx.numel(), rowptr.options()) -
                              (counts.cumsum(0) - counts).index_select(0, out_idx);
      const at::Tensor edge = starts.index_select(0, out_idx) + offs;
      const at::Tensor src = col.index_select(0, edge).to(torch::kInt64);
      // In chunks of entries, so the per-entry messages stay bounded (products-scale has 1e8
      // entries: one [entries, 128] message tensor would be 60 GB).
      const int64_t E = out_idx.numel();
      const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 29) / std::max<int64_t>(1, g.size(1)));
      if (ctx->needs_input_grad(3)) grad_x = torch::zeros_like(x);
      if (weight.defined() && ctx->needs_input_grad(2)) grad_w = torch::zeros_like(weight);
      for (int64_t b = 0; b < E; b += chunk) {
        const int64_t e = std::min(E, b + chunk);
        const at::Tensor oi = out_idx.slice(0, b, e), ed = edge.slice(0, b, e), sr = src.slice(0, b, e);
        const at::Tensor msg = g.index_select(0, oi);
        if (grad_x.defined())
          grad_x.index_add_(0, sr, weight.defined() ? msg * weight.index_select(0, ed).unsqueeze(1) : msg);
        if (grad_w.defined()) grad_w.index_put_({ed}, (msg * x.index_select(0, sr)).sum(1));
      }
    } else {
      if (ctx->needs_input_grad(3))
        grad_x = kernels::aggregate_backward_x_cpu(rowptr, col, weight, g, rows, x.size(0));
      if (weight.defined() && ctx->needs_input_grad(2))
        grad_w = kernels::aggregate_backward_w_cpu(rowptr, col, x, g, rows);
    }
    return {at::Tensor(), at::Tensor(), grad_w, grad_x, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

GraphTensors to_tensors(const Graph& g, c10::Device device) {
  GraphTensors t;
  t.num_nodes = g.num_nodes;
  t.num_features = g.features.cols;
  t.num_classes = g.num_classes;
  const Csr sym = g.symmetric();
  const Csr out = g.directed_simple();
  const Csr in = transpose_csr(out);
  t.rowptr = to_tensor(sym.indptr).to(device);
  t.col = to_tensor(sym.indices).to(device);
  t.out_rowptr = to_tensor(out.indptr).to(device);
  t.out_col = to_tensor(out.indices).to(device);
  t.in_rowptr = to_tensor(in.indptr).to(device);
  t.in_col = to_tensor(in.indices).to(device);
  t.degree = (t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  // Dense features only here: the models consume dense rows (sparse inputs densify once).
  const std::vector<float> dense = g.features.to_dense();
  t.x = torch::from_blob(const_cast<float*>(dense.data()), {g.num_nodes, g.features.cols},
                         torch::kFloat32)
            .clone()
            .to(device);
  t.y = to_tensor(g.labels).to(device);
  return t;
}

at::Tensor csr_aggregate(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight,
                         const at::Tensor& x, const at::Tensor& rows) {
  TORCH_CHECK(rowptr.scalar_type() == torch::kInt64 && col.scalar_type() == torch::kInt32,
              "csr_aggregate: rowptr must be int64 and col int32");
  TORCH_CHECK(x.dim() == 2, "csr_aggregate: x must be [nodes, features]");
  TORCH_CHECK(!weight.defined() || weight.numel() == col.numel(),
              "csr_aggregate: one weight per CSR entry");
  TORCH_CHECK(!rows.defined() || rows.scalar_type() == torch::kInt64,
              "csr_aggregate: rows must be int64");
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = weight.defined() ? weight.contiguous().to(x.scalar_type()) : weight;
  return CsrAggregate::apply(rowptr.contiguous(), col.contiguous(),
                             wc.defined() ? wc : torch::empty({0}, x.options()), xc,
                             rows.defined() ? rows.contiguous() : torch::empty({0}, rowptr.options()),
                             wc.defined(), rows.defined());
}

int64_t peak_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto idx = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    return stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  return 0;
}

void reset_peak_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index() : c10::cuda::current_device());
#endif
  (void)device;
}

bool cuda_kernels_built() {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

}  // namespace adgnn
