// YAML configs for `adgnn train`: the keys are the command-line flags without dashes.
#include <yaml-cpp/yaml.h>

#include <set>
#include <sstream>

#include "adgnn/trainer.h"
#include "yaml_config.h"

namespace adgnn {

namespace {

template <typename T>
void take(const YAML::Node& root, const std::string& key, T& out, const std::string& path,
          std::set<std::string>& seen) {
  seen.insert(key);
  const YAML::Node n = root[key];
  if (!n) return;
  try {
    out = n.as<T>();
  } catch (const YAML::Exception&) {
    throw InputError(path + ": key '" + key + "' has a value of the wrong type (line " +
                     std::to_string(n.Mark().line + 1) + ")");
  }
}

}  // namespace

// Applies every key of a YAML mapping to `c`; unknown keys and wrong types name `where`.
void apply_yaml(const YAML::Node& root, TrainConfig& c, const std::string& path) {
  if (!root.IsMap()) throw InputError(path + ": expected a mapping of settings");
  std::set<std::string> seen;
  ModelConfig& m = c.model;
  take(root, "model", m.backbone, path, seen);
  take(root, "variant", m.variant, path, seen);
  take(root, "hidden", m.hidden, path, seen);
  take(root, "layers", m.layers, path, seen);
  take(root, "t_max", m.t_max, path, seen);
  take(root, "dropout", m.dropout, path, seen);
  take(root, "batchnorm", m.batchnorm, path, seen);
  take(root, "heads", m.heads, path, seen);
  take(root, "lambda", m.lambda, path, seen);
  take(root, "kappa", m.kappa, path, seen);
  take(root, "band", m.band, path, seen);
  take(root, "normalisation", m.normalisation, path, seen);
  take(root, "theta_init", m.theta_init, path, seen);
  take(root, "heuristic", m.same_label_heuristic, path, seen);
  take(root, "degree_threshold", m.degree_threshold, path, seen);
  take(root, "dirgnn_alpha", m.dirgnn_alpha, path, seen);
  take(root, "seed", m.seed, path, seen);
  take(root, "device", m.device, path, seen);
  take(root, "compact", m.compact_deep_layers, path, seen);
  take(root, "compact_halo", m.compact_halo, path, seen);
  take(root, "fdelta_precision", m.fdelta_precision, path, seen);
  take(root, "dataset", c.dataset, path, seen);
  take(root, "data_dir", c.data_dir, path, seen);
  take(root, "splits", c.splits, path, seen);
  take(root, "epochs", c.epochs, path, seen);
  take(root, "lr", c.lr, path, seen);
  take(root, "weight_decay", c.weight_decay, path, seen);
  take(root, "patience", c.patience, path, seen);
  take(root, "runs", c.runs, path, seen);
  take(root, "threads", c.threads, path, seen);
  take(root, "run_workers", c.run_workers, path, seen);
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (!seen.count(key))
      throw InputError(path + ": unknown key '" + key + "' (line " +
                       std::to_string(kv.first.Mark().line + 1) + ")");
  }
}

YAML::Node load_yaml(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError(path + ": cannot open file");
  } catch (const YAML::Exception& e) {
    throw InputError(path + ": invalid YAML (line " + std::to_string(e.mark.line + 1) + ": " + e.msg + ")");
  }
}

void load_train_config(const std::string& path, TrainConfig& c) { apply_yaml(load_yaml(path), c, path); }

std::string describe(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  std::ostringstream os;
  os << "model=" << m.backbone << " variant=" << m.variant << " hidden=" << m.hidden
     << " layers=" << m.layers << " dropout=" << m.dropout
     << " batchnorm=" << m.batchnorm << " heads=" << m.heads << " lambda=" << m.lambda
     << " kappa=" << m.kappa << " band=" << m.band << " normalisation=" << m.normalisation
     << " theta_init=" << m.theta_init << " seed=" << m.seed << " splits=" << c.splits
     << " lr=" << c.lr << " weight_decay=" << c.weight_decay
     << " patience=" << c.patience << " float64=" << m.float64 << " soft_masks=" << m.soft_masks
     << " t_max=" << m.t_max << " dirgnn_alpha=" << m.dirgnn_alpha << " device=" << m.device;
  // Only when set: the line (checkpoint fingerprints, sweep keys) of every earlier run is unchanged.
  if (m.same_label_heuristic != "degree") os << " heuristic=" << m.same_label_heuristic;
  if (m.degree_threshold > 0) os << " degree_threshold=" << m.degree_threshold;
  // f_delta's precision changes the learned variant's numbers (a resume must not mix them).
  if (m.fdelta_precision != "fp32") os << " fdelta_precision=" << m.fdelta_precision;
  return os.str();
}

}  // namespace adgnn
