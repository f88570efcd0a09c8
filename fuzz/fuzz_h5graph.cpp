// libFuzzer: reading our HDF5 format from arbitrary bytes fails cleanly (HDF5 itself parses the
// container; this checks our reader's handling of whatever HDF5 returns).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/adgnn-fuzz-h5-" + std::to_string(::getpid()) + ".h5";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    adgnn::read_graph_h5(path, 1);
  } catch (const adgnn::InputError&) {
  }
  return 0;
}
