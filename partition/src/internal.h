// Helpers shared by the partition library's sources (not installed).
#pragma once

#include <cstdint>
#include <vector>

#include "adgnn/partition.h"

namespace adgnn::detail {

// Fills p.strata, p.part_strata and p.stratum_imbalance from each node's bin in [0, strata).
void fill_strata(Partition& p, const std::vector<int32_t>& bin, int32_t strata);

}  // namespace adgnn::detail
