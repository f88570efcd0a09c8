// YAML configs for `adgnn train`: the keys are the command-line flags without dashes.
#include <yaml-cpp/yaml.h>

#include <set>
#include <sstream>

#include "adgnn/settings.h"
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

// The backbone and variant by name ("gcn", "ad_fast"), parsed here, at the edge.
void take(const YAML::Node& root, const std::string& key, Backbone& out, const std::string& path,
          std::set<std::string>& seen) {
  std::string name = to_string(out);
  take(root, key, name, path, seen);
  out = parse_backbone(name, path + ": key '" + key + "':");
}
void take(const YAML::Node& root, const std::string& key, Variant& out, const std::string& path,
          std::set<std::string>& seen) {
  std::string name = to_string(out);
  take(root, key, name, path, seen);
  out = parse_variant(name, path + ": key '" + key + "':");
}

}  // namespace

// Applies every key of a YAML mapping to `c`; unknown keys and wrong types name `where`.
void apply_yaml(const YAML::Node& root, TrainConfig& c, const std::string& path) {
  if (!root.IsMap()) throw InputError(path + ": expected a mapping of settings");
  std::set<std::string> seen;
  for_each_setting(
      [&](const Setting& s, auto& field) {
        if (s.source != Setting::Source::TestsOnly) take(root, s.key, field, path, seen);
      },
      c);
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
  const TrainConfig defaults;
  std::ostringstream os;
  for_each_setting(
      [&](const Setting& s, const auto& field, const auto& initial) {
        if (s.line == Setting::Line::Never || (s.line == Setting::Line::UnlessDefault && field == initial)) return;
        os << (os.tellp() > 0 ? " " : "") << s.key << '=' << field;
      },
      c, defaults);
  return os.str();
}

}  // namespace adgnn
