// GAT (Velickovic et al.), as PyG's GATConv with self-loops, per head k:
//   h_v' = sum over u in N(v) + {v} of alpha_vu W h_u + b,
//   alpha_vu = softmax over u of LeakyReLU_0.2(a_src . W h_u + a_dst . W h_v)
#include <torch/torch.h>

#include "backbones/layer.h"
#include "ops/attention.h"
#include "ops/csr.h"

namespace adgnn::detail {

namespace {

namespace F = torch::nn::functional;

class GatLayer : public Layer {
 public:
  GatLayer(int64_t in, int64_t channels, int64_t heads, bool concat, c10::Device d, c10::ScalarType dt, at::Generator gen)
      : Layer(in, concat ? heads * channels : channels, d, dt, gen), heads_(heads), c_(channels), concat_(concat) {
    w_ = glorot("lin.weight", in, heads * channels);
    att_src_ = glorot_shape("att_src", {1, heads, channels}, heads, channels);
    att_dst_ = glorot_shape("att_dst", {1, heads, channels}, heads, channels);
    b_ = zeros("bias", out_dim_);
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    const EdgeList e = edges_of_rows(g.rowptr, g.col, rows, rows_entries_);
    const Needed n = needed_rows(g, e, rows);
    const at::Tensor z = (n.graph_csr ? h : h.index_select(0, n.rows)).mm(like(w_, h)).view({-1, heads_, c_});
    const at::Tensor a_s = (z * att_src_).sum(-1), a_d = (z * att_dst_).sum(-1);
    const at::Tensor a_d_rows = a_d.index_select(0, n.dst_pos);
    const at::Tensor s_edge = F::leaky_relu(
        a_s.index_select(0, n.src_pos) + a_d_rows.index_select(0, e.dst_local),
        F::LeakyReLUFuncOptions().negative_slope(0.2));
    const at::Tensor s_self = F::leaky_relu(a_s.index_select(0, n.dst_pos) + a_d_rows,
                                            F::LeakyReLUFuncOptions().negative_slope(0.2));
    return finish(h, attention_aggregate(n.csr_rowptr, n.csr_src, e.dst_local, n.graph_csr, s_edge, s_self, z,
                                      z.index_select(0, n.dst_pos)));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override {
    return finish(h_rows, h_rows.mm(like(w_, h_rows)).view({-1, heads_, c_}));  // softmax over the self-loop alone: 1
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(like(w_, h)); }
  at::Tensor self_only_bias() const override { return concat_ ? b_ : at::Tensor(); }

 private:
  // The heads concatenated or averaged, plus the bias, in h's type (the scores, and so the
  // normalised sums, are in the parameters' type).
  at::Tensor finish(const at::Tensor& h, const at::Tensor& out) {
    return ((concat_ ? out.reshape({out.size(0), heads_ * c_}) : out.mean(1)) + b_).to(h.scalar_type());
  }
  int64_t heads_, c_;
  bool concat_;
  at::Tensor w_, att_src_, att_dst_, b_;
};

}  // namespace

std::unique_ptr<Layer> make_gat_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  return std::make_unique<GatLayer>(in_dim, channels, opt.heads, opt.concat_heads, opt.device, opt.dtype, opt.gen);
}

}  // namespace adgnn::detail
