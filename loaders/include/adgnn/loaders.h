// adgnn/loaders: graphs in memory, the readers for every upstream benchmark format, our HDF5
// graph format, the contextual-SBM generator and graph statistics. Torch-free on purpose: the
// loaders build in seconds and are shared by the tools that never touch a tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "adgnn/process_group.h"

namespace adgnn {

// Bad input (a file, a flag, a value). The message is one line, "<where>: <fault>"; the command
// line prints it and exits with code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& msg) : std::runtime_error(msg) {}
};

// Compressed sparse rows. `values` empty means every stored entry is 1 (adjacency).
struct Csr {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int64_t> indptr{0};
  std::vector<int32_t> indices;
  std::vector<float> values;

  int64_t nnz() const { return static_cast<int64_t>(indices.size()); }
  int64_t degree(int64_t r) const { return indptr[r + 1] - indptr[r]; }
};

// The transpose of a (rows sorted, since rows are visited in order).
Csr transpose_csr(const Csr& a);

// Node features: dense row-major float32, or CSR; readers keep what the file stores.
struct Features {
  int64_t rows = 0;
  int64_t cols = 0;
  bool sparse = false;
  std::vector<float> dense;  // rows * cols when !sparse
  Csr csr;                   // when sparse

  int64_t nnz() const;
  std::vector<float> to_dense() const;
};

// A family of train/val/test splits ("geom-gcn": 10 splits, "platonov": 10, "public": 1, ...).
// Masks are row-major [split][node], one byte per entry.
struct SplitSet {
  std::string name;
  int64_t count = 0;
  std::vector<uint8_t> train, val, test;
};

// The label of a node without one (ogbn-papers100M labels 1.4% of its nodes): such a node is in
// no split, so no loss, accuracy or statistic counts it.
inline constexpr int64_t kUnlabelled = -1;
// The most classes a graph may have (the model's output layer is hidden x classes).
inline constexpr int64_t kMaxClasses = 65536;

struct Graph {
  std::string name;
  std::string source;         // file or folder it was read from, or the generator's parameters
  std::string source_sha256;  // of the source bytes (several files: of their hashes in name order)
  bool directed = false;      // whether the stored edge direction carries meaning
  int64_t num_nodes = 0;
  Csr adj;  // the stored directed edges, exactly as the source has them (self-loops, duplicates)
  Features features;
  std::vector<int64_t> labels;  // 0..num_classes-1, or kUnlabelled (in no split, never counted)
  int64_t num_classes = 0;
  std::vector<SplitSet> splits;
  // Node v's id in the graph this one was renumbered from (permute_nodes; empty: never
  // renumbered), so that results over the nodes can be mapped back.
  std::vector<int64_t> original_id;

  // Symmetric, self-loop-free, deduplicated adjacency with sorted rows: what every backbone but
  // DirGNN aggregates over.
  Csr symmetric() const;
  // The stored edges with self-loops and duplicate entries dropped (rows sorted): DirGNN's graph.
  Csr directed_simple() const;
  const SplitSet* find_splits(const std::string& name) const;
  // Checks every invariant (sizes, index and label ranges, finite features); throws InputError
  // naming `where`. Without `features`, everything but the feature values (a graph whose
  // features come from a DenseRowSource).
  void validate(const std::string& where, bool features = true) const;
};

// ---- upstream formats --------------------------------------------------------------------------

// One NumPy array as stored: raw little-endian bytes in C order (Fortran input is transposed).
struct NpyArray {
  std::string descr;  // e.g. "<f4"
  char kind = 0;      // 'f', 'i', 'u', 'b', 'U', 'O'
  int itemsize = 0;
  std::vector<int64_t> shape;
  std::string data;

  int64_t size() const;
  // Converting reads; throw InputError naming `where` when the dtype cannot convert exactly.
  std::vector<double> as_double(const std::string& where) const;
  std::vector<float> as_float(const std::string& where) const;
  std::vector<int64_t> as_int64(const std::string& where) const;
};

// Parsers over bytes in memory (the fuzz targets call these) and their file wrappers.
NpyArray parse_npy(const std::string& bytes, const std::string& where);
// Every member of a .npz; `<U` and `|O` members are skipped unless keep_all.
std::map<std::string, NpyArray> parse_npz(const std::string& bytes, const std::string& where,
                                          bool keep_all = false);
