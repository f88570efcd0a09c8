// `adgnn bench` (being written).
#include "commands.h"

namespace adgnn::cli {

void add_bench_commands(CLI::App&, std::function<int()>&) {}

}  // namespace adgnn::cli
