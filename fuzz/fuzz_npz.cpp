// libFuzzer: ZIP/NPZ parsing (central directory, ZIP64, stored/deflate, CRC) never crashes.
#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    adgnn::parse_npz(std::string(reinterpret_cast<const char*>(data), size), "fuzz", true);
  } catch (const adgnn::InputError&) {
  }
  return 0;
}
