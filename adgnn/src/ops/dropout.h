// The counter-based dropout's mask as a value (internal): what dropout_rows (adgnn/ops.h)
// applies, for the operations that fuse it (ops/linear.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace adgnn::detail {

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

}  // namespace adgnn::detail
