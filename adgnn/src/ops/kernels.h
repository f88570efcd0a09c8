// Device kernels behind csr_aggregate (internal).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "depth/surrogate.h"

namespace adgnn::kernels {

// Forward: out[i] = sum_k w[k] x[col[k]] over row r = rows[i] (rows undefined: row i), plus
// self_w[i] x[r] when self_w (one per output row) is defined; self_by_row: self_w[r] x[r] (one
// weight per CSR row: the same in every call, no gather of the rows' own).
at::Tensor aggregate_cpu(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                         const at::Tensor& x, const at::Tensor& rows, const at::Tensor& self_w,
                         bool self_by_row = false);
// Backward to w: grad_w[k] = <grad_out[i], x[col[k]]> for the edges of the computed rows.
at::Tensor aggregate_backward_w_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                    const at::Tensor& x, const at::Tensor& grad_out,
                                    const at::Tensor& rows);

// SplitMix64's finaliser: the hash behind the counter-based dropout masks (same bits on every
// device and partition).
inline
#ifdef __CUDACC__
__host__ __device__
#endif
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// How the CUDA kernel takes a CSR's rows: every row by descending entry count, ties by index
// (int64, on rowptr's device), of which the first n_long, the rows with >= kLongRow entries,
// are summed by a block each (spmm_long_rows). A call over every row sums the others in this
// order. Measured on arxiv-scale (`adgnn bench --kernels`, docs/decisions/length-order.md): 68% of the copy
// bandwidth in index order, 101% in this one. The likely reason: a block holds its SM slot until
// its longest row is done, and rows of equal length side by side finish together. Each row's sum
// is the same either way (bit for bit).
// In a call over few rows (under 1/8 of the CSR's: AD's deeper layers, forward and backward), the
// rows with >= kMidRow entries get a block each too: one warp would walk a row of hundreds of
// entries long after the rest of the call had finished. Only the computed ones get a block.
constexpr int64_t kMidRow = 128;
struct RowSchedule {
  at::Tensor order;    // undefined: none (every row on one warp, in index order)
  int64_t n_long = 0;
  int64_t n_mid = 0;   // the rows with >= kMidRow entries: the order's first n_mid (>= n_long)
};
// The schedule of a CSR (waits for the device once, for n_long and n_mid).
RowSchedule row_schedule(const at::Tensor& rowptr);

// A CSR's transpose, prepared once per graph for the backward: row s lists, in increasing
// destination order, the entries (destination row, entry index in the CSR) whose column is s.
struct Transposed {
  at::Tensor rowptr;     // int64 [num_src + 1]
  at::Tensor row;        // int32 [E], destination row of the entry
  at::Tensor entry;      // int64 [E], the entry's index in the original CSR (for its weight)
  RowSchedule schedule;  // row_schedule(rowptr), when asked for (else undefined)
};

// Rows with at least this many entries are summed by a whole block of the CUDA kernel (its warps
// split the entries, then add their partial sums in a fixed order) instead of one warp: a
// power-law hub (products-scale: 9,411 entries) would keep one warp busy long after the rest of
// the GPU idled, which would bound AD's few-row calls (docs/decisions/long-rows-on-blocks.md).
constexpr int64_t kLongRow = 1024;
// A listed row (a call over few rows: AD's deeper layers) of more entries is summed in chunks of
// this many, each a block's (spmm_listed_rows).
constexpr int64_t kRowChunk = 2048;

// The GPU backward of a few computed rows regroups their entries (given their count) on graphs
// with at least this many CSR entries, and scans the transpose on smaller ones. Measured with
// `adgnn bench` (depth-4 AD-GCN_fast steps on an H200, docs/decisions/regroup-threshold.md): the scan is faster on
// arxiv-scale (2.3 M entries), the regrouping on products-scale (31 M entries per rank of four,
// 124 M on one GPU).
constexpr int64_t kRegroupMinEntries = int64_t(1) << 23;
// The threshold in use (kRegroupMinEntries; tests lower it to run the regrouping on small graphs).
int64_t& regroup_min_entries();

