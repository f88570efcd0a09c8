// libFuzzer: NPY parsing and every conversion must either succeed or throw InputError.
#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto a = adgnn::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (a.size() < (1 << 20)) {
      try { a.as_double("fuzz"); } catch (const adgnn::InputError&) {}
      try { a.as_int64("fuzz"); } catch (const adgnn::InputError&) {}
    }
  } catch (const adgnn::InputError&) {
  }
  return 0;
}
