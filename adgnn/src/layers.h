// Backbone layers (internal). Each computes the full update of chosen destination rows, reading
// neighbour rows through a MessageGraph, and the "self-only" update of rows treated as isolated
// nodes with their self-loop (method.md, clarifications).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/gnn.h"

namespace adgnn::detail {

class HaloPass;

// The CSR entries of the chosen rows: for entry e, dst_local[e] indexes `rows`, edge[e] is the
// CSR position and src[e] the source row (int64).
struct EdgeList {
  at::Tensor dst_local, edge, src;
};
// entries >= 0: their count, known on the host (no device wait for the size).
EdgeList edges_of_rows(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                       int64_t entries = -1);

// For each CSR entry (row r, column c): its row r (int64 [E]) and the index of an entry (c, r),
// its mirror, or -1 where none is (a directed edge, a halo column). One sort of the entries.
struct CsrMirrors {
  at::Tensor row, mirror;
};
CsrMirrors csr_mirrors(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src);

// Whether the aggregation over (rowptr, col, weight) with num_src = num_dst source rows is its own
// transpose: every entry's mirror is unique (mirror of mirror = the entry) with the same weight
// (undefined weight: ones). GCN's weights on one process's symmetric graph are; the backward then
// runs the forward kernel, without the transpose's extra indirection. Built once per CSR
// and weight (one device wait), then cached.
bool csr_is_self_adjoint(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& weight, int64_t num_src);

// x [rows, C] -> [C]: x's column sums; on the GPU by a row-parallel kernel in a fixed order
// (ATen's sum over rows takes several times the time to read them).
at::Tensor column_sums(const at::Tensor& x);
// The gradient through a ReLU (g where out > 0, else 0) and its column sums; on the GPU in one pass.
// scale: g's factor where out > 0 (linear_relu_dropout's backward).
std::pair<at::Tensor, at::Tensor> relu_grad_column_sums(const at::Tensor& g, const at::Tensor& out, double scale = 1);
// addmm(b, x, w) (x [N, in], w [in, out], b [out]) whose backward sums b's gradient with
// column_sums: the dense layers' bias gradients (GCN's, three per depth-4 step).
// rows >= 0: of x's first `rows` rows only; x's gradient still has x's shape (zeros below them),
// the product written into it: a slice's backward would be a zero-filled copy of all of x.
// room >= 0: the output is built with that many rows of room after it (rows_with_room, halo.h).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows = -1,
                  int64_t room = -1);
// relu(addmm(b, x, w)): on the GPU the ReLU is cuBLASLt's epilogue of the product, and the
// backward masks the gradient and sums its columns in one pass.
at::Tensor linear_relu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows = -1,
                       int64_t room = -1);

// A counter-based dropout mask over the rows of a tensor (model.cpp, dropout_rows): element (r, c)
// is kept (and scaled) when mix64(mix64(key ^ gid[r]) + c) >= threshold.
struct DropoutMask {
  at::Tensor gid;  // global id per row, contiguous, on the rows' device
  uint64_t key = 0, threshold = 0;
  float scale = 1;
};
// The mask of layer `layer`'s input dropout (probability p in (0, 1)) at `epoch` over the first
// `rows` rows of global_id, on `device`: dropout_rows's.
DropoutMask dropout_mask(const at::Tensor& global_id, int64_t rows, c10::Device device, double p, uint64_t seed,
                         int64_t epoch, int64_t layer);
// h * mask over every row (no gradient): dropout_rows's forward values.
at::Tensor apply_dropout_mask(const at::Tensor& h, const DropoutMask& mask);
// {dropped, out}: out = relu(addmm(b, x[:rows], w)) as linear_relu, dropped = out * mask (the
// next layer's input dropout, fused into this node). Only `dropped` carries a gradient; the
// backward needs no mask: an element's gradient is scale * grad where dropped > 0, else 0 (a
// dropped element and a non-positive one both have none), so the dropout needs no backward pass
// of its own over every row.
std::pair<at::Tensor, at::Tensor> linear_relu_dropout(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                      int64_t rows, const DropoutMask& mask);
// Whether a layer computing `rows` of its `num_dst` destination rows computes few of them: then
// forward(g, h, rows) reads only the rows and their neighbours (read_csrs), so the model's input
// dropout may leave every other row of h unset, and GCN aggregates before it transforms. One
// predicate for both: a layer that transformed every row of such an input would read unset rows
// (its weight's gradient, h^T g, multiplies them by zero: NaN or garbage on a rank's unread halo).
inline bool computes_few_rows(int64_t rows, int64_t num_dst) { return rows * 8 < num_dst; }

