// AD#'s calibration (ModelParts::update_sharp): per degree bucket, the signal and noise
// factors beta and gamma that the next pass's depth benefit uses.
#include <torch/torch.h>

#include <vector>

#include "adgnn/model.h"
#include "model/model_parts.h"

namespace adgnn::detail {

at::Tensor ModelParts::degree_bucket(const at::Tensor& deg) {
  return (deg.to(torch::kFloat64) + 1).log2().floor().to(torch::kInt64).clamp(0, kBuckets - 1);
}

// AD#'s estimators (method.md leaves them open): on the training nodes, per layer t (h^(0) = x
// up to the last hidden layer), the class separation S_t(v) = ||mu_t[y_v] - mu_t||^2 and the
// within-class spread W_t(v) = ||h_t(v) - mu_t[y_v]||^2, with class means mu_t[c] and global
// mean mu_t over the training nodes. Per degree bucket, log beta is the mean over consecutive
// layers of the change of mean log S (signal calibration), log gamma the same for W (noise
// evolution). Buckets without training nodes keep beta = gamma = 1.
void ModelParts::update_sharp(const MessageGraph& g, const at::Tensor& x, const std::vector<at::Tensor>& outs,
                              const at::Tensor& deg, const at::Tensor& labels, const at::Tensor& train_mask) {
  torch::NoGradGuard guard;
  // On a rank, every sum is over all ranks' training nodes, so all ranks get the same estimates.
  auto sum_all = [&](at::Tensor t) {
    t = t.contiguous();
    if (g.distributed()) g.transport->allreduce(t, RankTransport::Op::Sum);
    return t;
  };
  const auto f64 = x.options().dtype(torch::kFloat64);
  const at::Tensor idx = train_mask.nonzero().squeeze(1);
  const double total = sum_all(torch::full({1}, double(idx.numel()), f64)).item<double>();
  if (total < 2) return;
  const at::Tensor y = labels.index_select(0, idx);
  const int64_t C = cfg.out_dim;
  const at::Tensor bucket = degree_bucket(deg.index_select(0, idx));
  const at::Tensor count = sum_all(torch::zeros({kBuckets}, f64).index_add(0, bucket, torch::ones({idx.numel()}, f64)));
  std::vector<at::Tensor> layers{x};
  for (size_t t = 0; t + 1 < outs.size(); ++t) layers.push_back(outs[t]);
  std::vector<at::Tensor> logS, logW;
  for (const auto& h_all : layers) {
    const at::Tensor h = h_all.index_select(0, idx).to(torch::kFloat64);
    const at::Tensor sums = sum_all(torch::zeros({C, h.size(1)}, h.options()).index_add(0, y, h));
    const at::Tensor n_c = sum_all(torch::zeros({C}, h.options()).index_add(0, y, torch::ones({h.size(0)}, h.options())));
    const at::Tensor mu_c = sums / n_c.clamp_min(1).unsqueeze(1);
    const at::Tensor mu = sums.sum(0, true) / total;
    const at::Tensor sep = (mu_c.index_select(0, y) - mu).pow(2).sum(1);
    const at::Tensor spread = (h - mu_c.index_select(0, y)).pow(2).sum(1);
    auto bucket_mean_log = [&](const at::Tensor& v) {
      const at::Tensor sum = sum_all(torch::zeros({kBuckets}, h.options()).index_add(0, bucket, (v + 1e-12).log()));
      return sum / count.clamp_min(1);
    };
    logS.push_back(bucket_mean_log(sep));
    logW.push_back(bucket_mean_log(spread));
  }
  if (layers.size() < 2) return;
  at::Tensor db = torch::zeros({kBuckets}, count.options()), dg = torch::zeros({kBuckets}, count.options());
  for (size_t t = 1; t < layers.size(); ++t) {
    db += logS[t] - logS[t - 1];
    dg += logW[t] - logW[t - 1];
  }
  const at::Tensor has = count > 0;
  const double k = double(layers.size() - 1);
  sharp_log_beta.copy_(torch::where(has, db / k, torch::zeros_like(db)));
  sharp_log_gamma.copy_(torch::where(has, dg / k, torch::zeros_like(dg)));
}

}  // namespace adgnn::detail
