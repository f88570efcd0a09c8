// The AD-GNN model (../shared/docs/method.md): its layers and parameters, built from a
// ModelConfig; a forward pass is a ForwardPass (forward_pass.h).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "adgnn/model.h"
#include "adgnn/ops.h"
#include "model/forward_pass.h"
#include "depth/depth_target.h"
#include "depth/heuristics.h"
#include "backbones/layer.h"
#include "model/model_parts.h"

namespace adgnn {

struct Model::Impl : detail::ModelParts {};

at::Tensor detail::ModelParts::batchnorm(size_t t, const at::Tensor& x, bool training) {
  return torch::batch_norm(x, bn_weight[t], bn_bias[t], bn_mean[t], bn_var[t], training && x.size(0) > 1, 0.1, 1e-5,
                           false);
}

Model::Model(const ModelConfig& cfg) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = cfg;
  if (cfg.layers < 1) throw InputError("--layers " + std::to_string(cfg.layers) + ": must be >= 1");
  if (cfg.hidden < 1) throw InputError("--hidden " + std::to_string(cfg.hidden) + ": must be >= 1");
  if (cfg.in_dim < 1 || cfg.out_dim < 1) throw InputError("model: input and output widths must be positive");
  if (cfg.dropout < 0 || cfg.dropout >= 1) throw InputError("--dropout: must be in [0, 1)");
  if (cfg.lambda < 0 || cfg.lambda > 1) throw InputError("--lambda: must be in [0, 1]");
  if (cfg.kappa <= 0) throw InputError("--kappa: must be positive");
  if (cfg.heads < 1) throw InputError("--heads: must be >= 1");
  if (cfg.normalisation != "linear" && cfg.normalisation != "log" && cfg.normalisation != "rank")
    throw InputError("--normalisation " + cfg.normalisation + ": expected linear, log or rank");
  detail::check_heuristic(cfg.same_label_heuristic);
  m.depth_at_least = detail::depth_target_at_least(cfg.depth_target, cfg.layers);
  if (!m.depth_at_least.empty() && cfg.variant == Variant::Plain)
    throw InputError("--depth-target: only with an AD variant (ad, ad_fast, ad_sharp)");
  if (!(cfg.depth_target_weight > 0) || !std::isfinite(cfg.depth_target_weight))
    throw InputError("--depth-target-weight: must be positive");
  if (cfg.compact_deep_layers != "auto" && cfg.compact_deep_layers != "on" && cfg.compact_deep_layers != "off")
    throw InputError("--compact " + cfg.compact_deep_layers + ": expected auto, on or off");
  if (cfg.compact_halo != "auto" && cfg.compact_halo != "on" && cfg.compact_halo != "off")
    throw InputError("--compact-halo " + cfg.compact_halo + ": expected auto, on or off");
  if (cfg.fdelta_precision != "fp32" && cfg.fdelta_precision != "tf32" && cfg.fdelta_precision != "bf16")
    throw InputError("--fdelta-precision " + cfg.fdelta_precision + ": expected fp32, tf32 or bf16");
  if (cfg.precision != "fp32" && cfg.precision != "bf16")
    throw InputError("--precision " + cfg.precision + ": expected fp32 or bf16");
  if (cfg.precision == "bf16" && cfg.float64) throw InputError("--precision bf16: not with float64 parameters");
  if (cfg.degree_threshold < 0) throw InputError("--degree-threshold: must be >= 0");
  if (cfg.degree_threshold > 0 && cfg.variant != Variant::Plain)
    throw InputError("--degree-threshold: only with --variant plain (Exp-2's case study)");
  c10::Device device("cpu");
  try {
    device = c10::Device(cfg.device);
  } catch (const std::exception&) {
    throw InputError("--device " + cfg.device + ": not a device (cpu, cuda, cuda:N)");
  }
  // A generator of the model's own: models built concurrently (sweep workers) or after other
  // draws initialise identically for the same seed.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed);
  const c10::ScalarType dtype = cfg.float64 ? torch::kFloat64 : torch::kFloat32;
  const auto on = [&](at::Tensor t) { return t.to(device, dtype).requires_grad_(true); };
  int64_t width = cfg.in_dim;
  for (int64_t t = 0; t < cfg.layers; ++t) {
    const bool last = t == cfg.layers - 1;
    detail::LayerOptions opt;
    opt.heads = last ? 1 : cfg.heads;
    opt.concat_heads = !last;
    opt.classifier = last;
    opt.dirgnn_alpha = cfg.dirgnn_alpha;
    opt.device = device;
    opt.dtype = dtype;
    opt.gen = gen;
    m.layers.push_back(detail::make_layer(cfg.backbone, width, last ? cfg.out_dim : cfg.hidden, opt));
    if (!last && !cfg.batchnorm) m.layers.back()->fuse_relu();  // the hidden layers' ReLU, where the layer can
    width = m.layers.back()->out_dim();
    if (!last && cfg.batchnorm) {
      m.bn_weight.push_back(on(torch::ones({width})));
      m.bn_bias.push_back(on(torch::zeros({width})));
      m.bn_mean.push_back(torch::zeros({width}, torch::dtype(dtype).device(device)));
      m.bn_var.push_back(torch::ones({width}, torch::dtype(dtype).device(device)));
    }
  }
  m.theta_a = on(torch::full({std::max<int64_t>(cfg.layers - 1, 0)}, cfg.theta_init));
  if (!m.depth_at_least.empty()) {
    m.depth_at_least_t = torch::tensor(m.depth_at_least, torch::kFloat64).to(device, dtype);
    // --depth-target: theta starts where the target puts it when eps is spread evenly (rank
    // normalisation): tau(t) = 1 - Q_t, so that the first epochs, which the best-validation
    // selection often keeps, already have the target's depths. c_t = -log(Q_t / (1 - lambda)) and
    // softplus(a_t) = c_t - c_{t-1} (a step kept in [1e-4, 30]: Q_t = 0 has no finite threshold).
    torch::NoGradGuard no_grad;
    double prev = 0;
    for (int64_t t = 2; t <= cfg.layers; ++t) {
      const double q = std::max(m.depth_at_least[size_t(t - 1)], 1e-12) / std::max(1.0 - cfg.lambda, 1e-12);
      const double c = std::max(-std::log(std::min(q, 1.0)), prev);
      const double step = std::clamp(c - prev, 1e-4, 30.0);
      m.theta_a[t - 2] = step > 20 ? step : std::log(std::expm1(step));
      prev += step;
    }
  }
  m.sharp_log_beta = torch::zeros({Impl::kBuckets}, torch::dtype(torch::kFloat64).device(device));
  m.sharp_log_gamma = torch::zeros({Impl::kBuckets}, torch::dtype(torch::kFloat64).device(device));
  if (cfg.variant == Variant::Ad) {
    // f_delta reads the first layer's transform of the input (width of one layer-1 channel set).
    const int64_t h = m.layers.front()->input_transform(torch::zeros({1, cfg.in_dim}, torch::dtype(dtype).device(device))).size(1);
    const double a1 = std::sqrt(6.0 / double(3 * h)), a2 = std::sqrt(6.0 / double(h + 1));
    m.fd_w1 = on(torch::empty({2 * h, h}).uniform_(-a1, a1, gen));
    m.fd_b1 = on(torch::zeros({h}));
    m.fd_w2 = on(torch::empty({h, 1}).uniform_(-a2, a2, gen));
    m.fd_b2 = on(torch::zeros({1}));
  }
}

