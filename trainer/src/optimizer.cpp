// FlatAdam (declared in adgnn/trainer.h).
//
// Why flat: torch::optim::Adam launches about a dozen kernels per parameter tensor, a gradient
// allreduce over separate tensors concatenates and splits them, and zero_grad touches each one:
// on a GPU step of a few milliseconds, AD's deeper layers already leave the device waiting for the
// host, and these ~150 launches per step (GCN, depth 4) would be host time too
// (docs/decisions/flat-adam.md). On the GPU each group's update is ATen's fused multi-tensor kernel (3
// launches instead of 18).
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "adgnn/trainer.h"

namespace adgnn {

FlatAdam::FlatAdam(std::vector<Group> groups, double lr, double beta1, double beta2, double eps)
    : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  torch::NoGradGuard guard;
  // The groups' gradient buffers as slices of one buffer when they share a type and device: the
  // distributed step then sums them over the ranks in one collective (every collective is a
  // point where each rank waits for the slowest).
  int64_t grad_total = 0;
  bool one_buffer = true;
  const Group* first = nullptr;
  for (const Group& g : groups) {
    if (g.params.empty()) continue;
    if (first == nullptr) first = &g;
    const at::Tensor& a = first->params.front().second;
    const at::Tensor& b = g.params.front().second;
    one_buffer = one_buffer && a.dtype() == b.dtype() && a.device() == b.device();
    for (const auto& [name, p] : g.params) grad_total += p.numel();
  }
  if (first != nullptr && one_buffer)
    grad_all_ = torch::zeros({grad_total}, first->params.front().second.options().requires_grad(false));
  int64_t grad_off = 0;
  for (Group& g : groups) {
    if (g.params.empty()) continue;
    Packed pk;
    pk.weight_decay = g.weight_decay;
    int64_t total = 0;
    const at::TensorOptions opts = g.params.front().second.options();
    for (const auto& [name, p] : g.params) {
      if (p.options().dtype() != opts.dtype() || p.device() != opts.device())
        throw std::invalid_argument("FlatAdam: parameter " + name + " differs in dtype or device from its group");
      total += p.numel();
    }
    pk.param = torch::empty({total}, opts.requires_grad(false));
    pk.grad = grad_all_.defined() ? grad_all_.slice(0, grad_off, grad_off + total)
                                  : torch::zeros({total}, opts.requires_grad(false));
    grad_off += total;
    pk.exp_avg = torch::zeros({total}, opts.requires_grad(false));
    pk.exp_avg_sq = torch::zeros({total}, opts.requires_grad(false));
    int64_t off = 0;
    for (auto& [name, p] : g.params) {
      const int64_t k = p.numel();
      pk.param.slice(0, off, off + k).copy_(p.detach().reshape({-1}));
      // The parameter becomes a view of the buffer: the same TensorImpl, so every holder of the
      // tensor (the model) sees it; its gradient a view of the gradient buffer, which autograd
      // accumulates into in place, until zero_grad unsets it (pack_gradients sets it again).
      const std::vector<int64_t> sizes(p.sizes().begin(), p.sizes().end());
      p.set_(pk.param.storage(), off, sizes, c10::contiguous_strides(sizes));
      p.mutable_grad() = pk.grad.slice(0, off, off + k).view(sizes);
      names_.push_back(name);
      views_.push_back({groups_.size(), off, sizes, p});
      off += k;
    }
    groups_.push_back(std::move(pk));
  }
}

void FlatAdam::zero_grad() {
  // Unset, not zero-filled: backward's AccumulateGrad then keeps each parameter's new gradient as
  // it comes (no kernel), where a defined one cost a fill of the buffer and an addition per
  // parameter (11 launches of an AD-GCN_fast step at depth 4, host time where that step waits
  // for the host); pack_gradients copies them into the buffer with one launch per group.
  for (View& v : views_) v.param.mutable_grad().reset();
  packed_ = false;
}

