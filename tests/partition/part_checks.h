// Checks shared by the partition tests: a temporary folder, and the equality of two GraphParts
// array by array.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "adgnn/partition.h"

namespace adgnn::test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("adgnn-part-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void expect_csr_eq(const Csr& a, const Csr& b, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.indptr, b.indptr);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.values, b.values);
}

inline void expect_part_eq(const GraphPart& a, const GraphPart& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.parts, b.parts);
  EXPECT_EQ(a.graph_hash, b.graph_hash);
  EXPECT_EQ(a.graph_name, b.graph_name);
  EXPECT_EQ(a.graph_source_sha256, b.graph_source_sha256);
  EXPECT_EQ(a.partition_id, b.partition_id);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.global_nodes, b.global_nodes);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.num_owned, b.num_owned);
  EXPECT_EQ(a.global_id, b.global_id);
  EXPECT_EQ(a.halo_owner, b.halo_owner);
  EXPECT_EQ(a.halo_owner_index, b.halo_owner_index);
  EXPECT_EQ(a.recv_offset, b.recv_offset);
  EXPECT_EQ(a.send, b.send);
  expect_csr_eq(a.sym, b.sym, "sym");
  expect_csr_eq(a.out, b.out, "out");
  expect_csr_eq(a.in, b.in, "in");
  EXPECT_EQ(a.degree, b.degree);
  EXPECT_EQ(a.in_degree, b.in_degree);
  EXPECT_EQ(a.out_degree, b.out_degree);
  EXPECT_EQ(a.max_degree_product, b.max_degree_product);
  EXPECT_EQ(a.features.rows, b.features.rows);
  EXPECT_EQ(a.features.cols, b.features.cols);
  EXPECT_EQ(a.features.sparse, b.features.sparse);
  EXPECT_EQ(a.features.dense, b.features.dense);
  expect_csr_eq(a.features.csr, b.features.csr, "features");
  EXPECT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.splits.size(), b.splits.size());
  for (size_t s = 0; s < a.splits.size(); ++s) {
    EXPECT_EQ(a.splits[s].name, b.splits[s].name);
    EXPECT_EQ(a.splits[s].count, b.splits[s].count);
    EXPECT_EQ(a.splits[s].train, b.splits[s].train);
    EXPECT_EQ(a.splits[s].val, b.splits[s].val);
    EXPECT_EQ(a.splits[s].test, b.splits[s].test);
  }
}

}  // namespace adgnn::test
