// `adgnn partition` (being written).
#include "commands.h"

namespace adgnn::cli {

void add_partition_commands(CLI::App&, std::function<int()>&) {}

}  // namespace adgnn::cli
