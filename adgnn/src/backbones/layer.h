// A backbone layer (internal): the interface the model drives, and the six backbones' factory.
// Each layer computes the full update of chosen destination rows, reading neighbour rows through
// a MessageGraph, and the "self-only" update of rows treated as isolated nodes with their
// self-loop (method.md, clarifications). One backbone per file beside this one.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/model.h"
#include "ops/dropout.h"
#include "ops/linear.h"

namespace adgnn::detail {

class HaloPass;

// Whether a layer computing `rows` of its `num_dst` destination rows computes few of them: then
// forward(g, h, rows) reads only the rows and their neighbours (read_csrs), so the model's input
// dropout may leave every other row of h unset, and GCN aggregates before it transforms. One
// predicate for both: a layer that transformed every row of such an input would read unset rows
// (its weight's gradient, h^T g, multiplies them by zero: NaN or garbage on a rank's unread halo).
inline bool computes_few_rows(int64_t rows, int64_t num_dst) { return rows * 8 < num_dst; }

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
std::unique_ptr<Layer> make_layer(Backbone backbone, int64_t in_dim, int64_t channels, const LayerOptions& opt);



// The six backbones (backbones/<name>.cpp): one layer each.
std::unique_ptr<Layer> make_gcn_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt);
std::unique_ptr<Layer> make_sage_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt);
std::unique_ptr<Layer> make_gat_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt);
std::unique_ptr<Layer> make_gatv2_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt);
std::unique_ptr<Layer> make_mixhop_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt);
std::unique_ptr<Layer> make_dirgnn_layer(int64_t in_dim, int64_t channels, const LayerOptions& opt);

// Helpers of the backbones' forward passes.
// The source rows of destination rows `rows` (sorted, unique): all of them are the leading
// num_dst rows, a view instead of a copy (and no scatter in the backward).
at::Tensor self_rows(const MessageGraph& g, const at::Tensor& h, const at::Tensor& rows);
// GCN's self-loop weight 1 / (d_v + 1) of each of `rows`, for csr_aggregate over them: the
// graph's, computed once, one per destination row (csr_aggregate reads the listed rows' own: no
// gather, a launch per layer on the host-bound AD steps); a graph built without it, or in another
// precision: computed here for `rows`.
at::Tensor gcn_self_weight(const MessageGraph& g, const at::Tensor& rows, c10::ScalarType dt);
// csr_aggregate's rows for a layer's `rows` (sorted and distinct): undefined when they are every
// destination row, which are then in order; the kernels read them without the per-row index and
// the long rows' output slots (built per call), and the backward sees the plain every-row case.
at::Tensor csr_rows(const MessageGraph& g, const at::Tensor& rows);

}  // namespace adgnn::detail