// f_delta's precision on the GPU for float32 models (elsewhere its input's type): kFp32; kTf32,
// its matrix products on TF32 tensor cores; kBf16, its per-pair tensors (input, hidden layer and
// their gradients) stored in bfloat16 and its products in bfloat16 with float32 sums.
enum class FDeltaPrecision { kFp32, kTf32, kBf16 };

// f_delta's logit at every CSR entry (row v, column u): MLP([z_u * z_v, |z_u - z_v|]) with
// w1 [2H, H], b1 [H], w2 [H, 1], b2 [1] and a ReLU between (method.md). The input is symmetric,
// so an entry whose mirror (row u, column v) is in the CSR shares its evaluation: about half the
// work on an undirected graph, the same values.
at::Tensor fdelta_entry_logits(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& z,
                               const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                               const at::Tensor& b2, FDeltaPrecision precision);
// The same as one logit per evaluated pair, with each entry's pair (int64 [E], cached per CSR):
// the entry logits are logit[entry_pair]; the depth benefit reads them so, without that gather.
struct PairLogits {
  at::Tensor logit, entry_pair;
};
PairLogits fdelta_pair_logits(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& z,
                              const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                              FDeltaPrecision precision);

// While one lives on this thread, csr_aggregate treats its CSRs as built for one call (a graph
// of a few rows): their transposes are built in the backward instead of cached, so that they do
// not push the graph's own out of the cache.
class TransientCsrScope {
 public:
  TransientCsrScope();
  ~TransientCsrScope();
  TransientCsrScope(const TransientCsrScope&) = delete;
  TransientCsrScope& operator=(const TransientCsrScope&) = delete;

 private:
  bool previous_;
};


// Attention of GAT / GATv2 over chosen destination rows, with the edge softmax fused into the
// CSR aggregation: out[i, h] = (sum_k a_k z[src_k, h] + a_i z_self[i, h]) / (sum_k a_k + a_i)
// with a = exp(score - row max), the denominator computed in the same pass as the numerator (a
// column of ones beside z). No per-entry message tensor [E, H, C] is formed, and the CPU and
// CUDA kernels sum in a fixed order. `rowptr` [R + 1] / `src` (int32, rows of z) list row i's
// entries, dst (int64 [E]) is each entry's row i; score_edge [E, H], score_self [R, H],
// z [S, H, C], z_self [R, H, C]. cache: the CSR is the graph's own (its transpose is cached for
// the backward).
at::Tensor attention_aggregate(const at::Tensor& rowptr, const at::Tensor& src, const at::Tensor& dst, bool cache,
                               const at::Tensor& score_edge, const at::Tensor& score_self,
                               const at::Tensor& z, const at::Tensor& z_self);

class Layer {
 public:
  Layer(int64_t in_dim, int64_t out_dim, c10::Device device, c10::ScalarType dtype,
        at::Generator gen)
      : in_dim_(in_dim), out_dim_(out_dim), device_(device), dtype_(dtype), gen_(std::move(gen)) {}
  virtual ~Layer() = default;
  // Full update of destination rows `rows` (int64, sorted, distinct) reading source rows h
  // [num_src, in].
  virtual at::Tensor forward(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows) = 0;
  // The layer applied to rows as if each were an isolated node with its self-loop.
  virtual at::Tensor self_only(const at::Tensor& h_rows) = 0;
  // self_only of h's first `rows` rows (a rank's owned rows of its [owned; halo] input). Layers
  // whose self term is one linear map read them in place: the default's slice costs the backward
  // a zero-filled copy of all of h.
  virtual at::Tensor self_only_leading(const at::Tensor& h, int64_t rows) {
    return self_only(h.size(0) == rows ? h : h.narrow(0, 0, rows));
  }
  // The layer's first linear transform of source rows (f_delta's input at layer 1).
  virtual at::Tensor input_transform(const at::Tensor& h) = 0;
  // b where self_only(h) is input_transform(h) + b before the layer's fused ReLU (GCN; GAT with
  // concatenated heads), else undefined: layer 1 of the learned variant then takes its rows'
  // self-only values from f_delta's input instead of another product.
  virtual at::Tensor self_only_bias() const { return {}; }
  // Asks the layer to end its outputs (forward and self_only) with a ReLU, fused with its last
  // linear map (a hidden layer without BatchNorm); returns whether it does. Until then, and in
  // layers that do not, the model applies the ReLU.
  virtual bool fuse_relu() { return false; }
  bool relu_fused() const { return relu_fused_; }
  // CSR entries read when computing `rows` (reported per layer), as a 0-dim int64 tensor on the
  // graph's device: the model copies every layer's count to the host once, after the last layer.
  // rows_entries: that count for the rows' entries in g.rowptr when the caller has it (a 0-dim
  // tensor or view), else undefined.
  virtual at::Tensor edges_read(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& rows_entries) const;
  // The CSRs (rowptr, col) through which forward(g, h, rows) reads neighbours of `rows` (it also
  // reads the rows themselves), or nullopt when the rows read are not a small set to compute
  // (MixHop's two hops).
  virtual std::optional<std::vector<std::pair<at::Tensor, at::Tensor>>> read_csrs(const MessageGraph& g) const;
  // The source rows of h that forward(g, h, rows) reads, sorted and unique; undefined where
  // read_csrs gives none.
  at::Tensor rows_read(const MessageGraph& g, const at::Tensor& rows) const;
  // The same set as one uint8 flag per source row, without sorting or a device wait.
  at::Tensor read_flags(const MessageGraph& g, const at::Tensor& rows) const;

