// f_delta, the learned variant's same-label probability of an edge (internal; method.md).
#pragma once

#include <ATen/core/Tensor.h>

namespace adgnn::detail {

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

}  // namespace adgnn::detail
