// adgnn/partition: splits a graph's nodes into parts for distributed training. METIS k-way on the
// symmetric adjacency (edge cut or communication volume, optionally multi-constraint), METIS with
// one balance constraint per quantile of the fast depth-benefit score ("stratified"), or the two
// baselines "random" and "contiguous"; one rank's share of the graph (GraphPart) and the partition
// folder that stores every rank's share (docs/partition.md). Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "adgnn/loaders.h"

namespace adgnn {

class GraphFileReader;  // adgnn/graph_file.h
class Communicator;     // adgnn/comm.h

struct PartitionOptions {
  // "metis", "stratified", "random", "contiguous"; "ptscotch" is partition_distributed's only.
  std::string method = "metis";
  std::string objective = "cut";  // "cut" (edge cut) or "vol" (communication volume); METIS only
  uint64_t seed = 0;
  // Extra METIS balance constraints (ncon = 1 + balance_train + balance_edges; "stratified":
  // strata + balance_train + balance_edges): the number of training nodes (needs train_mask) and
  // the degree sum per part. "random" honours balance_train
  // too (training nodes are dealt first); "contiguous" ignores both.
  bool balance_train = false;
  bool balance_edges = false;
  // METIS's load-imbalance tolerance for every constraint: a part may weigh up to `imbalance`
  // times the mean (METIS_OPTION_UFACTOR = 1000 (imbalance - 1)); in (1, 2], 0 for METIS's own
  // default (1.03 for k-way). A tighter one evens the ranks' work, which a distributed step waits
  // for at every exchange, at the price of a larger cut. "metis" and "stratified" only.
  double imbalance = 0;
  // "stratified": the nodes are split into `strata` bins by their fast depth-benefit score
  // (benefit_strata) and METIS balances every bin across the parts (one constraint per bin,
  // replacing the node-count constraint, which their sum implies), so that every layer's active
  // set, which is the top of that order, is shared evenly. Also the bins that partition_graph
  // reports part_strata for (every method).
  int32_t strata = 4;
  // "equal": equal-count bins (quantiles); "log": decades from the top (strata 4: the top 0.1%,
  // the next 0.9%, the next 9%, the other 90%), the sizes of the deeper layers' active sets
  // under the paper's linear normalisation.
  std::string strata_spacing = "equal";
};

struct Partition {
  int32_t parts = 0;
  std::vector<int32_t> owner;  // per node, in [0, parts)
  int64_t edge_cut = 0;        // undirected edges (of g.symmetric()) whose endpoints differ in owner
  std::vector<int64_t> part_nodes;  // nodes per part
  std::vector<int64_t> part_edges;  // edge endpoints per part: sum of symmetric degrees
  double node_imbalance = 1.0;      // max / mean of part_nodes
  double edge_imbalance = 1.0;      // max / mean of part_edges (1 when the graph has no edges)
  std::string method;               // the method that chose the owners ("given" for partition_stats)
  // Training nodes per part and their imbalance: filled when partition_graph got a train_mask.
  std::vector<int64_t> part_train;
  double train_imbalance = 1.0;
  // Nodes per part in each benefit stratum, row-major [part][stratum] (add_strata_stats; every
  // partition_graph result has them, with opt.strata bins, capped at the node count), and
  // max / mean per stratum.
  int32_t strata = 0;
  std::string strata_spacing;  // "equal" or "log" (see PartitionOptions)
  std::vector<int64_t> part_strata;
  std::vector<double> stratum_imbalance;  // [strata]
  // Nodes per part among the highest-score fractions kTopFractions of all nodes (ceil(f n) each),
  // row-major [part][fraction]: under the paper's linear normalisation, layers >= 2 are active
  // for about 0.2-3% of the nodes, so these say how those layers' work is spread.
  std::vector<int64_t> part_top;
};

// The fractions that Partition::part_top counts: the top 10%, 1% and 0.1% of the score.
inline constexpr double kTopFractions[] = {0.1, 0.01, 0.001};

// Partitions g's nodes into `parts`. train_mask (one byte per node, non-zero = training node) is
// needed by balance_train (and then part_train is filled). Bad arguments, and a METIS failure,
// throw InputError with a one-line message naming the flag: --parts, --partition, --objective,
// --balance-train, --strata, --strata-spacing ("stratified" needs at least 2 nodes per part in
// every stratum). For methods other than stratified, a log spacing that does not fit the graph
// falls back to equal bins in the report.
// Deterministic for a given (graph, parts, options).
Partition partition_graph(const Graph& g, int32_t parts, const PartitionOptions& opt = {},
                          const std::vector<uint8_t>* train_mask = nullptr);

// The statistics of a given assignment (owner.size() == g.num_nodes, every owner in [0, parts)).
Partition partition_stats(const Graph& g, int32_t parts, std::vector<int32_t> owner);

// The fast depth-benefit score of every node, up to the positive factor t_max: what AD-GNN_fast
// computes (adgnn/src/model.cpp, Impl::depth_benefit) before normalising, on g.symmetric():
// d+_v = d_v * sum_{u in N(v)} d_u / max_{(i,j) edge} d_i d_j, alpha_v = (1 + 2 d+_v - d_v) /
// (d_v + 1), score_v = 2 log max(|alpha_v|, 1e-12) + log(d_v + 1). The model's eps_tilde is
// increasing in it, so a node active at layer t outranks every node that is not.
std::vector<double> fast_depth_benefit(const Graph& g);
std::vector<double> fast_depth_benefit(const Csr& sym);
// Bin of every node in [0, strata): nodes sorted by (score, node id) and cut into `strata` runs,
// of equal size (spacing "equal": sizes differ by at most one) or by decades from the top
// ("log": bin k >= 1 = the top ceil(n / 10^k) minus the top ceil(n / 10^(k+1))). Bin strata - 1
// holds the highest scores. Throws InputError naming --strata when a bin would be empty.
std::vector<int32_t> benefit_strata(const std::vector<double>& score, int32_t strata,
                                    const std::string& spacing = "equal");
// Fills p.strata, p.part_strata, p.stratum_imbalance and p.part_top for `strata` bins of g's
// score (any method: this is how metis and stratified are compared). --strata must be in
// [1, nodes].
void add_strata_stats(const Graph& g, Partition& p, int32_t strata,
                      const std::string& spacing = "equal");

// A node order for memory locality (permute_nodes(g, order) applies it): "metis" splits g into
// ceil(N / block_nodes) METIS parts (edge cut) and numbers each part's nodes consecutively
// (ascending old id within a part), so that a row's neighbours sit mostly in its own block of
// rows, and a gather over them stays in cache (a block of 4,096 rows of 128 floats is 2 MiB);
// "benefit": by fast_depth_benefit, highest first (ties by old id), so that AD-GNN_fast's active
// and computed rows at every layer are a prefix of the rows (block_nodes unused; the issue's
// ordering by depth benefit, measured in docs/performance.md);
// "random": a seeded random order (the control); "identity". Bad method or block_nodes < 1
// throw InputError naming --method / --block. Deterministic for (graph, method, block, seed).
std::vector<int64_t> locality_order(const Graph& g, const std::string& method, int64_t block_nodes,
                                    uint64_t seed = 0);
// The share of g's symmetric entries (v, u) whose two ends lie in the same block of block_nodes
// consecutive ids: what locality_order raises (1 / blocks for a random order).
double same_block_fraction(const Graph& g, int64_t block_nodes);

// ---- one rank's share of a partitioned graph ------------------------------------------------------

// What rank `rank` of `parts` needs to train on its nodes: its owned nodes, the halo (neighbours
// of owned nodes, in the symmetric graph, owned by other ranks), the local CSRs over owned rows
// with columns indexing "source rows" (owned rows first, then halo rows), whole-graph degrees of
// every source row (normalisations agree with the one-process run), and the send lists of the
// halo exchange. Local source row i has global id global_id[i].
struct GraphPart {
  int32_t rank = 0, parts = 1;
  std::string graph_hash;    // graph_fingerprint() of the whole graph
  std::string graph_name, graph_source_sha256;  // the whole graph's name and Graph::source_sha256
  // Names the assignment of owners (a hash of the graph hash and every node's owner): every part
  // of one partition carries the same id, so parts of two partitions of a graph never mix.
  std::string partition_id;
  std::string method;        // how the owners were chosen (metis, random, ...)
  int64_t global_nodes = 0, num_classes = 0, num_owned = 0;
  std::vector<int64_t> global_id;          // [num_owned + halo]: owned ascending, then halo
  std::vector<int32_t> halo_owner;         // [halo]: owning rank; halo rows sorted by (owner, global id)
  std::vector<int64_t> halo_owner_index;   // [halo]: the row's index among its owner's owned rows
  std::vector<int64_t> recv_offset;        // [parts + 1]: halo rows from rank p are
                                           // [num_owned + recv_offset[p], num_owned + recv_offset[p+1])
  // send[p]: owned rows (local index < num_owned) that rank p holds as halo, in p's halo order
  // (ascending global id); empty for p == rank.
  std::vector<std::vector<int64_t>> send;
  // Rows: owned nodes; columns: local source rows. Same entries as the whole graph's rows:
  Csr sym;  // Graph::symmetric() restricted to owned rows (sorted by global id within a row)
  Csr out;  // stored direction, self-loops and duplicates dropped: row v lists u with v -> u
  Csr in;   // its transpose: row v lists u with u -> v
  // Per local source row, in the whole graph: symmetric degree, in- and out-degree of the
  // directed simple graph (as `out` / `in` count them).
  std::vector<int64_t> degree, in_degree, out_degree;
  double max_degree_product = 1;  // max over symmetric edges (u, v) of degree(u) * degree(v); 1 if no edges
  Features features;              // [num_owned + halo] rows
  std::vector<int64_t> labels;    // [num_owned + halo] (empty: a graph without labels)
  // The graph's stored split families, masks [count][num_owned + halo] over the source rows
  // (the depth mechanism's regulariser reads the training mask of halo rows too).
  std::vector<SplitSet> splits;
  int64_t num_halo() const { return int64_t(global_id.size()) - num_owned; }
};

// Rank `rank`'s share of g under `p` (p.owner.size() == g.num_nodes). P = 1 gives the whole
// graph with an empty halo. O(nodes + edges); computes the whole graph's views (symmetric,
// directed, transposed) and fingerprint on every call: PartBuilder shares them between ranks.
GraphPart build_part(const Graph& g, const Partition& p, int32_t rank);

// Every rank's share of one graph and partition, with the whole-graph views and the fingerprint
// computed once (about three copies of the adjacency). `g` and `p` must outlive the builder.
// With `rows` (the file g was read from by GraphFileReader::read_structure, so g holds no
// features), each part's feature rows are read from the file, and the graph hash is the one the
// file stores (InputError when it has none); `rows` must outlive the builder too.
class PartBuilder {
 public:
  PartBuilder(const Graph& g, const Partition& p, const GraphFileReader* rows = nullptr);
  ~PartBuilder();
  PartBuilder(const PartBuilder&) = delete;
  PartBuilder& operator=(const PartBuilder&) = delete;
  GraphPart build(int32_t rank) const;
  const std::string& graph_hash() const;

