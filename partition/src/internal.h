// Helpers shared by the partition library's sources (not installed).
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "adgnn/comm.h"
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

// send[p] goes to process p; returns what every process sent here, by sender.
template <class T>
std::vector<std::vector<T>> all_to_all(Communicator& c, const std::vector<std::vector<T>>& send) {
  const int P = c.size();
  std::vector<int64_t> counts(static_cast<size_t>(P)), recv_counts(static_cast<size_t>(P));
  for (int p = 0; p < P; ++p) counts[p] = static_cast<int64_t>(send[p].size());
  const std::vector<int64_t> ones(static_cast<size_t>(P), 1);
  c.exchange(counts.data(), ones, recv_counts.data(), ones, sizeof(int64_t));
  std::vector<T> flat;
  flat.reserve(static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0})));
  for (const auto& s : send) flat.insert(flat.end(), s.begin(), s.end());
  std::vector<T> got(static_cast<size_t>(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})));
  c.exchange(flat.data(), counts, got.data(), recv_counts, sizeof(T));
  std::vector<std::vector<T>> out(static_cast<size_t>(P));
  size_t pos = 0;
  for (int p = 0; p < P; ++p) {
    out[p].assign(got.begin() + pos, got.begin() + pos + recv_counts[p]);
    pos += static_cast<size_t>(recv_counts[p]);
  }
  return out;
}

// Every process's `mine`, by process.
template <class T>
std::vector<std::vector<T>> all_gather(Communicator& c, const std::vector<T>& mine) {
  return all_to_all(c, std::vector<std::vector<T>>(static_cast<size_t>(c.size()), mine));
}

// The owners of this process's rows [bounds[rank], bounds[rank + 1]) by coarse-metis
// (coarse_metis.cpp): `sym` holds those rows of the symmetric graph (sorted, no self-loops).
// Collective; reports the cluster graph's size in rep.
std::vector<int32_t> coarse_metis_owners(Communicator& comm, const std::vector<std::vector<int32_t>>& sym,
                                         const std::vector<int64_t>& bounds, int32_t parts,
                                         const DistributedPartitionOptions& opt,
                                         DistributedPartitionReport& rep);

}  // namespace adgnn::detail
