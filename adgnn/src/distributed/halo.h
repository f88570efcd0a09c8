// One forward pass of one rank of a distributed run (internal): the halo exchange between layers
// as an autograd operation, BatchNorm with global statistics, and the ordering token that makes
// every rank run the backward communication in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>
#include <utility>
#include <vector>

#include "adgnn/model.h"
#include "ops/rows_with_room.h"
#include "adgnn/ops.h"

namespace adgnn::detail {

// A rank graph's halo bookkeeping that does not change between passes, built once per graph
// (halo.cpp caches it by the graph's CSR): the keys cost several passes over every boundary
// entry (millions per rank of products-scale).
struct HaloLayout {
  // Every peer's send list concatenated in rank order, and the key (row * P + peer) that
  // peer_reads() is indexed by.
  at::Tensor send_all, send_key;
  at::Tensor boundary;                // int32 [2, entries]: the boundary entries' owned and halo rows
  std::vector<int64_t> send_offset;   // [P + 1]
  at::Tensor send_ends, recv_ends;    // send_offset and g.recv_offset on the device (count_ends)
  // What it was built from besides the CSR (the cache's key): held, so their storage is not reused.
  std::vector<at::Tensor> send_rows;
  at::Tensor halo_owner, boundary_row;
  std::vector<int64_t> recv_offset;
};

// A layer's update of its input's owned rows (AD: the rows it computed; the others keep their
// value): `rows` (sorted) take `values`, and `add_rows` get `add_values` added.
struct RowUpdate {
  at::Tensor rows, values;
  at::Tensor add_rows, add_values;  // undefined: none
};

class HaloPass {
 public:
  // g.distributed() must hold. `layers` <= 64 (computed-layer masks are 64-bit).
  HaloPass(const MessageGraph& g, int64_t layers);

  // Bit t-1 of comp_owned[v] is set when layer t computes owned row v (active or in the
  // surrogate band). Exchanged once per pass, so both ends of every halo row agree on which rows
  // change and which are read; `all` (plain models) skips the exchange.
  void set_computed(const at::Tensor& comp_owned, bool all);

  // After set_computed: which rows every later exchange moves (layers t = 2..L; input_changed[t]:
  // layer t-1 changed every row's width or value, all_readers as in extend), decided now so that
  // their sizes reach the host in one copy instead of one device wait per layer. plan_counts()
  // is that copy's device side (undefined when the sizes are known without it: plain models);
  // the caller copies it to the host, with whatever else it needs, and hands it to
  // set_plan_counts before the first extend.
  void plan(const std::vector<bool>& input_changed, bool all_readers);
  at::Tensor plan_counts() const { return plan_counts_; }
  void set_plan_counts(const at::Tensor& host_counts);

  // After set_computed: the halo rows (bool over the halo) that a row computed at some layer
  // t >= 2 reads; every row an exchange of those layers receives is one of them.
  at::Tensor halo_read_after_first_layer(int64_t layers) const;
  // The inputs of layers t >= 2 hold only those halo rows (compact_rows of them, in halo
  // order): halo_pos maps a halo row to its position among them (-1: not held). Call before
  // the first extend; extend then returns [h_owned; compact_rows rows].
  void set_compact_halo(const at::Tensor& halo_pos, int64_t compact_rows);

  // The input rows of layer t >= 2 (called once per layer, in layer order): h_owned (h^(t-1)
  // on the owned rows) followed by the halo rows, those that changed at their owner since they
  // were last received and that a row computed here at layer t reads are received; the others
  // keep their copy from the previous call (zero at t = 2: layer 1's input is not exchanged).
  // width_changed: layer t-1 changed every row. all_readers: every halo holder reads the rows
  // (MixHop's second hop reads beyond the computed rows' neighbours).
  // grow: h_owned is layer 1's output built with room for the halo rows held (rows_with_room),
  // which the result takes in place of a copy (without enough room, it copies). Its owned rows are then what layer 1's backward
  // reads (its ReLU's mask), so the in-place updates of later layers (set_in_place) keep the
  // values they overwrite and write them back in their backward; an update of more than an
  // eighth of the owned rows copies them instead, once.
  at::Tensor extend(const at::Tensor& h_owned, int64_t t, bool width_changed, bool all_readers, ForwardStats& st,
                    bool grow = false);
  // How an exchange builds its result (halo.cpp's HaloExchangeFn): a new tensor (Copy), its
  // input changed in place (InPlace; InPlaceRestoring also writes the overwritten owned rows back
  // in its backward), or its input grown into its buffer's room (Grow).
  enum class Build { Copy, InPlace, InPlaceRestoring, Grow };
  // The same with h_owned given as the previous extend's owned rows with `update` applied (the
  // width unchanged): no tensor of the updated owned rows alone is built.
  at::Tensor extend_update(const RowUpdate& update, int64_t t, bool all_readers, ForwardStats& st);

  // extend_update changes the last extend's rows in place (no copy of every owned row per layer)
  // instead of building a new tensor. The earlier layers' outputs, slices of it, then hold the
  // later values: only where no one reads them (the model's training pass, whose layer_outputs it
  // then leaves empty).
  void set_in_place(bool on) { in_place_ = on; }

