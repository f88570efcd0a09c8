// Changing a gradient in place inside a custom autograd function's backward (internal).
#pragma once

#include <ATen/core/Tensor.h>

namespace adgnn::detail {

// Whether a gradient handed to a backward can be changed in place and returned: nothing but the
// engine's hand-over holds it (the reference count of a gradient that its producer gave up,
// measured once with a probe function, as it depends on LibTorch's internals), no view of it
// exists, and it is contiguous. A gradient that its producer also passed to another input
// (AddBackward's) or that a hook kept fails the test and is copied instead.
bool gradient_is_exclusive(const at::Tensor& grad);

// Measures the count now (a tiny backward pass): call it outside any backward pass, e.g. in a
// forward, before the first gradient_is_exclusive.
void probe_gradient_hand_over();

}  // namespace adgnn::detail