// The CPU kernels' gathers of random rows wait on memory for each one: the row kPrefetch entries
// ahead is requested early, so that many are in flight (the out-of-order window alone covers a
// few). With it the CPU SpMM on arxiv-scale (2 cores) takes about a third of the time (`adgnn
// bench --kernels`, docs/decisions/cpu-prefetch.md).
constexpr int64_t kPrefetch = 16;
template <typename T>
inline void prefetch_row(const T* row, int64_t f) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < f * int64_t(sizeof(T)); b += 64) __builtin_prefetch(p + b);
}

// A source row read by more than 32 computed rows walks its row of the transpose, one warp for
// it all: with at most this many computed rows (the backward by reader lists), few do.
constexpr int64_t kMaxListRows = 256;

// find_long: also the transpose's row_schedule, for the CUDA backward.
Transposed transpose_entries(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src,
                             bool find_long = false);

// Backward to x over the transpose: grad_x[s] = sum of w[entry] grad_out[pos(row)] over s's
// entries whose destination row was computed (rows undefined: all rows, pos = identity), plus
// self_w[pos(s)] grad_out[pos(s)] when s is itself a computed row (self_by_row: self_w[s]). The
// sum runs in a fixed order (deterministic).
at::Tensor aggregate_backward_x_cpu(const Transposed& t, const at::Tensor& w,
                                    const at::Tensor& grad_out, const at::Tensor& rows,
                                    int64_t num_dst_rows, const at::Tensor& self_w, bool self_by_row = false);

// The CSR entries of `rows` grouped by source row, for aggregate_entries_*: the entries in the
// order of `rows` and then of the CSR, stably sorted by column. ptr: int64 [num_src + 1], source
// s's entries at [ptr[s], ptr[s + 1]); idx: int32, the entry's position in `rows`; eid: int64,
// its CSR position. entries >= 0: the rows' entry count, from the host (sizes the buffers without
// a wait for the device); -1: counted here. ATen operations on any device.
struct RegroupedEntries {
  at::Tensor ptr, idx, eid;
};
RegroupedEntries regroup_by_source(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                                   int64_t num_src, int64_t entries = -1);

// out[i] = sum over k in [ptr[i], ptr[i+1]) of w[eid[k]] x[idx[k]] (w undefined: ones), rows in
// a fixed order: the backward's sum over a few computed rows' entries regrouped by source.
at::Tensor aggregate_entries_cpu(const at::Tensor& ptr, const at::Tensor& idx, const at::Tensor& eid,
                                 const at::Tensor& w, const at::Tensor& x);

// flags[r] = 1 for every row r in `rows` and every column of their entries in (rowptr, col):
// the source rows that computing `rows` reads. flags: uint8 [num_src] on rowptr's device, set
// in place (rows it already flags stay flagged). One kernel instead of listing the entries.
// Runs on flags' device (the CUDA kernel when the build has it).
void mark_rows_read(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows, at::Tensor& flags);

// ---- f_delta's per-pair input (fdelta.cpp; the CUDA kernels when the build has them) -------------
// out[p] = [z[row[p]] * z[col[p]], |z[row[p]] - z[col[p]]|]: [P, 2F] for z [rows, F] (row, col
// int32 [P]). One pass writes the MLP's input, without per-pair copies of z's rows.
at::Tensor pair_features_cpu(const at::Tensor& row, const at::Tensor& col, const at::Tensor& z);

// Nodes with at least this many f_delta pairs (either way) get a block of the GPU's input-gradient
// kernel instead of a warp: a warp's pairs run one after another, and a few long ones set the
// kernel's time (docs/decisions/fdelta-pairs.md).
constexpr int64_t kPairHubMin = 128;
// f_delta's pairs as a CSR over the graph's rows (rowptr int64 [rows + 1], col int32 [P]) and as
// its transpose over z's rows (t_rowptr int64 [num_src + 1]; t_pair int64: the pair, t_other
// int32: its row, in the pairs' order), with the nodes that have kPairHubMin or more pairs
// either way (long_nodes, int64; the GPU's block-per-node rows; undefined on the CPU).
struct PairGradIndex {
  at::Tensor rowptr, col, t_rowptr, t_pair, t_other, long_nodes;
};
// The input's backward, summed per row of z: grad_z[u] = the sum over the pairs that read u
// (its own, then the transpose's) of gx_prod[p] * z[other] + gx_diff[p] * sign(z[u] - z[other])
// for gx [P, 2F] (the derivative of |d| at d = 0 is 0, as autograd's). [num_src, F] in z's type;
// every row written, in a fixed order.
at::Tensor pair_grad_sums_cpu(const PairGradIndex& ix, const at::Tensor& z, const at::Tensor& gx);

