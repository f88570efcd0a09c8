// GCN (Kipf & Welling), as PyG's GCNConv:
//   h_v' = W^T sum over u in N(v) + {v} of h_u / sqrt((d_u + 1)(d_v + 1)) + b
#include <torch/torch.h>

#include "backbones/layer.h"
#include "ops/linear.h"

namespace adgnn::detail {

namespace {

class GcnLayer : public Layer {
 public:
  GcnLayer(int64_t in, int64_t out, c10::Device d, c10::ScalarType dt, at::Generator gen) : Layer(in, out, d, dt, gen) {
    w_ = glorot("weight", in, out);
    b_ = zeros("bias", out);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const at::Tensor self_w = gcn_self_weight(g, rows, h.scalar_type());
    // Aggregate at the narrower width: transform first where the layer narrows (the classifier),
    // else aggregate first (only the chosen rows are transformed). Not when few rows are computed
    // (AD's deeper layers): transforming every source row (a rank's halo included) and its two
    // backward products would then cost more than aggregating the few rows' entries wider.
    if (out_dim_ < in_dim_ && !computes_few_rows(rows.numel(), g.num_dst)) {
      const at::Tensor out = bias_add(aggregate_rows(g, g.gcn_weight, h.mm(like(w_, h)), rows, self_w), b_);
      return relu_fused_ ? torch::relu(out) : out;
    }
    return affine(aggregate_rows(g, g.gcn_weight, h, rows, self_w), -1, true);
  }
  at::Tensor self_only(const at::Tensor& h_rows) override { return self_only_leading(h_rows, -1); }
  at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) override { return affine(h, rows); }
  bool fuse_relu() override { return relu_fused_ = true; }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(like(w_, h)); }
  at::Tensor self_only_bias() const override { return b_; }

 private:
  // output: the forward's (which fuses the next layer's dropout when asked), not self_only's.
  at::Tensor affine(const at::Tensor& h, int64_t rows = -1, bool output = false) {
    if (output && relu_fused_ && out_dropout_) {
      auto [dropped, out] = linear_relu_dropout(h, w_, b_, rows, *out_dropout_);
      undropped_ = out;
      return dropped;
    }
    if (!output || output_room_ < 0) return relu_fused_ ? linear_relu(h, w_, b_, rows) : linear(h, w_, b_, rows);
    with_room_ = relu_fused_ ? linear_relu(h, w_, b_, rows, output_room_) : linear(h, w_, b_, rows, output_room_);
    return with_room_;
  }
  at::Tensor w_, b_;
};

}  // namespace

std::unique_ptr<Layer> make_gcn_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  return std::make_unique<GcnLayer>(in_dim, channels, opt.device, opt.dtype, opt.gen);
}

}  // namespace adgnn::detail