c10::ScalarType activation_type(const ModelConfig& cfg) {
  return cfg.precision == "bf16" ? torch::kBFloat16 : cfg.float64 ? torch::kFloat64 : torch::kFloat32;
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

const ModelConfig& Model::config() const { return impl_->cfg; }
void Model::set_defer_stats(bool on) { impl_->defer_stats = on; }

void ForwardStats::settle() {
  if (!pending_edges.defined()) return;
  const at::Tensor counts = pending_edges.to(torch::kCPU).contiguous();
  edges_processed.assign(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  pending_edges = at::Tensor();
}

std::vector<std::pair<std::string, at::Tensor>> Model::named_parameters() const {
  const Impl& m = *impl_;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t t = 0; t < m.layers.size(); ++t)
    for (auto& [name, p] : m.layers[t]->params())
      out.emplace_back("layers." + std::to_string(t) + "." + name, p);
  for (size_t t = 0; t < m.bn_weight.size(); ++t) {
    out.emplace_back("bn." + std::to_string(t) + ".weight", m.bn_weight[t]);
    out.emplace_back("bn." + std::to_string(t) + ".bias", m.bn_bias[t]);
  }
  if (m.cfg.variant == Variant::Ad) {
    out.emplace_back("f_delta.w1", m.fd_w1);
    out.emplace_back("f_delta.b1", m.fd_b1);
    out.emplace_back("f_delta.w2", m.fd_w2);
    out.emplace_back("f_delta.b2", m.fd_b2);
  }
  if (m.adaptive() && m.theta_a.numel() > 0) out.emplace_back("theta.a", m.theta_a);
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> Model::named_buffers() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  if (impl_->cfg.variant == Variant::AdSharp) {
    out.emplace_back("sharp.log_beta", impl_->sharp_log_beta);
    out.emplace_back("sharp.log_gamma", impl_->sharp_log_gamma);
  }
  for (size_t t = 0; t < impl_->bn_mean.size(); ++t) {
    out.emplace_back("bn." + std::to_string(t) + ".running_mean", impl_->bn_mean[t]);
    out.emplace_back("bn." + std::to_string(t) + ".running_var", impl_->bn_var[t]);
  }
  return out;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

ForwardOutput Model::forward(const MessageGraph& g, const at::Tensor& x, bool training, int64_t epoch,
                             const at::Tensor& labels, const at::Tensor& train_mask) {
  return detail::ForwardPass(*impl_, g, x, training, epoch, labels, train_mask).run();
}

at::Tensor training_loss(const ForwardOutput& out, const at::Tensor& rows, const at::Tensor& labels, double scale) {
  const at::Tensor ce = cross_entropy_sum(out.logits, rows, labels, scale);
  const at::Tensor with_reg = out.reg_loss.defined() && out.reg_loss.requires_grad() ? ce + out.reg_loss : ce;
  return out.depth_loss.defined() ? with_reg + out.depth_loss : with_reg;
}

}  // namespace adgnn
