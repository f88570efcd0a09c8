// What every backbone shares (backbones/layer.h): the rows a layer reads, its parameters'
// initialisation, and the aggregation over its rows; and the factory of the six.
#include "backbones/layer.h"

#include <ATen/OpMathType.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <tuple>

#include "adgnn/ops.h"
#include "ops/csr.h"
#include "ops/kernels.h"

namespace adgnn::detail {

at::Tensor Layer::edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& rows_entries) const {
  if (rows_entries.defined()) return rows_entries;
  if (rows.numel() == 0) return torch::zeros({}, g.rowptr.options());
  if (rows.numel() == g.num_dst) return torch::full({}, g.col.numel(), g.rowptr.options());
  return (g.rowptr.index_select(0, rows + 1) - g.rowptr.index_select(0, rows)).sum();
}

std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> Layer::read_csrs(const MessageGraph& g) const {
  return std::vector<std::pair<at::Tensor, at::Tensor>>{{g.rowptr, g.col}};
}

at::Tensor Layer::rows_read(const MessageGraph& g, const at::Tensor& rows) const {
  const auto csrs = read_csrs(g);
  if (!csrs) return {};
  std::vector<at::Tensor> sources{rows};
  for (const auto& [rowptr, col] : *csrs) sources.push_back(edges_of_rows(rowptr, col, rows).src);
  return std::get<0>(torch::_unique(torch::cat(sources), /*sorted=*/true));
}

at::Tensor Layer::read_flags(const MessageGraph& g, const at::Tensor& rows) const {
  const auto csrs = read_csrs(g);
  if (!csrs) return {};
  const auto opts = g.rowptr.options().dtype(torch::kUInt8);
#ifdef ADGNN_HAVE_CUDA_KERNELS
  at::Tensor flags = g.rowptr.is_cuda() ? kernels::zeroed_cuda({g.num_src}, opts) : torch::zeros({g.num_src}, opts);
#else
  at::Tensor flags = torch::zeros({g.num_src}, opts);
#endif
  if (csrs->empty()) return flags.index_fill_(0, rows, 1);
  for (const auto& [rowptr, col] : *csrs) kernels::mark_rows_read(rowptr, col, rows, flags);
  return flags;
}

at::Tensor Layer::add(const std::string& name, at::Tensor t) {
  t = t.to(device_, dtype_);  // initialised on the CPU generator, so every device starts identically
  t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}
at::Tensor Layer::glorot(const std::string& name, int64_t fan_in, int64_t fan_out) {
  return glorot_shape(name, {fan_in, fan_out}, fan_in, fan_out);
}
at::Tensor Layer::glorot_shape(const std::string& name, std::vector<int64_t> shape,
                               int64_t fan_in, int64_t fan_out) {
  const double a = std::sqrt(6.0 / double(fan_in + fan_out));
  return add(name, torch::empty(shape).uniform_(-a, a, gen_));
}
at::Tensor Layer::zeros(const std::string& name, int64_t n) {
  return add(name, torch::zeros({n}));
}

at::Tensor self_rows(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) {
  return rows.numel() == g.num_dst ? h.slice(0, 0, g.num_dst) : h.index_select(0, rows);
}
at::Tensor gcn_self_weight(const MessageGraph& g, const at::Tensor& rows, c10::ScalarType dt) {
  const bool all = rows.numel() == g.num_dst;
  if (g.gcn_self_weight.defined() && g.gcn_self_weight.scalar_type() == dt)
    return g.gcn_self_weight.slice(0, 0, g.num_dst);
  const at::Tensor d = all ? g.degree.slice(0, 0, g.num_dst) : g.degree.index_select(0, rows);
  // (bfloat16: computed in float32 and rounded once; bfloat16 holds integers exactly only to 256.)
  return (d.to(at::toOpMathType(dt)) + 1).reciprocal().to(dt);
}

at::Tensor csr_rows(const MessageGraph& g, const at::Tensor& rows) {
  return rows.numel() == g.num_dst ? at::Tensor() : rows;
}

at::Tensor Layer::aggregate_rows(const MessageGraph& g, const at::Tensor& weight, const at::Tensor& h,
                                 const at::Tensor& rows, const at::Tensor& self_weight) const {
  const at::Tensor listed = csr_rows(g, rows);
  const bool pos_applies = listed.defined() && rows_pos_.defined() && rows_pos_.numel() == g.rowptr.numel() - 1;
  return csr_aggregate(g.rowptr, g.col, weight, h, listed, self_weight, rows_entries_,
                       pos_applies ? rows_pos_ : at::Tensor());
}

std::unique_ptr<Layer> make_layer(Backbone backbone, int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  switch (backbone) {
    case Backbone::Gcn: return make_gcn_layer(in_dim, channels, opt);
    case Backbone::Sage: return make_sage_layer(in_dim, channels, opt);
    case Backbone::Gat: return make_gat_layer(in_dim, channels, opt);
    case Backbone::GatV2: return make_gatv2_layer(in_dim, channels, opt);
    case Backbone::MixHop: return make_mixhop_layer(in_dim, channels, opt);
    case Backbone::DirGnn: return make_dirgnn_layer(in_dim, channels, opt);
  }
  throw std::logic_error("make_layer: not a backbone");
}

}  // namespace adgnn::detail
