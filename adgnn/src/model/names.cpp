// The backbones' and variants' names (adgnn/model.h): parsed once where a setting enters (the
// command line, a YAML config), written where one leaves (configuration lines, YAML, JSON).
#include <ostream>
#include <string>

#include "adgnn/loaders.h"
#include "adgnn/model.h"

namespace adgnn {

namespace {

constexpr Backbone kBackbones[] = {Backbone::Gcn,    Backbone::Gat,   Backbone::Sage,
                                   Backbone::MixHop, Backbone::GatV2, Backbone::DirGnn};
constexpr Variant kVariants[] = {Variant::Plain, Variant::Ad, Variant::AdFast, Variant::AdSharp};

}  // namespace

const char* to_string(Backbone b) {
  switch (b) {
    case Backbone::Gcn: return "gcn";
    case Backbone::Gat: return "gat";
    case Backbone::Sage: return "sage";
    case Backbone::MixHop: return "mixhop";
    case Backbone::GatV2: return "gatv2";
    case Backbone::DirGnn: return "dirgnn";
  }
  return "?";
}

const char* to_string(Variant v) {
  switch (v) {
    case Variant::Plain: return "plain";
    case Variant::Ad: return "ad";
    case Variant::AdFast: return "ad_fast";
    case Variant::AdSharp: return "ad_sharp";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, Backbone b) { return os << to_string(b); }
std::ostream& operator<<(std::ostream& os, Variant v) { return os << to_string(v); }

Backbone parse_backbone(const std::string& name, const std::string& what) {
  for (Backbone b : kBackbones)
    if (name == to_string(b)) return b;
  throw InputError(what + " " + name + ": unknown backbone (gcn, gat, sage, mixhop, gatv2, dirgnn)");
}

Variant parse_variant(const std::string& name, const std::string& what) {
  for (Variant v : kVariants)
    if (name == to_string(v)) return v;
  throw InputError(what + " " + name + ": unknown variant (plain, ad, ad_fast, ad_sharp)");
}

std::string model_name(Backbone b, Variant v) {
  const char* base = "";
  switch (b) {
    case Backbone::Gcn: base = "GCN"; break;
    case Backbone::Gat: base = "GAT"; break;
    case Backbone::Sage: base = "SAGE"; break;
    case Backbone::MixHop: base = "MixHop"; break;
    case Backbone::GatV2: base = "GATv2"; break;
    case Backbone::DirGnn: base = "DirGNN"; break;
  }
  switch (v) {
    case Variant::Plain: return base;
    case Variant::Ad: return std::string("AD-") + base;
    case Variant::AdFast: return std::string("AD-") + base + "_fast";
    case Variant::AdSharp: return std::string("AD-") + base + "#";
  }
  return base;
}

}  // namespace adgnn
