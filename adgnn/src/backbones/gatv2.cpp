// GATv2 (Brody et al.), as PyG's GATv2Conv (share_weights = False), per head k:
//   h_v' = sum over u in N(v) + {v} of alpha_vu W_l h_u + b,
//   alpha_vu = softmax over u of a . LeakyReLU_0.2(W_l h_u + W_r h_v)
#include <torch/torch.h>

#include "backbones/layer.h"
#include "ops/attention.h"
#include "ops/csr.h"
#include "ops/linear.h"

namespace adgnn::detail {

namespace {

namespace F = torch::nn::functional;

class Gatv2Layer : public Layer {
 public:
  Gatv2Layer(int64_t in, int64_t channels, int64_t heads, bool concat, c10::Device d, c10::ScalarType dt, at::Generator gen)
      : Layer(in, concat ? heads * channels : channels, d, dt, gen), heads_(heads), c_(channels), concat_(concat) {
    wl_ = glorot("lin_l.weight", in, heads * channels);
    bl_ = zeros("lin_l.bias", heads * channels);
    wr_ = glorot("lin_r.weight", in, heads * channels);
    br_ = zeros("lin_r.bias", heads * channels);
    att_ = glorot_shape("att", {1, heads, channels}, heads, channels);
    b_ = zeros("bias", out_dim_);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const EdgeList e = edges_of_rows(g.rowptr, g.col, rows, rows_entries_);
    const Needed n = needed_rows(g, e, rows);
    const at::Tensor hn = n.graph_csr ? h : h.index_select(0, n.rows);
    const at::Tensor xl = linear(hn, wl_, bl_).view({-1, heads_, c_});
    const at::Tensor xr_rows = linear(self_rows(g, h, rows), wr_, br_).view({-1, heads_, c_});
    const at::Tensor xl_src = xl.index_select(0, n.src_pos), xl_self = xl.index_select(0, n.dst_pos);
    const auto slope = F::LeakyReLUFuncOptions().negative_slope(0.2);
    const at::Tensor s_edge =
        (F::leaky_relu(xl_src + xr_rows.index_select(0, e.dst_local), slope) * att_).sum(-1);
    const at::Tensor s_self = (F::leaky_relu(xl_self + xr_rows, slope) * att_).sum(-1);
    // The scores read [E, H, C] per-entry sums (GATv2's attention is a function of both ends'
    // features); the aggregation does not.
    return finish(h, attention_aggregate(n.csr_rowptr, n.csr_src, e.dst_local, n.graph_csr, s_edge, s_self, xl,
                                      xl_self));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override {
    return finish(h_rows, linear(h_rows, wl_, bl_).view({-1, heads_, c_}));
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(like(wl_, h)); }

 private:
  // As GAT's: in h's type.
  at::Tensor finish(const at::Tensor& h, const at::Tensor& out) {
    return ((concat_ ? out.reshape({out.size(0), heads_ * c_}) : out.mean(1)) + b_).to(h.scalar_type());
  }
  int64_t heads_, c_;
  bool concat_;
  at::Tensor wl_, bl_, wr_, br_, att_, b_;
};

}  // namespace

std::unique_ptr<Layer> make_gatv2_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  return std::make_unique<Gatv2Layer>(in_dim, channels, opt.heads, opt.concat_heads, opt.device, opt.dtype, opt.gen);
}

}  // namespace adgnn::detail