std::map<std::string, NpyArray> read_npz(const std::string& path);
std::string read_file(const std::string& path);
std::string gunzip(const std::string& bytes, const std::string& where);
std::string sha256_hex(const std::string& bytes);

// Readers of whole datasets. Each takes the dataset's file or folder.
Graph load_csr_npz(const std::string& path);      // CitationFull / Amazon / Planetoid-converted
Graph load_platonov_npz(const std::string& path);  // chameleon_filtered.npz, squirrel_filtered.npz
Graph load_geomgcn(const std::string& dir);        // out1_*.txt + <name>_split_0.6_0.2_<i>.npz
Graph load_ogb(const std::string& dir);            // OGB node-property raw/ + split/ layout
// Text parsers behind load_geomgcn / load_ogb, exposed for tests and fuzzing.
Csr parse_edge_list(const std::string& text, const std::string& where, int64_t num_nodes,
                    bool header, char sep);
// Returns features and fills labels for the Geom-GCN node file.
Features parse_geomgcn_nodes(const std::string& text, const std::string& where,
                             std::vector<int64_t>& labels);

// Finds a dataset by name (under data_dir, else $ADGNN_DATA) or by path, detects its format and
// loads it. An empty data_dir means $ADGNN_DATA.
Graph load_dataset(const std::string& name_or_path, const std::string& data_dir = "");
std::string resolve_dataset(const std::string& name_or_path, const std::string& data_dir = "");
std::vector<std::string> known_datasets();

// The same graph with its nodes renumbered: new node i is old node order[i] (order must be a
// permutation of 0..N-1, else InputError naming `where`). Edges, features, labels and splits
// follow their nodes; every row keeps its entries' order. original_id composes, so it always
// refers to the first graph.
Graph permute_nodes(const Graph& g, const std::vector<int64_t>& order, const std::string& where = "order");

// A stable hash of the graph's training problem: SHA-256 over the node count, the stored
// adjacency (indptr, indices), the features (shape and values; sparse features without values
// hash as all ones), labels, class count and split families in name order; not the name, source
// or original ids, so a converted copy of a graph hashes alike. What a partition folder records,
// so that it is never used with another graph; our HDF5 files store it (attribute graph_hash).
// Same value on every little-endian machine.
std::string graph_fingerprint(const Graph& g);

// Dense feature rows made on demand: writes rows [first, first + count) of an N x F float32
// matrix, row-major, to out. How the generator hands over features too large to hold at once;
// thread-safe (the HDF5 writer fills chunks in parallel).
using DenseRowSource = std::function<void(int64_t first, int64_t count, float* out)>;

// ---- our HDF5 graph format (docs/hdf5-format.md) ------------------------------------------------

struct H5WriteOptions {
  int deflate_level = 1;  // 0 = no compression
  int threads = 0;        // chunk compression threads; 0 = hardware concurrency
};
void write_graph_h5(const Graph& g, const std::string& path, const H5WriteOptions& opt = {});
// The same file written by the processes of `group` together, each holding rows [first_row,
// first_row + share.adj.rows) of the adjacency (indptr from 0, global column ids; the ranges in
// rank order) and making their dense features with `rows`; `share` holds the whole labels and
// split masks (features.rows = N, cols = F, dense empty). The processes write one after another
// (each on opt.threads threads: the others wait); process 0 then fingerprints the structure the
// file holds, read back chunk by chunk, and the features `rows` makes, and renames the file into
// place. A failure on any process is an InputError on every process, and no file is left behind.
void write_graph_h5(const Graph& share, int64_t first_row, const DenseRowSource& rows,
                    const std::string& path, ProcessGroup& group, const H5WriteOptions& opt = {});
Graph read_graph_h5(const std::string& path, int threads = 0);
// The graph_fingerprint stored in one of our graph files (attributes only, nothing else is
// read); empty when `path` is not our HDF5 graph format or predates the attribute.
std::string stored_graph_hash(const std::string& path);