  // The first layer whose reads anyone asks for (peer_reads, halo_reads; default 1): 2 when
  // layer 1 exchanges nothing (every backbone but MixHop), so that the read bits skip the
  // boundary entries whose readers compute no deeper layer. Call before the first plan.
  void set_first_read_layer(int64_t t);

  // The last extend's result, replaced by the same rows under another autograd node (an
  // alias of it, dropout_rows_and_input's second output), which the next extend_update reads.
  void replace_last(const at::Tensor& src);

  // MixHop's inner power A h at layer t is needed on halo rows too: `inner_rows` are the owned
  // rows whose value some peer reads, `inner_fill` replaces a_src's halo rows by their owners'.
  at::Tensor inner_rows(int64_t t);
  at::Tensor inner_fill(const at::Tensor& a_src, int64_t t, ForwardStats& st);

  // BatchNorm1d with statistics over every rank's rows (training) or the running ones.
  at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        at::Tensor& running_mean, at::Tensor& running_var, bool training,
                        double momentum, double eps);

  // Ties the communication token to the output, so that backward runs every exchange.
  at::Tensor finish(const at::Tensor& logits) const;

  RankTransport& transport() const { return *g_.transport; }

 private:
  at::Tensor bit(const at::Tensor& comp, int64_t t) const;  // bool: computed at layer t
  // The layers at which each (owned row, peer) pair and each halo row is read (peer_bits_,
  // halo_bits_; bit t-1: layer t), from one pass over the boundary entries, on first use.
  void read_bits() const;
  // (owned row, peer) pairs read at layer t, as a flat bool [num_dst * P]; halo rows read here.
  at::Tensor peer_reads(int64_t t) const;
  at::Tensor halo_reads(int64_t t) const;
  // Which entries of the send list (all peers) and which halo rows take part: this exchange.
  // Returns the source rows [owned; halo] of the next layer: owned = src_in's first num_dst rows
  // (with `update`, if given); the halo rows not received keep src_in's rows beyond num_dst, or
  // else prev_halo's.
  using Counts = std::pair<std::vector<int64_t>, std::vector<int64_t>>;  // rows per peer: send, receive
  at::Tensor exchange(const at::Tensor& src_in, const at::Tensor& prev_halo, const RowUpdate* update,
                      const at::Tensor& send_keep, const at::Tensor& recv_keep, const Counts& counts, int64_t t,
                      ForwardStats& st, Build build = Build::Copy);
  // Layer t's masks and counts: planned, or computed now.
  std::tuple<at::Tensor, at::Tensor, Counts> masks_and_counts(int64_t t, bool width_changed, bool all_readers);
  // The masks of layers t0..t1's exchanges (row t - t0: which send-list entries go, which halo
  // rows are received; width_changed indexed by t) and, unless every row is computed, their
  // per-peer counts on the device ([K, 2P]: send, then receive). Advances the dirty state:
  // called for each layer once, in layer order.
  struct Masks {
    at::Tensor send_go, recv_go, counts;
  };
  Masks keep_range(int64_t t0, int64_t t1, const std::vector<bool>& width_changed, bool all_readers);
  Counts list_counts() const;                     // the whole lists' sizes
  Counts counts_of_layer(const int64_t* c) const;  // from 2P counts: send, then receive
  // Running sums of the masks at the peers' boundaries ([2P + 2] int64, on the device), and the
  // counts they give.
  at::Tensor count_ends(const at::Tensor& send_keep, const at::Tensor& recv_keep) const;
  Counts counts_from_ends(const int64_t* ends) const;
  // Rows of each peer in a mask over the send list / the halo rows (one host copy).
  Counts counts(const at::Tensor& send_keep, const at::Tensor& recv_keep) const;

  const MessageGraph& g_;
  int P_;
  int64_t layers_;  // the pass's layer count: how many bits of the computed-layer masks are used
  at::Tensor last_src_;  // the previous extend's result (its halo rows: the next one's frozen copies)
  at::Tensor token_;
  at::Tensor comp_owned_, comp_halo_;
  mutable at::Tensor peer_bits_, halo_bits_;  // read_bits()
  int64_t first_read_layer_ = 1;               // set_first_read_layer()
  bool all_computed_ = true;
  HaloLayout layout_;
  at::Tensor dirty_send_;  // over layout_.send_all
  at::Tensor dirty_recv_;               // over the halo rows
  // plan(): per layer t, the masks and (once set_plan_counts ran) the counts of its exchange.
  struct Planned {
    at::Tensor send_keep, recv_keep;
    Counts counts;
    bool counted = false;
  };
  std::vector<Planned> planned_;
  at::Tensor plan_counts_;
  at::Tensor compact_pos_;       // set_compact_halo; undefined: layers >= 2 hold every halo row
  int64_t compact_rows_ = -1;
  bool in_place_ = false;
  bool grown_ = false;  // last_src_'s owned rows are layer 1's output (extend's grow)
};

}  // namespace adgnn::detail