// The MLP's backward from its output's gradient g [P] to its hidden layer (hidden: [P, H'],
// before or after the relu: only its sign and relu(hidden) are read), in one pass over hidden:
// out[p, k] = g[p] * w2[k] where hidden[p, k] > 0, else 0 (the outer product and relu's
// backward); b1 = out's column sums (the first bias's gradient); w2 = sum over p of
// relu(hidden[p, k]) g[p] (the output layer's weight gradient).
struct FDeltaHiddenGrad {
  at::Tensor out, b1, w2;
};
FDeltaHiddenGrad fdelta_hidden_grad_cpu(const at::Tensor& g, const at::Tensor& w2, const at::Tensor& hidden);

// ---- a distributed pass's halo plan (halo.cpp; the CUDA kernels when the build has them) ----------
// Computed-layer bits: bit t-1 of a row's value is set when layer t computes the row.

// One pass over a rank's boundary entries e (owned row r = boundary[0][e] reads halo row
// h = boundary[1][e]; the graph being symmetric, h's owner reads r): peer_bits[r * P +
// halo_owner[h]] |= comp_halo[h] (the layers at which some peer reads the owned row) and
// halo_bits[h] |= comp_owned[r] (the layers at which a row here reads the halo row). boundary:
// int32 [2, entries] (a third of the bytes of two int64 indices and an int64 key per entry, whose
// reads would bound the CUDA kernel). comp_* undefined: every layer. peer_bits and halo_bits:
// int64, zeroed by the caller. One pass for every layer instead of a scatter per layer and side.
// Only the layers in `layers` (bit t-1: layer t) are looked at: an entry whose readers compute none
// of them is skipped without reading its halo row's owner or either word (AD's deeper layers
// compute a few hundred rows, and layer 1's reads are never asked for except by MixHop: most
// entries).
void halo_read_bits(const at::Tensor& boundary, const at::Tensor& halo_owner, int64_t P, const at::Tensor& comp_owned,
                    const at::Tensor& comp_halo, at::Tensor& peer_bits, at::Tensor& halo_bits,
                    uint64_t layers = ~uint64_t(0));

// One side of a halo pass's exchanges at layers t0 .. t0 + K - 1 (go: bool [K, n]), for entries
// i < n (send-list entries, or halo rows) grouped by peer (offsets: int64 [P + 1] on the
// entries' device). Entry i changes at layer t-1 when bit t-2 of comp[comp_idx[i]] is set, or
// bit t-1 of width_changed (every row changes); dirty[i] (bool, updated in place) holds whether
// it changed since it last moved. It moves at layer t when dirty and read: bit t-1 of
// reads[reads_idx[i]], or always with all_readers. comp_idx / reads_idx undefined: i itself.
// Returns int64 [K, P]: the entries that move per layer and peer.
at::Tensor halo_keep_masks(const at::Tensor& comp, const at::Tensor& comp_idx, const at::Tensor& reads,
                           const at::Tensor& reads_idx, const at::Tensor& offsets, int64_t t0, int64_t K,
                           uint64_t width_changed, bool all_readers, at::Tensor& dirty, at::Tensor& go);

#ifdef ADGNN_HAVE_CUDA_KERNELS
void mark_rows_read_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows, at::Tensor& flags);
at::Tensor aggregate_entries_cuda(const at::Tensor& ptr, const at::Tensor& idx, const at::Tensor& eid,
                                  const at::Tensor& w, const at::Tensor& x);
// regroup_by_source's kernels (entries >= 0, below 2^31 as num_src): the same tensors.
RegroupedEntries regroup_by_source_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& rows,
                                        int64_t num_src, int64_t entries);
