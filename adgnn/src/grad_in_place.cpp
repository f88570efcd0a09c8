#include "grad_in_place.h"

#include <torch/torch.h>

#include <atomic>

namespace adgnn::detail {

namespace {

std::atomic<int64_t> probed_count{-1};

// Identity whose backward records how many references hold the gradient it is handed.
class HandOverProbeFn : public torch::autograd::Function<HandOverProbeFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    probed_count.store(grads[0].use_count());
    return {grads[0]};
  }
};

}  // namespace

void probe_gradient_hand_over() {
  static const bool done = [] {
    at::AutoGradMode grad_on(true);
    const at::Tensor x = torch::ones({2}, torch::requires_grad());
    // MulBackward hands the probe a product of its own: a gradient nobody else holds.
    (HandOverProbeFn::apply(x) * 2).sum().backward();
    return true;
  }();
  (void)done;
}

bool gradient_is_exclusive(const at::Tensor& grad) {
  const int64_t count = probed_count.load();
  return count > 0 && grad.defined() && grad.is_contiguous() && grad.use_count() <= count &&
         grad.storage().use_count() == 1;
}

}  // namespace adgnn::detail
