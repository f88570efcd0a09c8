// YAML helpers shared by configs and sweep grids (internal).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "adgnn/trainer.h"

namespace adgnn {

YAML::Node load_yaml(const std::string& path);
// The backbone and variant as YAML values: their names.
inline YAML::Emitter& operator<<(YAML::Emitter& e, Backbone b) { return e << to_string(b); }
inline YAML::Emitter& operator<<(YAML::Emitter& e, Variant v) { return e << to_string(v); }
// Applies every key of a mapping to `c`; unknown keys and wrong types are errors naming `path`.
void apply_yaml(const YAML::Node& root, TrainConfig& c, const std::string& path);

}  // namespace adgnn