// The same on the GPU: grad_x[s] = sum of w[entry] grad_out[pos(row)] over s's
// entries whose destination row was computed (rows undefined: all rows, pos = identity).
// read_flags (uint8 per source row, or undefined): 0 where s reads no computed row (its gradient
// is then written as zeros at once; mark_rows_read_cuda over the computed rows builds them).
at::Tensor aggregate_backward_x_cuda(const Transposed& t, const at::Tensor& w,
                                     const at::Tensor& grad_out, const at::Tensor& rows,
                                     int64_t num_dst_rows, const at::Tensor& self_w,
                                     const at::Tensor& rows_pos = {}, const at::Tensor& read_flags = {},
                                     bool self_by_row = false);
// The same for a few computed rows (reader_lists): entries = their CSR entries (sizes the lists
// without a wait for the device; a wrong count gives a wrong gradient); t (the transpose) serves
// the source rows with more than 32 computed readers, each summed by a block as spmm_long_rows
// does (or, with at most 32 computed rows, a repeated column's, by one warp). The other rows get
// the sums of aggregate_backward_x_cuda's one warp per row, bit for bit.
at::Tensor aggregate_backward_x_lists_cuda(const at::Tensor& rowptr, const at::Tensor& col, const Transposed& t,
                                           const at::Tensor& w, const at::Tensor& grad_out, const at::Tensor& rows,
                                           const at::Tensor& rows_pos, int64_t num_src, const at::Tensor& self_w,
                                           int64_t entries, bool self_by_row = false);
at::Tensor aggregate_backward_w_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                     const at::Tensor& x, const at::Tensor& grad_out,
                                     const at::Tensor& rows);
// schedule: row_schedule(rowptr), or none (every row summed by one warp, in index order). rows:
// distinct (undefined: every row, in the schedule's order).
at::Tensor aggregate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w,
                          const at::Tensor& x, const at::Tensor& rows, const at::Tensor& self_w,
                          const RowSchedule& schedule = {}, bool self_by_row = false);
// x[r, c] * (scale when mix64(mix64(key ^ gid[r]) + c) >= threshold, else 0); gid on x's device.
// row_flags (uint8, one per row; undefined: every row): rows flagged 0 are left unwritten, or
// zeroed with zero_unflagged. accumulate_into (contiguous, x's shape; no zeroing): added to in
// place on the flagged rows, and returned.
at::Tensor dropout_apply_cuda(const at::Tensor& x, const at::Tensor& gid, uint64_t key, uint64_t threshold,
                              float scale, const at::Tensor& row_flags = {}, bool zero_unflagged = false,
                              const at::Tensor& accumulate_into = {});
// The per-pair tensors may be stored in bfloat16 (storage; z, gx's sums and the weights float32):
// f_delta's bf16 precision. Every sum runs in z's / g's type.
at::Tensor pair_features_cuda(const at::Tensor& row, const at::Tensor& col, const at::Tensor& z,
                              at::ScalarType storage);
