// MixHop (Abu-El-Haija et al.), as PyG's MixHopConv with powers 0, 1, 2 of the GCN-normalised
// adjacency with self-loops A:
//   h_v' = [W_0^T h_v, W_1^T (A h)_v, W_2^T (A^2 h)_v] + b   (the classifier: projected to out_dim)
#include <torch/torch.h>

#include "backbones/layer.h"
#include "adgnn/ops.h"
#include "distributed/halo.h"
#include "ops/csr.h"
#include "ops/linear.h"

namespace adgnn::detail {

namespace {

class MixHopLayer : public Layer {
 public:
  MixHopLayer(int64_t in, int64_t channels, bool classifier, c10::Device d, c10::ScalarType dt, at::Generator gen)
      : Layer(in, classifier ? channels : 3 * channels, d, dt, gen), c_(channels), classifier_(classifier) {
    for (int p = 0; p < 3; ++p) w_[p] = glorot("lins." + std::to_string(p) + ".weight", in, channels);
    b_ = zeros("bias", 3 * channels);
    if (classifier_) {
      wc_ = glorot("classifier.weight", 3 * channels, channels);
      bc_ = zeros("classifier.bias", channels);
    }
  }
  at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) override {
    // A h on the rows that the second hop reads, scattered back into source-row positions. On a
    // rank, halo rows of A h come from their owners, which compute them for the rows peers read.
    const at::Tensor needed = first_hop_rows(g, rows);
    const at::Tensor a1_needed = propagate(g, h, needed);
    at::Tensor a1 = torch::zeros({h.size(0), h.size(1)}, h.options()).index_put({needed}, a1_needed);
    if (halo_) a1 = halo_->inner_fill(a1, halo_layer_, *halo_stats_);
    const at::Tensor a1_rows = a1.index_select(0, rows);
    const at::Tensor a2_rows = propagate(g, a1, rows);
    return finish(torch::cat(
        {self_rows(g, h, rows).mm(like(w_[0], h)), a1_rows.mm(like(w_[1], h)), a2_rows.mm(like(w_[2], h))}, 1));
  }
  at::Tensor self_only(const at::Tensor& h_rows) override {
    return finish(torch::cat(
        {h_rows.mm(like(w_[0], h_rows)), h_rows.mm(like(w_[1], h_rows)), h_rows.mm(like(w_[2], h_rows))}, 1));
  }
  at::Tensor input_transform(const at::Tensor& h) override { return h.mm(like(w_[1], h)); }
  at::Tensor edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& rows_entries) const override {
    if (rows.numel() == 0 && !halo_) return torch::zeros({}, g.rowptr.options());
    return Layer::edges_read(g, rows, rows_entries) + Layer::edges_read(g, first_hop_rows(g, rows), {});
  }
  // Two hops, and on a rank the rows peers read: every row.
  std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> read_csrs(const MessageGraph&) const override {
    return std::nullopt;
  }

 private:
  // The destination rows whose A h the second hop reads: `rows`, their neighbours that are
  // destination rows, and on a rank the rows whose A h peers read.
  at::Tensor first_hop_rows(const MessageGraph& g, const at::Tensor& rows) const {
    const EdgeList e = edges_of_rows(g.rowptr, g.col, rows);
    at::Tensor src = e.src;
    if (g.num_src > g.num_dst) src = src.index_select(0, (src < g.num_dst).nonzero().squeeze(1));
    std::vector<at::Tensor> parts{rows, src};
    if (halo_) parts.push_back(halo_->inner_rows(halo_layer_));
    return std::get<0>(torch::_unique(torch::cat(parts), true));
  }
  static at::Tensor propagate(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) {
    return csr_aggregate(g.rowptr, g.col, g.gcn_weight, h, csr_rows(g, rows), gcn_self_weight(g, rows, h.scalar_type()));
  }
  at::Tensor finish(const at::Tensor& cat) {
    const at::Tensor out = bias_add(cat, b_);
    return classifier_ ? linear(out, wc_, bc_) : out;
  }
  int64_t c_;
  bool classifier_;
  at::Tensor w_[3], b_, wc_, bc_;

};

}  // namespace

std::unique_ptr<Layer> make_mixhop_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt) {
  return std::make_unique<MixHopLayer>(in_dim, channels, opt.classifier, opt.device, opt.dtype, opt.gen);
}

}  // namespace adgnn::detail
