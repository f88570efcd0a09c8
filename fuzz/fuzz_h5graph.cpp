// libFuzzer: reading our HDF5 format from arbitrary bytes fails cleanly (HDF5 itself parses the
// container; this checks our reader's handling of whatever HDF5 returns). HDF5 reads files only,
// so each input goes to a scratch file under $TMPDIR (scripts/fuzz.sh points it into build-fuzz/),
// removed after the read.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "adgnn/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() /
       ("adgnn-fuzz-h5-" + std::to_string(::getpid()) + ".h5")).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    adgnn::read_graph_h5(path, 1);
  } catch (const adgnn::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
