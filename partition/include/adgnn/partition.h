// adgnn/partition: splits a graph's nodes into parts for distributed training. METIS k-way on the
// symmetric adjacency (edge cut or communication volume, optionally multi-constraint), or the two
// baselines "random" and "contiguous". Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adgnn/loaders.h"

namespace adgnn {

struct PartitionOptions {
  std::string method = "metis";   // "metis", "random", "contiguous"
  std::string objective = "cut";  // "cut" (edge cut) or "vol" (communication volume); METIS only
  uint64_t seed = 0;
  // Extra METIS balance constraints (ncon = 1 + balance_train + balance_edges): the number of
  // training nodes (needs train_mask) and the degree sum per part. "random" honours balance_train
  // too (training nodes are dealt first); "contiguous" ignores both.
  bool balance_train = false;
  bool balance_edges = false;
};

struct Partition {
  int32_t parts = 0;
  std::vector<int32_t> owner;  // per node, in [0, parts)
  int64_t edge_cut = 0;        // undirected edges (of g.symmetric()) whose endpoints differ in owner
  std::vector<int64_t> part_nodes;  // nodes per part
  std::vector<int64_t> part_edges;  // edge endpoints per part: sum of symmetric degrees
  double node_imbalance = 1.0;      // max / mean of part_nodes
  double edge_imbalance = 1.0;      // max / mean of part_edges (1 when the graph has no edges)
};

// Partitions g's nodes into `parts`. train_mask (one byte per node, non-zero = training node) is
// needed by balance_train. Bad arguments, and a METIS failure, throw InputError with a one-line
// message naming the flag: --parts, --partition, --objective, --balance-train.
// Deterministic for a given (graph, parts, options).
Partition partition_graph(const Graph& g, int32_t parts, const PartitionOptions& opt = {},
                          const std::vector<uint8_t>* train_mask = nullptr);

// The statistics of a given assignment (owner.size() == g.num_nodes, every owner in [0, parts)).
Partition partition_stats(const Graph& g, int32_t parts, std::vector<int32_t> owner);

}  // namespace adgnn
