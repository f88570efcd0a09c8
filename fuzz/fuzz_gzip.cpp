// libFuzzer: gzip decoding (OGB csv.gz) never crashes.
#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    adgnn::gunzip(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const adgnn::InputError&) {
  }
  return 0;
}