at::Tensor pair_grad_sums_cuda(const PairGradIndex& ix, const at::Tensor& z, const at::Tensor& gx);
// out in hidden's type (bfloat16 or g's), b1 and w2 in g's.
FDeltaHiddenGrad fdelta_hidden_grad_cuda(const at::Tensor& g, const at::Tensor& w2, const at::Tensor& hidden);
// The MLP's output layer over its hidden layer before the relu: logit[p] = sum over k of
// relu(hidden[p, k]) w2[k] + b2 (b2: one element on the device; logit in w2's type), a warp per
// row summing in a fixed order. One read of hidden instead of the relu's write and a
// matrix-vector product.
at::Tensor fdelta_relu_dot_cuda(const at::Tensor& hidden, const at::Tensor& w2, const at::Tensor& b2);
// x [rows, C] -> [C]: the sums of x's columns, in a fixed order (dense_cuda.cu).
at::Tensor column_sums_cuda(const at::Tensor& x);
// A linear layer's products over a few rows without cuBLAS, whose host time per call would be most
// of AD's deeper layers' (small_gemm_cuda.cu); float32 / float64, deterministic.
// Whether x [rows, k] (contiguous, float32 / float64 on the GPU) times w [k, n] is small enough
// for them: rows * k * n <= the limit.
bool small_linear_applies(const at::Tensor& x, const at::Tensor& w);
int64_t& small_linear_max_macs();  // that limit (tests set it to 0 to compare with cuBLAS)
// x [m, k] w [k, n] (+ b [n]) (ReLU, NaN kept).
at::Tensor small_linear_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, bool relu);
// out [m, k] (contiguous, e.g. the leading rows of a larger gradient) = g [m, n] w [k, n]^T.
void small_linear_grad_x_cuda(const at::Tensor& g, const at::Tensor& w, at::Tensor& out);
// x [m, k]^T g [m, n]: [k, n].
at::Tensor small_linear_grad_w_cuda(const at::Tensor& x, const at::Tensor& g);
// AD's straight-through band term's backward (model.cpp's band_term_grads) in one kernel: tau's
// gradient (one element: minus the sum of g over the band rows, in a fixed order) and (want_eps)
// eps's gradient, g at the band rows and zeros elsewhere.
struct BandTermGrads {
  at::Tensor tau, eps;
};
BandTermGrads band_term_grads_cuda(const at::Tensor& eps, const at::Tensor& tau_t, const at::Tensor& band_rows,
                                   const at::Tensor& grad, const at::Tensor& diff, double kappa, bool of_band_rows,
                                   bool want_eps);
// The gradient through a ReLU, g where out > 0 (else 0), and its column sums, in one pass.
std::pair<at::Tensor, at::Tensor> relu_grad_column_sums_cuda(const at::Tensor& g, const at::Tensor& out,
                                                             double scale = 1);
// The cross-entropy over the rows `rows` of logits [n, C] (labels: one per row of `rows`), a warp
// per row: loss[i] = scale (lse[i] - logits[rows[i], labels[i]]), lse[i] = log sum exp of that row
// (NaN for a label outside [0, C)). Backward: grad [n, C] (zeros where no row is listed) gets
// g scale (softmax - one-hot) of each listed row, added atomically (a listed row's elements receive
// one addition each, so distinct rows give fixed bits; repeated rows add up). g: one element.
struct CrossEntropyRows {
  at::Tensor loss, lse;
};
CrossEntropyRows cross_entropy_rows_cuda(const at::Tensor& logits, const at::Tensor& rows, const at::Tensor& labels,
                                         double scale = 1.0);
at::Tensor cross_entropy_rows_backward_cuda(const at::Tensor& logits, const at::Tensor& rows, const at::Tensor& labels,
                                            const at::Tensor& lse, const at::Tensor& g, double scale = 1.0);
// A deeper AD layer's output (merge_rows_cuda.cu): out[r] = active[r] ? upd[pos[r]] : prev[r] (pos:
// int32, each row's position among the computed rows, -1 for the others; every upd row has one).
// Backward: prev's gradient g with the active rows zeroed, upd's g at the active computed rows and
// zero at the others. band_diff: diff[b] = upd[pos[band_rows[b]]] - act(prev[band_rows[b]] + bias)
// (bias: undefined, or [width]; act: ReLU where relu, else the identity).
at::Tensor merge_rows_cuda(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos,
                           const at::Tensor& active);
std::pair<at::Tensor, at::Tensor> merge_rows_backward_cuda(const at::Tensor& g, const at::Tensor& pos,
                                                           const at::Tensor& active, int64_t upd_rows,
                                                           bool want_prev, bool want_upd);
at::Tensor band_diff_cuda(const at::Tensor& prev, const at::Tensor& upd, const at::Tensor& pos,
                          const at::Tensor& band_rows, const at::Tensor& bias = {}, bool relu = false);
