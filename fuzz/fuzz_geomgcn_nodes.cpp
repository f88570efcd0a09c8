// libFuzzer: the Geom-GCN node/feature/label file (dense values or index lists) never crashes.
#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<int64_t> labels;
  try {
    const auto x = adgnn::parse_geomgcn_nodes(std::string(reinterpret_cast<const char*>(data), size),
                                              "fuzz", labels);
    (void)x;
  } catch (const adgnn::InputError&) {
  }
  return 0;
}
