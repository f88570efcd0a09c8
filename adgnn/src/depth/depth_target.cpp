#include "depth/depth_target.h"

#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "adgnn/loaders.h"

namespace adgnn::detail {

std::vector<double> depth_target_at_least(const std::string& spec, int64_t layers) {
  if (spec.empty()) return {};
  std::vector<double> share;  // of depths 0..layers
  if (spec == "uniform") {
    share.assign(size_t(layers + 1), 1.0 / double(layers));
    share[0] = 0;
  } else {
    std::stringstream in(spec);
    std::string item;
    while (std::getline(in, item, ',')) {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size() || !std::isfinite(v) || v < 0)
        throw InputError("--depth-target " + spec + ": '" + item + "' is not a share in [0, 1]");
      share.push_back(v);
    }
    if (int64_t(share.size()) != layers + 1)
      throw InputError("--depth-target " + spec + ": expected uniform or " + std::to_string(layers + 1) +
                       " shares (depths 0.." + std::to_string(layers) + "), got " + std::to_string(share.size()));
    double sum = 0;
    for (double v : share) sum += v;
    if (std::abs(sum - 1) > 1e-6)
      throw InputError("--depth-target " + spec + ": the shares sum to " + std::to_string(sum) + ", not 1");
  }
  std::vector<double> at_least(size_t(layers), 0.0);  // Q_t = share of depths t..layers
  double tail = 0;
  for (int64_t t = layers; t >= 1; --t) {
    tail += share[size_t(t)];
    at_least[size_t(t - 1)] = tail;
  }
  return at_least;
}

at::Tensor depth_target_penalty(const at::Tensor& eps, const std::vector<at::Tensor>& tau_layers,
                                const at::Tensor& at_least, double kappa, double weight,
                                RankTransport* transport) {
  TORCH_CHECK(int64_t(tau_layers.size()) == at_least.numel(), "depth_target_penalty: one threshold per target share");
  const int64_t L = at_least.numel();
  // sums[t - 1] = sum over this rank's rows of sigmoid((eps_v - tau(t)) / kappa).
  const at::Tensor tau = torch::stack(tau_layers).view({L, 1}).to(eps.scalar_type());
  const at::Tensor sums = torch::sigmoid((eps.view({1, -1}) - tau) / kappa).sum(1);
  // Every rank's sums and row count, reduced once (in float64: the shares are exact sums of rows).
  at::Tensor total = torch::cat({sums.detach().to(torch::kFloat64),
                                 torch::full({1}, double(eps.numel()), sums.options().dtype(torch::kFloat64))});
  const int ranks = transport ? transport->size() : 1;
  if (transport && ranks > 1) transport->allreduce(total, RankTransport::Op::Sum);
  const at::Tensor n = total.narrow(0, L, 1).clamp_min(1);
  const at::Tensor S = (total.narrow(0, 0, L) / n).to(eps.scalar_type());   // the global shares, constants
  // weight * sum_t (S_t - Q_t) (2 s_t - (Q_t + S_t) / P), s_t this rank's sums / N: in value the
  // ranks' shares add up to weight * sum (S - Q)^2, in gradient to 2 weight (S - Q) dS.
  const at::Tensor mine = sums / n.to(eps.scalar_type());
  return weight * ((S - at_least) * (2 * mine - (at_least + S) / double(ranks))).sum();
}

}  // namespace adgnn::detail
