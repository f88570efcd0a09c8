// GraphSAGE with mean aggregation, as PyG's SAGEConv:
//   h_v' = W_l^T mean over u in N(v) of h_u + b_l + W_r^T h_v
#include <torch/torch.h>

#include "backbones/layer.h"
#include "ops/linear.h"

namespace adgnn::detail {

namespace {

class SageLayer : public Layer {
 public:
  SageLayer(int64_t in, int64_t out, c10::Device d, c10::ScalarType dt, at::Generator gen) : Layer(in, out, d, dt, gen) {
    wl_ = glorot("lin_l.weight", in, out);
    bl_ = zeros("lin_l.bias", out);
    wr_ = glorot("lin_r.weight", in, out);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const at::Tensor deg = g.degree.index_select(0, rows).clamp_min(1).unsqueeze(1).to(h.scalar_type());
    const at::Tensor mean = aggregate_rows(g, {}, h, rows, {}) / deg;
    return linear(mean, wl_, bl_) + self_rows(g, h, rows).mm(like(wr_, h));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override { return self_only_leading(h_rows, -1); }
  at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) override { return linear(h, wr_, bl_, rows); }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(like(wl_, h)); }

 private:
  at::Tensor wl_, bl_, wr_;
};

}  // namespace

std::unique_ptr<Layer> make_sage_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  return std::make_unique<SageLayer>(in_dim, channels, opt.device, opt.dtype, opt.gen);
}

}  // namespace adgnn::detail
