// Helpers shared by the partition library's sources (not installed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adgnn/partition.h"

namespace adgnn::detail {

// Each node's position in the ascending (score, node id) order.
std::vector<int32_t> benefit_rank(const std::vector<double>& score);
// Each node's bin in [0, strata) from its rank (benefit_strata's spacing rules; throws InputError
// naming --strata / --strata-spacing).
std::vector<int32_t> bins_from_rank(const std::vector<int32_t>& rank, int32_t strata,
                                    const std::string& spacing);
// Fills p.part_top from each node's benefit_rank.
void fill_top(Partition& p, const std::vector<int32_t>& rank);
// Fills p.strata, p.part_strata and p.stratum_imbalance from each node's bin in [0, strata).
void fill_strata(Partition& p, const std::vector<int32_t>& bin, int32_t strata);

// The pieces of write_partition (folder.cpp), shared with partition_distributed:
// creates `dir` and invalidates it (removes manifest.json and part files numbered >= parts);
void prepare_partition_folder(const std::string& dir, int32_t parts);
// writes dir/part-<gp.rank>.h5 (atomically), releasing gp's arrays on the way, and returns the
// part's send rows;
int64_t write_part_file(const std::string& dir, GraphPart& gp);
// writes dir/manifest.json (atomically) from the graph identity in `id` (halo_rows included)
// and p's statistics (p.owner unused).
void write_manifest(const std::string& dir, const PartitionManifest& id, const Partition& p,
                    const std::string& method_desc, const PartitionOptions* opt,
                    const std::vector<int64_t>& send_rows);

}  // namespace adgnn::detail
