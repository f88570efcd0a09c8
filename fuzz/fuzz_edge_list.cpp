// libFuzzer: edge-list text (Geom-GCN tab-separated and OGB comma-separated) never crashes.
#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (char sep : {'\t', ','}) {
    try {
      adgnn::parse_edge_list(text, "fuzz", 64, sep == '\t', sep);
    } catch (const adgnn::InputError&) {
    }
  }
  return 0;
}