void FlatAdam::pack_gradients() {
  if (packed_) return;
  torch::NoGradGuard guard;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Packed& g = groups_[gi];
    std::vector<at::Tensor> parts;
    bool every = true;  // every parameter of the group has a gradient: one concatenation
    for (const View& v : views_) {
      if (v.group != gi) continue;
      const at::Tensor& gr = v.param.grad();
      every = every && gr.defined();
      if (gr.defined()) parts.push_back(gr.reshape({-1}));
    }
    if (every) {
      at::cat_out(g.grad, parts, 0);
    } else {
      // A parameter backward did not reach (a rank without the rows that use it) counts as zero.
      g.grad.zero_();
      for (const View& v : views_)
        if (v.group == gi && v.param.grad().defined())
          g.grad.slice(0, v.offset, v.offset + v.param.numel()).copy_(v.param.grad().reshape({-1}));
    }
    for (View& v : views_)
      if (v.group == gi) v.param.mutable_grad() = g.grad.slice(0, v.offset, v.offset + v.param.numel()).view(v.sizes);
  }
  packed_ = true;
}

void FlatAdam::step() {
  pack_gradients();
  torch::NoGradGuard guard;
  ++step_;
  const double bias1 = 1 - std::pow(beta1_, double(step_));
  const double bias2 = 1 - std::pow(beta2_, double(step_));
  bool counted = false;  // step_count_ holds step_ (one fill per step, however many groups)
  for (Packed& g : groups_) {
    if (g.param.is_cuda()) {
      // ATen's fused kernel (torch.optim.Adam(fused=True)): the same update in one launch instead
      // of nine; the step count it reads lives on the device (float32, exact to 2^24 steps).
      if (!step_count_.defined() || step_count_.device() != g.param.device()) {
        step_count_ = torch::empty({}, g.param.options().dtype(torch::kFloat32));
        counted = false;
      }
      if (!counted) {
        step_count_.fill_(double(step_));
        counted = true;
      }
      at::_fused_adam_({g.param}, {g.grad}, {g.exp_avg}, {g.exp_avg_sq}, {}, {step_count_}, lr_, beta1_, beta2_,
                       g.weight_decay, eps_, /*amsgrad=*/false, /*maximize=*/false);
      continue;
    }
    // torch::optim::Adam's update (non-amsgrad), operation for operation, on whole buffers.
    at::Tensor grad = g.grad;
    if (g.weight_decay != 0) grad = grad.add(g.param, g.weight_decay);
    g.exp_avg.mul_(beta1_).add_(grad, 1 - beta1_);
    g.exp_avg_sq.mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
    const at::Tensor denom = (g.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(eps_);
    g.param.addcdiv_(g.exp_avg, denom, -lr_ / bias1);
  }
}

std::vector<at::Tensor> FlatAdam::gradient_buffers() {
  pack_gradients();
  std::vector<at::Tensor> out;
  for (const Packed& g : groups_) out.push_back(g.grad);
  return out;
}

std::vector<at::Tensor> FlatAdam::reduction_buffers() {
  if (!grad_all_.defined()) return gradient_buffers();
  pack_gradients();
  return {grad_all_};
}

std::vector<std::pair<std::string, at::Tensor>> FlatAdam::named_state() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < names_.size(); ++i) {
    const View& v = views_[i];
    const Packed& g = groups_[v.group];
    int64_t k = 1;
    for (int64_t s : v.sizes) k *= s;
    out.emplace_back("exp_avg/" + names_[i], g.exp_avg.slice(0, v.offset, v.offset + k).view(v.sizes));
    out.emplace_back("exp_avg_sq/" + names_[i], g.exp_avg_sq.slice(0, v.offset, v.offset + k).view(v.sizes));
  }
  return out;
}

void FlatAdam::set_steps(int64_t steps) {
  if (steps < 0) throw std::invalid_argument("FlatAdam::set_steps: negative step count");
  step_ = steps;
}

std::vector<FlatAdam::Group> adam_groups(const Model& model, double weight_decay) {
  FlatAdam::Group decay{{}, weight_decay}, no_decay{{}, 0.0};
  for (const auto& [name, p] : model.named_parameters())
    (name.rfind("theta.", 0) == 0 ? no_decay : decay).params.emplace_back(name, p);
  return {decay, no_decay};
}

void allreduce_gradients(FlatAdam& opt, RankTransport& transport) {
  // One reduction for every group (per group where their types differ): the same buffers, in the
  // same order, on every rank; a gradient that backward did not reach on a rank is zero there.
  for (at::Tensor& g : opt.reduction_buffers()) transport.allreduce(g, RankTransport::Op::Sum);
}

}  // namespace adgnn
