// Test fixtures: NPY/NPZ/gzip bytes built in memory, and scratch folders.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace adgnn {
struct Graph;
}

namespace fixtures {

// gtest expectations that two graphs hold the same nodes, edges (in stored order), features,
// labels and every split (names and sources aside).
void expect_same_content(const adgnn::Graph& a, const adgnn::Graph& b);

// A directed random graph of n nodes (self-loops and duplicates possible), f features (dense,
// or CSR with about 1/7 of the entries), 3 classes, one split family "random" of 2 splits.
adgnn::Graph random_graph(int64_t n, int64_t f, bool sparse, uint64_t seed);

std::string npy_raw(const std::string& descr, const std::vector<int64_t>& shape,
                    const std::string& data, bool fortran = false);
template <typename T>
std::string npy(const std::string& descr, const std::vector<int64_t>& shape,
                const std::vector<T>& values, bool fortran = false) {
  std::string data(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  return npy_raw(descr, shape, data, fortran);
}
// A ZIP archive of (name, bytes) members, stored or deflated, as numpy.savez writes it.
std::string zip(const std::vector<std::pair<std::string, std::string>>& members, bool deflate);
std::string gzip(const std::string& text);
void write(const std::string& path, const std::string& bytes);
// A fresh empty folder under the system temp dir, unique to the running test.
std::string scratch_dir();
// The real datasets (../shared/data); empty when absent.
std::string data_dir();

}  // namespace fixtures