// at::zeros on the GPU by a memset (cuda_rows.cuh's zeroed): less host time than a fill kernel.
at::Tensor zeroed_cuda(at::IntArrayRef size, const at::TensorOptions& options);
// How many of the current stream's first 64 last-block counters are not zero (waits for the
// device; tests: every grid must leave them zero).
int64_t nonzero_stream_counters();
// detail::tau_thresholds on the GPU (dense_cuda.cu), one single-thread kernel each way: tau(t) for
// t = 1..L from theta's a [L - 1], as [L] and as L separate one-element tensors; and a's gradient
// from the layers' gradients (undefined: zero).
constexpr int64_t kMaxTauLayers = 64;
std::pair<at::Tensor, std::vector<at::Tensor>> tau_thresholds_cuda(const at::Tensor& a, int64_t L, double lambda);
at::Tensor tau_thresholds_backward_cuda(const at::Tensor& a, double lambda, const std::vector<at::Tensor>& grads);
// The learned depth benefit's kernels (depth_benefit_cuda.cu; depth_benefit.h has the formulas).
// sigmoid_row_sums: out[r] = the sum over row r's entries e, in order, of sigmoid(pair_logit[
// entry_pair[e]]), a warp per row; its backward: g_pair[p] = sigmoid'(pair_logit[p]) times the sum
// of g over the rows of p's entries (each pair has at most two entries, added onto zero: the same
// bits in either order). pair_bce_sum: the sum over i of BCE-with-logits(pair_logit[sel_pair[i]],
// target[i]) (one element, a fixed order); its backward adds g (sigmoid - target) onto the pairs.
at::Tensor sigmoid_row_sums_cuda(const at::Tensor& rowptr, const at::Tensor& entry_pair, const at::Tensor& pair_logit);
at::Tensor sigmoid_row_sums_backward_cuda(const at::Tensor& rowptr, const at::Tensor& entry_pair,
                                          const at::Tensor& pair_logit, const at::Tensor& g);
at::Tensor pair_bce_sum_cuda(const at::Tensor& pair_logit, const at::Tensor& sel_pair, const at::Tensor& target);
at::Tensor pair_bce_sum_backward_cuda(const at::Tensor& pair_logit, const at::Tensor& sel_pair,
                                      const at::Tensor& target, const at::Tensor& g);
// depth_benefit_range: [-min l, max l] (float64 [2]) of l over the rows, one kernel (the last
// block combines the blocks' extremes); normalised_depth_benefit and its backward: one
// elementwise kernel each. offset: undefined or [n].
at::Tensor depth_benefit_range_cuda(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                    double t_max);
at::Tensor normalised_depth_benefit_cuda(const at::Tensor& d_plus, const at::Tensor& d, const at::Tensor& offset,
                                         const at::Tensor& range, double t_max, bool log_normalisation);
at::Tensor normalised_depth_benefit_backward_cuda(const at::Tensor& d_plus, const at::Tensor& d,
                                                  const at::Tensor& offset, const at::Tensor& range, double t_max,
                                                  bool log_normalisation, const at::Tensor& g);
// detail::depth_masks on the GPU (depth_masks_cuda.cu): the masks of eps [n] and tau [L] of one
// type, or of a given int64 depth [n] (band_mode 0 or 2). band_mode: 0 none, 1 |eps - tau(t)| <
// band_width, 2 every row; frozen_bits: bit t - 1 lists layer t's frozen rows. L <= 64. Its
// tile_offsets serve mask_rows_cuda: every mask's set rows (nonzero's order), `listed` in all.
detail::DepthMasks depth_masks_cuda(const at::Tensor& eps, const at::Tensor& tau, const at::Tensor& depth_in,
                                   int64_t L, int band_mode, double band_width, bool no_band_at_layer1,
                                   const at::Tensor& rowptr, uint64_t frozen_bits);
at::Tensor mask_rows_cuda(const at::Tensor& stacked, const at::Tensor& counts, const at::Tensor& tile_offsets,
                          int64_t listed);
void halo_read_bits_cuda(const at::Tensor& boundary, const at::Tensor& halo_owner, int64_t P,
                         const at::Tensor& comp_owned, const at::Tensor& comp_halo, at::Tensor& peer_bits,
                         at::Tensor& halo_bits, uint64_t layers);
at::Tensor halo_keep_masks_cuda(const at::Tensor& comp, const at::Tensor& comp_idx, const at::Tensor& reads,
                                const at::Tensor& reads_idx, const at::Tensor& offsets, int64_t t0, int64_t K,
                                uint64_t width_changed, bool all_readers, at::Tensor& dirty, at::Tensor& go);
#endif

}  // namespace adgnn::kernels