// Named arrays in an HDF5 file (checkpoints, predictions): each array is raw little-endian
// bytes of dtype "f32", "f64", "i64" or "u8", plus string attributes on the root. Written
// atomically (temporary file + rename).
struct H5Array {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
void write_arrays_h5(const std::string& path, const std::map<std::string, H5Array>& arrays,
                     const std::map<std::string, std::string>& attrs);
std::map<std::string, H5Array> read_arrays_h5(const std::string& path,
                                              std::map<std::string, std::string>* attrs);

// ---- synthetic graphs: contextual stochastic block model ---------------------------------------

struct CsbmParams {
  std::string name = "csbm";
  int64_t nodes = 10000;
  int64_t classes = 5;
  double avg_degree = 10.0;        // 2 * undirected edges / nodes
  int64_t undirected_edges = -1;   // overrides avg_degree when >= 0
  std::string degree_dist = "constant";  // "constant" or "powerlaw"
  double powerlaw_exponent = 2.5;
  double homophily = 0.5;          // target edge homophily in [0, 1]
  int64_t features = 64;
  double separation = 1.0;         // distance scale of the class means
  double noise = 1.0;              // std of the per-node Gaussian noise
  // Locality: the ids are cut into `communities` blocks of consecutive ids (independent of the
  // classes), and a `locality` share of the intra-class and of the inter-class edges has both
  // ends in one block; the other edges join any two nodes. A partition along the blocks then
  // cuts about (1 - locality) (1 - 1/parts) of the edges. 1 community or locality 0: none.
  int64_t communities = 1;
  double locality = 0.0;
  uint64_t seed = 0;
  int threads = 0;                 // 0 = hardware concurrency; results do not depend on it
};
CsbmParams csbm_preset(const std::string& preset);  // csbm_presets(): the OGB-sized ones and "demo"
// p's shape at `nodes` nodes: an exact edge count becomes the average degree it gives p (so the
// degree, not the edge count, carries over); fewer nodes keep p's community size (fewer
// communities), more nodes keep p's community count. How `--nodes` resizes a preset (adgnn data
// generate, adgnn bench).
CsbmParams csbm_at_nodes(CsbmParams p, int64_t nodes);
std::vector<std::string> csbm_presets();
Graph generate_csbm(const CsbmParams& p);
// The parameters of a "csbm:<preset>[:seed]" dataset name (load_dataset generates it);
// InputError naming `flag` for anything else.
CsbmParams csbm_params_of(const std::string& dataset, const std::string& flag = "--dataset");
// The same graph generated by the processes of `group` together (LocalProcessGroup: one), for
// graphs that do not fit in one process. Each draws a share of the edges and keeps rows
// [N r / P, N (r + 1) / P); the graph does not depend on P. `graph` holds everything but the
// feature values (features.rows = N, cols = F, dense empty) and, in graph.adj, this process's
// rows (indptr from 0, global column ids); `features` makes any rows of the whole graph (each
// from its own counter-based stream). Every process also holds the O(N) tables that sampling
// needs (labels, split masks, degree weights, alias tables).
struct CsbmGraph {
  Graph graph;
  int64_t first_row = 0;
  DenseRowSource features;
};
CsbmGraph generate_csbm_structure(const CsbmParams& p, ProcessGroup& group);

// ---- statistics ----------------------------------------------------------------------------------

struct GraphStats {
  int64_t nodes = 0, stored_edges = 0, self_loops = 0, duplicates = 0, undirected_edges = 0,
          reciprocal_pairs = 0, isolated = 0, components = 0, largest_component = 0;
  int64_t features = 0, feature_nnz = 0, classes = 0;
  std::vector<int64_t> class_sizes;
  double edge_homophily = 0, edge_homophily_stored = 0, node_homophily = 0,
         class_insensitive_homophily = 0, adjusted_homophily = 0;
  int64_t degree_min = 0, degree_max = 0;
  double degree_mean = 0, degree_median = 0;
};
GraphStats compute_stats(const Graph& g);
std::string stats_json(const Graph& g, const GraphStats& s);
std::string stats_table(const Graph& g, const GraphStats& s);

// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a reader
// never sees a half-written file. Every write, the flush and the close are checked; on failure
// the temporary file is removed, `path` is left as it was, and InputError names the file and the
// OS error.
void write_file_atomic(const std::string& path, const std::string& bytes);

// Puts a finished temporary file in place: fsync of `tmp`, rename over `path`, fsync of the
// folder, so that after a crash or power loss `path` is either the old file or the whole new one.
// On failure removes `tmp` and throws InputError naming `path` and the OS error.
void commit_file(const std::string& tmp, const std::string& path);
// Removes a temporary file left by a failed write, ignoring errors (a read-only folder, a file
// never created): the error that matters is the one that made the write fail.
void remove_temporary(const std::string& tmp) noexcept;
// strerror(errno), or "I/O error" when errno is 0 (HDF5 does not always leave it set).
std::string os_error();

}  // namespace adgnn
