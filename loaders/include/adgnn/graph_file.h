// adgnn/graph_file: one of our HDF5 graph files (docs/hdf5-format.md) read by rows, for the
// processes that must never hold the whole graph: the partitioners read the adjacency (all of it,
// or a range of rows each), and every part's writer reads the features, labels and split masks of
// just its rows. Reads go chunk by chunk through HDF5 hyperslabs, so memory stays at one chunk
// (about 4 MiB) beyond what is returned. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adgnn/loaders.h"

namespace adgnn {

// What the file's attributes and dataset shapes say, without reading an array.
struct GraphFileInfo {
  std::string path, name, source, source_sha256;
  std::string graph_hash;  // graph_fingerprint() as stored; empty in files that predate it
  bool directed = false;
  int64_t num_nodes = 0, num_classes = 0, stored_edges = 0;
  int64_t feature_cols = 0;
  bool sparse_features = false;
  int64_t feature_nnz = 0;  // sparse features only
  bool has_original_id = false;
  std::vector<std::pair<std::string, int64_t>> split_families;  // name order, number of splits
  // Bytes of the graph's arrays as a Graph holds them in memory (adjacency, features, labels,
  // split masks): what "the whole graph" costs a process that loads it.
  int64_t memory_bytes() const;
};

class GraphFileReader {
 public:
  // Opens `path` and reads its attributes; a file that is not our format, or of another format
  // version, throws InputError naming the path.
  explicit GraphFileReader(const std::string& path);
  ~GraphFileReader();
  GraphFileReader(const GraphFileReader&) = delete;
  GraphFileReader& operator=(const GraphFileReader&) = delete;

  const GraphFileInfo& info() const;

  // The stored adjacency's rows [begin, end) (self-loops and duplicates as stored); indptr
  // starts at 0, columns are global node ids (cols = num_nodes). Out-of-range ids and a
  // decreasing indptr throw InputError (a corrupt file).
  Csr adjacency_rows(int64_t begin, int64_t end) const;
  // The stored indptr entries begin..end (end - begin + 1 values): where each of those rows'
  // entries start in the stored indices.
  std::vector<int64_t> adjacency_offsets(int64_t begin, int64_t end) const;
  // The rows `ids` (any order, repeats allowed) of the features, labels and every split family:
  // row i of the result is node ids[i]. Split masks are [split][ids.size()].
  Features feature_rows(const std::vector<int64_t>& ids) const;
  std::vector<int64_t> label_rows(const std::vector<int64_t>& ids) const;
  std::vector<SplitSet> split_rows(const std::vector<int64_t>& ids) const;
  // The whole graph without its features (features.rows = 0, cols = the width): what a
  // single-process partitioner needs, a fraction of the file for feature-heavy graphs.
  Graph read_structure() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// graph_fingerprint() of the graph in the file, read chunk by chunk (memory: the labels and split
// masks, O(N), plus a chunk): what its stored graph_hash must equal. `features`, when given, makes
// the dense feature rows instead of the file (on `threads` threads; 0: all cores): the writer that
// made them from it hashes at the speed of making them, not of reading the file back.
std::string graph_fingerprint(const GraphFileReader& file, const DenseRowSource* features = nullptr,
                              int threads = 0);

}  // namespace adgnn
