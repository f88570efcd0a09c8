#include "ops/grad_in_place.h"

#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <atomic>
#include <mutex>

namespace adgnn::detail {

namespace {

// Per device type (CPU, CUDA; other devices' gradients are never changed in place): the reference
// count of an exclusively handed-over gradient, -1 until probed.
std::atomic<int64_t> probed_count[2] = {-1, -1};
// The slot the probe's backward writes; set under probe_mutex (a CUDA backward runs on the
// engine's device thread, so this cannot be thread-local).
std::atomic<int> probing_slot{-1};
std::mutex probe_mutex;

int slot_of(const c10::Device& d) { return d.is_cpu() ? 0 : d.is_cuda() ? 1 : -1; }

// Identity whose backward records how many references hold the gradient it is handed.
class HandOverProbeFn : public torch::autograd::Function<HandOverProbeFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    const int slot = probing_slot.load();
    if (slot >= 0) probed_count[slot].store(grads[0].use_count());
    return {grads[0]};
  }
};

}  // namespace

void probe_gradient_hand_over(const c10::Device& device) {
  const int slot = slot_of(device);
  // (Under InferenceMode no gradient is ever handed over, and no probe can run.)
  if (slot < 0 || probed_count[slot].load() > 0 || c10::InferenceMode::is_enabled()) return;
  std::lock_guard<std::mutex> lock(probe_mutex);
  if (probed_count[slot].load() > 0) return;
  at::AutoGradMode grad_on(true);
  probing_slot.store(slot);
  try {
    const at::Tensor x = torch::ones({2}, torch::dtype(torch::kFloat32).device(device).requires_grad(true));
    // MulBackward hands the probe a product of its own: a gradient nobody else holds.
    (HandOverProbeFn::apply(x) * 2).sum().backward();
  } catch (const c10::Error&) {
    // No count: gradients on this device are copied, never changed in place.
  }
  probing_slot.store(-1);
}

bool gradient_is_exclusive(const at::Tensor& grad) {
  if (!grad.defined()) return false;
  const int slot = slot_of(grad.device());
  const int64_t count = slot < 0 ? -1 : probed_count[slot].load();
  return count > 0 && grad.is_contiguous() && int64_t(grad.use_count()) <= count && grad.storage().use_count() == 1;
}

}  // namespace adgnn::detail
