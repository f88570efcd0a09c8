// Changing a gradient in place inside a custom autograd function's backward (internal).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace adgnn::detail {

// Whether a gradient handed to a backward can be changed in place and returned: nothing but the
// engine's hand-over holds it (the reference count of a gradient that its producer gave up,
// measured once with a probe function, as it depends on LibTorch's internals), no view of it
// exists, and it is contiguous. A gradient that its producer also passed to another input
// (AddBackward's) or that a hook kept fails the test and is copied instead.
bool gradient_is_exclusive(const at::Tensor& grad);

// Measures the count for gradients on `device`'s type now (a tiny backward pass there), once:
// call it outside any backward pass, e.g. in a forward, before gradient_is_exclusive is asked
// about such a gradient (which says no until then).
void probe_gradient_hand_over(const c10::Device& device);

}  // namespace adgnn::detail