  // On a rank of a distributed run, the current pass and layer number (MixHop's second hop
  // exchanges its inner power); null in the one-process run.
  void set_halo(HaloPass* pass, int64_t layer, ForwardStats* stats) {
    halo_ = pass;
    halo_layer_ = layer;
    halo_stats_ = stats;
  }

  // The CSR entries of the next forward's rows in g.rowptr, when the model knows it on the host
  // (-1: unknown); csr_aggregate's rows_entries.
  void set_rows_entries(int64_t entries) { rows_entries_ = entries; }
  // Each CSR row's position among the next forward's rows (int32, -1: not among them), when the
  // model has it; csr_aggregate's rows_pos (undefined: none).
  void set_rows_pos(at::Tensor pos) { rows_pos_ = std::move(pos); }

  // The next layer's input dropout, for the next forward to fuse when it ends with its fused
  // ReLU over every row (linear_relu_dropout); nullopt: none. It then returns the dropped
  // output, and take_output_before_dropout() the output itself (undefined where it did not
  // fuse: its return value is the output). The model sets it around one forward call.
  void set_output_dropout(std::optional<DropoutMask> mask) { out_dropout_ = std::move(mask); }
  at::Tensor take_output_before_dropout() { return std::exchange(undropped_, at::Tensor()); }
  // Room for `rows` more rows after the next forward's output over every row (a rank's layer 1:
  // the halo rows its exchange appends, HaloPass::extend's grow); -1: none asked. A layer that can
  // builds its output so (rows_with_room) and take_output_with_room() returns it (undefined:
  // it did not). The model sets it around one forward call.
  void set_output_room(int64_t rows) { output_room_ = rows; }
  at::Tensor take_output_with_room() { return std::exchange(with_room_, at::Tensor()); }

  int64_t in_dim() const { return in_dim_; }
  int64_t out_dim() const { return out_dim_; }
  std::vector<std::pair<std::string, at::Tensor>>& params() { return params_; }

 protected:
  at::Tensor add(const std::string& name, at::Tensor t);
  at::Tensor glorot(const std::string& name, int64_t fan_in, int64_t fan_out);
  at::Tensor glorot_shape(const std::string& name, std::vector<int64_t> shape, int64_t fan_in,
                          int64_t fan_out);
  at::Tensor zeros(const std::string& name, int64_t n);
  // csr_aggregate over g's CSR for this forward's `rows`, with what the model said of them
  // (rows_entries_, rows_pos_); every destination row goes as no row list.
  at::Tensor aggregate_rows(const MessageGraph& g, const at::Tensor& weight, const at::Tensor& h,
                            const at::Tensor& rows, const at::Tensor& self_weight) const;

  int64_t in_dim_, out_dim_;
  bool relu_fused_ = false;
  c10::Device device_;
  c10::ScalarType dtype_;
  at::Generator gen_;  // the model's own CPU generator: initialisation never touches global state
  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::optional<DropoutMask> out_dropout_;
  at::Tensor undropped_;
  int64_t output_room_ = -1;
  at::Tensor with_room_;
  HaloPass* halo_ = nullptr;
  int64_t halo_layer_ = 0;
  ForwardStats* halo_stats_ = nullptr;
  int64_t rows_entries_ = -1;
  at::Tensor rows_pos_;
};

struct LayerOptions {
  int64_t heads = 1;
  bool concat_heads = true;     // GAT/GATv2: concatenate heads (hidden) or average (last layer)
  bool classifier = false;      // MixHop: project the concatenated powers to out_dim
  double dirgnn_alpha = 0.5;
  c10::Device device = c10::Device("cpu");
  c10::ScalarType dtype = c10::ScalarType::Float;  // Double for gradient checks
  at::Generator gen;  // initialisation draws (required)
};

// A layer reading in_dim-wide rows with `channels` output channels; its out_dim() is the width
// it emits (GAT/GATv2 with concatenated heads: heads x channels; MixHop: 3 x channels unless it
// is the classifier).
std::unique_ptr<Layer> make_layer(const std::string& backbone, int64_t in_dim, int64_t channels,
                                  const LayerOptions& opt);
bool known_backbone(const std::string& backbone);

}  // namespace adgnn::detail
