// Tensors with room for more rows after them in their buffer (internal).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace adgnn::detail {

// Layer 1's output on a rank is built with room for the halo rows after it (Layer::
// set_output_room), so that layer 2's exchange grows it into [owned; halo] instead of copying
// every owned row into a new tensor.
// rows_with_room: an uninitialised [rows, cols] tensor whose buffer holds `room` more rows after
// them; a tensor of its own, not a view, so writes into the room do not touch its version.
at::Tensor rows_with_room(int64_t rows, int64_t cols, int64_t room, const at::TensorOptions& options);
// Whether t (2-D, contiguous, at its buffer's start) has `more` rows of its buffer after it; and
// t followed by them, as a tensor of its own (undefined without that room).
bool has_room(const at::Tensor& t, int64_t more);
at::Tensor grow_into_room(const at::Tensor& t, int64_t more);

}  // namespace adgnn::detail
