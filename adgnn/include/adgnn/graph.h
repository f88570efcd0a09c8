// adgnn/graph: graphs as tensors. GraphTensors holds a loaded graph on a device; a MessageGraph
// is what the layers read (one process: every node; a rank: its owned rows and their halo), with
// the edge normalisations every backbone uses.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "adgnn/transport.h"

namespace adgnn {

struct GraphTensors {
  int64_t num_nodes = 0, num_features = 0, num_classes = 0;
  at::Tensor rowptr, col;          // symmetric, self-loop-free, deduplicated (int64 / int32)
  at::Tensor out_rowptr, out_col;  // stored direction u -> v in row u, loops and duplicates dropped
  at::Tensor in_rowptr, in_col;    // its transpose: row v lists the u with u -> v
  at::Tensor degree;               // float32 [N], degree in the symmetric graph
  at::Tensor x;                    // float32 [N, F], dense
  at::Tensor y;                    // int64 [N]
};

GraphTensors to_tensors(const Graph& g, c10::Device device);

// Where a layer's neighbour rows come from. Destination rows are the first num_dst source rows
// (one process: every node; a rank: its owned nodes, followed by its halo rows). Degrees are
// those of the whole graph, so normalisations agree with the one-process run.
struct MessageGraph {
  int64_t num_dst = 0, num_src = 0;
  at::Tensor rowptr, col;            // symmetric, no self-loops; rows: dst, columns: src
  at::Tensor out_rowptr, out_col;    // stored direction: row v lists u with v -> u
  at::Tensor in_rowptr, in_col;      // row v lists u with u -> v
  at::Tensor degree;                 // float [num_src], symmetric degree
  at::Tensor in_degree, out_degree;  // float [num_src], of the directed simple graph
  at::Tensor gcn_weight;             // per symmetric entry (v, u): 1 / sqrt((d_v + 1)(d_u + 1))
  at::Tensor gcn_self_weight;        // per source row v: 1 / (d_v + 1), GCN's self-loop weight
  at::Tensor in_weight, out_weight;  // DirGNN's GCN normalisation per in- / out-CSR entry
  at::Tensor global_id;              // int64 [num_src], node ids for partition-invariant dropout
  at::Tensor max_degree_product;     // float scalar: max over edges of d_u d_v (global)

  // A rank of a distributed run (transport set): halo rows num_dst.. are owned by other ranks.
  std::shared_ptr<RankTransport> transport;
  std::vector<at::Tensor> send_rows;  // per peer: owned rows (int64) it holds as halo, in its halo order
  std::vector<int64_t> recv_offset;   // per peer + 1: its rows are halo rows [recv_offset[p], recv_offset[p+1])
  at::Tensor halo_owner;              // int64 [num_src - num_dst]
  // The symmetric CSR entries with a halo column: owned row and halo index (source row - num_dst).
  at::Tensor boundary_row, boundary_halo;
  int64_t num_halo() const { return num_src - num_dst; }
  bool distributed() const { return transport != nullptr; }
};
// Edge normalisations in `dtype` (the model's precision), computed in float64.
MessageGraph message_graph(const GraphTensors& t, c10::ScalarType dtype = c10::ScalarType::Float);

// A rank's share of a partitioned graph as tensors on `device`: the message graph (without its
// transport, which the trainer sets), the input rows x [num_src, F] (float32) and the owned
// nodes' labels [num_dst].
struct PartTensors {
  MessageGraph graph;
  at::Tensor x, y;
};
// x and the edge weights in dtype (a model's activation_type).
PartTensors part_tensors(const GraphPart& part, c10::Device device,
                         c10::ScalarType dtype = c10::ScalarType::Float);

}  // namespace adgnn
