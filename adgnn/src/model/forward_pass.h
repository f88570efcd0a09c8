// One forward pass of the model (Model::forward), as named phases over the state they share:
//   depths()     the depth benefit eps, the thresholds tau(t), every layer's row masks (AD);
//   plan_halo()  which rows each layer's halo exchange sends (a rank of a distributed run);
//   row_lists()  every layer's computed / active / band / frozen rows, from one host copy of
//                their sizes (and layer 1 issued before that wait where it computes every row);
//   layer(t)     the input (halo exchange, dropout), the aggregation, the rows that keep their
//                value or take the self-only one, and the straight-through surrogate;
//   finish()     the statistics, the logits and AD#'s calibration.
// A pass lives for one call; what outlives it (parameters, per-graph caches) is the ModelParts.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StreamGuard.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "adgnn/model.h"
#include "distributed/halo.h"
#include "backbones/layer.h"
#include "model/model_parts.h"
#include "depth/surrogate.h"

namespace adgnn::detail {

class ForwardPass {
 public:
  // See Model::forward for the arguments; the references must outlive the pass.
  ForwardPass(ModelParts& m, const MessageGraph& g, const at::Tensor& x, bool training, int64_t epoch,
              const at::Tensor& labels, const at::Tensor& train_mask);
  ForwardOutput run();

 private:
  // One layer's rows (AD): computed (active or band), active, surrogate band, and the frozen rows
  // of a width-changing layer; each row's position among the computed ones and the active mask.
  struct LayerRows {
    at::Tensor comp, act, band, frozen, pos, active;
  };
  // What one layer t works with.
  struct Step {
    int64_t t = 0;
    Layer* layer = nullptr;
    const MessageGraph* graph = nullptr;  // this layer's source rows
    bool last = false, width_change = false;
    // AD's deeper layers reading a compact input: its graph and the computed rows' positions.
    std::optional<MessageGraph> compact;
    at::Tensor compact_rows;
  };
  // The result of a layer's rows that are not updated (frozen_rows): the layer's output `next`,
  // the update after BatchNorm / ReLU, and for the surrogate either the band rows' update -
  // frozen value (`diff`) or their frozen values (`frozen_band`).
  struct Merged {
    at::Tensor upd, next, frozen_band, diff;
  };
  // A rank's compact graph for layers >= 2, decided in row_lists and built when due.
  struct DeepGraphPlan {
    at::Tensor halo_read, deep_rows_mask;
    int64_t held = 0, deep_count = -1, deep_entries = 0;
  };

  void begin();
  void depths();
  void plan_halo();
  void row_lists();
  void layer(int64_t t);
  void finish();

  bool width_changes(int64_t t) const;
  // Layer 1 over every row with rows 0..n-1 listed (issued before the wait for the counts).
  void issue_first_layer();
  // layer's forward() for layer 1, with room for the halo rows after its output (first_room_).
  template <class Forward>
  at::Tensor first_forward(Layer& layer, Forward&& forward);
  void build_deep_graph();
  void exchange_input(Step& s);
  // Dropout of this layer's input (training, t >= 2), over the rows the computed rows read.
  void drop_input(Step& s, const at::Tensor& comp_rows, bool reads_frozen, const at::Tensor& frozen_rows);
  // BatchNorm + ReLU of a hidden layer's fresh outputs.
  at::Tensor post(const Step& s, at::Tensor v);
  void plain_layer(Step& s);
  void adaptive_layer(Step& s);
  at::Tensor aggregate(Step& s, const LayerRows& r);
  Merged frozen_rows(const Step& s, const LayerRows& r, at::Tensor upd);
  void straight_through(const Step& s, const LayerRows& r, Merged& mg);
  // Whether the straight-through term's (update - frozen) carries a gradient: with soft masks from
  // layer 2 on; elsewhere only the sigmoid does, and the difference is built from detached rows.
  bool diff_carries_gradient(int64_t t) const { return c_.soft_masks && t >= 2; }
  // Keeps h^(t) in out_.layer_outputs where someone reads it: evaluation passes (embeddings,
  // predictions) and AD#'s training passes (which calibrate with them). A training pass of the
  // other variants keeps none: each hidden layer's output is otherwise held until the backward
  // ends although the backward reads only its dropped copy (a quarter of GCN's peak at depth 4).
  void keep_output(const at::Tensor& h) {
    if (!training_ || c_.variant == Variant::AdSharp) out_.layer_outputs.push_back(h);
  }

  ModelParts& m_;
  const ModelConfig& c_;
  const MessageGraph& g_;
  const at::Tensor x_;  // the input rows in the activations' type
  const bool training_;
  const int64_t epoch_;
  const at::Tensor &labels_, &train_mask_;
  const int64_t L_, n_;

  ForwardOutput out_;
  at::Tensor all_rows_;  // a plain model's rows: every destination row
  std::unique_ptr<HaloPass> halo_;  // a rank's halo exchanges
  bool exchange_in_place_ = false;
  int64_t first_room_ = -1;
  at::Tensor grown_from_;  // layer 1's output with room for the halo rows

  at::Tensor h_src_;  // the current layer's input, over the source rows
  at::Tensor h_dst_;  // the previous layer's output, over the destination rows
  at::Tensor hin_;    // the current layer's input after dropout

  at::Tensor eps_, tau_, depth_;
  std::vector<at::Tensor> tau_layers_;  // tau(t) of each layer, differentiable in theta
  DepthMaskSpec spec_;
  std::optional<DepthMasks> masks_;
  at::Tensor active_all_, band_all_, comp_all_;  // [L, n] views of the masks; comp: active or band
  at::Tensor comp_pos_all_;                      // int32 [L, n]
  at::Tensor z_;  // the learned variant's f_delta input: layer 1's input transform of hin

  at::Tensor first_upd_;  // layer 1's forward, issued before the wait for the counts
  bool first_layer_early_ = false;
  std::optional<c10::StreamGuard> plan_stream_;

  std::vector<at::Tensor> comp_list_, act_list_, band_list_, frozen_list_;  // per layer 1..L
  std::vector<int64_t> comp_entries_;  // per layer: CSR entries of comp_list_
  at::Tensor comp_entries_dev_;        // the same, [L] on the device (the per-layer edge counts)
  std::optional<MessageGraph> deep_graph_;  // a rank's graph for layers >= 2 (compact halo rows)
  std::optional<DeepGraphPlan> deep_plan_;  // built when layer 2 needs it

  std::vector<at::Tensor> edges_;  // per layer, on the device until the end of the pass
  bool edges_are_entries_ = false;
  // A rank's deeper layer hands its update of the frozen rows to the next layer's halo exchange
  // (HaloPass::extend_update), which builds the next input from it: no separate output tensor.
  std::optional<RowUpdate> pending_;
  at::Tensor next_input_;  // a plain model's next layer input, dropped out by this layer
};

}  // namespace adgnn::detail