 private:
  struct Views;
  const Graph& g_;
  const Partition& p_;
  const GraphFileReader* rows_;
  std::unique_ptr<Views> v_;
};

// ---- partition folder (docs/partition.md) ---------------------------------------------------------

// Writes dir/part-<r>.h5 for every rank r (every GraphPart array) and dir/manifest.json (graph
// hash and name, parts, method, objective, seed, imbalance tolerance when set, edge cut, balance
// per constraint, halo rows per part), each atomically; creates dir. method_desc is recorded as the manifest's "method".
// `opt` (when given) records the options that made p. `rows`: as for PartBuilder (a graph read
// without its features; parts are built and written one at a time, so memory holds the
// structure and one part).
void write_partition(const Graph& g, const Partition& p, const std::string& dir,
                     const std::string& method_desc, const PartitionOptions* opt = nullptr,
                     const GraphFileReader* rows = nullptr);

// The id of an assignment of owners (GraphPart::partition_id): the first 32 hex digits of
// SHA-256 over the graph hash, the part count and a digest of the owners, the wrapping sum over
// nodes v of mix64(key(v, owner(v))). A sum, so processes that each hold a slice of the owners
// add their slices' digests and get the id one process gets from all of them.
uint64_t owner_digest(const int32_t* owner, int64_t first_node, int64_t count);
std::string partition_id(const std::string& graph_hash, int32_t parts, uint64_t digest);

// ---- partitioning across processes (docs/partition.md) --------------------------------------------

struct DistributedPartitionOptions {
  // "ptscotch": PT-Scotch's parallel multilevel k-way (about 140 bytes per stored edge across
  // the processes). "coarse-metis": clusters of each process's rows, METIS on the cluster graph
  // on process 0, refinement (a fraction of the memory and time; clusters see only the edges
  // among one process's rows: coarse_metis.cpp).
  std::string method = "ptscotch";
  uint64_t seed = 0;
  // Load-imbalance tolerance: parts may hold up to `imbalance` times the mean number of nodes;
  // in (1, 2].
  double imbalance = 1.03;
  // coarse-metis: about how many clusters METIS partitions on process 0 (0: 1024 per part).
  int64_t coarse_nodes = 0;
};

// What partition_distributed reports (the same on every process).
struct DistributedPartitionReport {
  Partition stats;              // owner empty: no process holds every owner
  std::vector<int64_t> halo_rows, send_rows;  // per part
  double read_s = 0, partition_s = 0, write_s = 0;
  int64_t clusters = 0, cluster_edges = 0;  // coarse-metis: the graph METIS partitioned
  std::vector<int64_t> peak_rss_bytes;  // per process: its peak resident memory at the end
};

// Partitions the graph in our HDF5 file `graph_path` into `parts` parts across the processes of
// `comm` (collective; any parts >= 1 on any number of processes) and writes the partition folder
// `dir` (the format write_partition writes, readable by read_part). Process i reads rows
// [i N / P, (i + 1) N / P) of the adjacency; the symmetric graph is built by exchanging edges;
// PT-Scotch (SCOTCH_dgraphPart over MPI_COMM_WORLD) assigns the owners; the rows of each part go
// to the process that writes it (part q: process q mod P), which reads its rows' features,
// labels and split masks from the file. No process holds the whole graph, nor an N-sized array
// beyond one split mask row while it is read. Errors on any process are raised on every process
// (InputError for bad input, naming the file or flag).
DistributedPartitionReport partition_distributed(Communicator& comm, const std::string& graph_path,
                                                 int32_t parts, const std::string& dir,
                                                 const DistributedPartitionOptions& opt = {});

// What a partition folder's manifest says about the folder and its graph: enough to check a
// run against it and to size the model without reading the graph.
struct PartitionManifest {
  std::string dir;
  std::string graph_hash, graph_name, graph_source_sha256, partition_id, method;
  int64_t parts = 0, nodes = 0, stored_edges = 0, features = 0, classes = 0;
  std::vector<std::pair<std::string, int64_t>> split_families;  // name, number of splits
  std::vector<int64_t> part_nodes, halo_rows;                   // per part
};
// Reads dir/manifest.json; a missing or corrupt manifest, or one of another format version,
// throws InputError naming "--partition-dir <dir>".
PartitionManifest read_partition_manifest(const std::string& dir);

// Rank `rank`'s share from a partition folder, reading only the manifest and part-<rank>.h5.
// A folder made for another graph (graph_hash differs; an empty expected hash skips this check,
// for a rank that never loads the whole graph) or for another number of ranks, and a missing or
// corrupt file, and a part of another partition of the same graph (its partition_id differs
// from the manifest's), throw InputError naming "--partition-dir <dir>".
GraphPart read_part(const std::string& dir, int32_t rank, int32_t expected_parts,
                    const std::string& expected_graph_hash);

}  // namespace adgnn
