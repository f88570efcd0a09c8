// DirGNN (Rossi et al.) around GCN, as PyG's DirGNNConv(GCNConv):
//   h_v' = alpha GCN_out(h)_v + (1 - alpha) GCN_in(h)_v + W_root^T h_v + b_root
// over the outgoing and incoming edges, each normalised by the degree at the message's target.
#include <torch/torch.h>

#include "backbones/layer.h"
#include "adgnn/ops.h"
#include "ops/linear.h"

namespace adgnn::detail {

namespace {

class DirGnnLayer : public Layer {
 public:
  DirGnnLayer(int64_t in, int64_t out, double alpha, c10::Device d, c10::ScalarType dt, at::Generator gen) : Layer(in, out, d, dt, gen), alpha_(alpha) {
    w_in_ = glorot("conv_in.weight", in, out);
    b_in_ = zeros("conv_in.bias", out);
    w_out_ = glorot("conv_out.weight", in, out);
    b_out_ = zeros("conv_out.bias", out);
    w_root_ = glorot("lin.weight", in, out);
    b_root_ = zeros("lin.bias", out);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const at::Tensor x_in =
        linear(csr_aggregate(g.in_rowptr, g.in_col, g.in_weight, h, csr_rows(g, rows)), w_in_, b_in_);
    const at::Tensor x_out =
        linear(csr_aggregate(g.out_rowptr, g.out_col, g.out_weight, h, csr_rows(g, rows)), w_out_, b_out_);
    return alpha_ * x_out + (1 - alpha_) * x_in + linear(self_rows(g, h, rows), w_root_, b_root_);
  }
  at::Tensor self_only(const at::Tensor& h_rows) override { return self_only_leading(h_rows, -1); }
  at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) override {
    return bias_add(linear(h, w_root_, b_root_, rows), alpha_ * b_out_ + (1 - alpha_) * b_in_);
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(like(w_in_, h)); }
  std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> read_csrs(const MessageGraph& g) const override {
    return std::vector<std::pair<at::Tensor, at::Tensor>>{{g.in_rowptr, g.in_col}, {g.out_rowptr, g.out_col}};
  }
  at::Tensor edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor&) const override {
    if (rows.numel() == 0) return torch::zeros({}, g.rowptr.options());
    return (g.in_rowptr.index_select(0, rows + 1) - g.in_rowptr.index_select(0, rows)).sum() +
           (g.out_rowptr.index_select(0, rows + 1) - g.out_rowptr.index_select(0, rows)).sum();
  }

 private:
  double alpha_;
  at::Tensor w_in_, b_in_, w_out_, b_out_, w_root_, b_root_;
};

}  // namespace

std::unique_ptr<Layer> make_dirgnn_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  return std::make_unique<DirGnnLayer>(in_dim, channels, opt.dirgnn_alpha, opt.device, opt.dtype, opt.gen);
}

}  // namespace adgnn::detail
