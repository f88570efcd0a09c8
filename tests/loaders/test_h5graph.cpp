// Our HDF5 format: round trips (dense and CSR features, chunked fast path and contiguous small
// datasets) and faults.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "adgnn/loaders.h"
#include "fixtures.h"

namespace {

using fixtures::random_graph;

void expect_equal(const adgnn::Graph& a, const adgnn::Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.source_sha256, b.source_sha256);
  EXPECT_EQ(a.directed, b.directed);
  fixtures::expect_same_content(a, b);
}

TEST(H5Graph, RoundTripDenseChunkedWithThreads) {
  const std::string dir = fixtures::scratch_dir();
  // 40k x 64 floats = 10 MB: several 4 MiB chunks, so the parallel chunk path runs.
  const auto g = random_graph(40000, 64, false, 1);
  for (int threads : {1, 2}) {
    adgnn::H5WriteOptions opt;
    opt.threads = threads;
    adgnn::write_graph_h5(g, dir + "/g.h5", opt);
    expect_equal(g, adgnn::read_graph_h5(dir + "/g.h5", threads));
  }
  adgnn::H5WriteOptions raw;
  raw.deflate_level = 0;
  adgnn::write_graph_h5(g, dir + "/raw.h5", raw);
  expect_equal(g, adgnn::read_graph_h5(dir + "/raw.h5"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/g.h5.tmp"));
}

TEST(H5Graph, RoundTripSparseSmall) {
  const std::string dir = fixtures::scratch_dir();
  const auto g = random_graph(50, 20, true, 2);
  adgnn::write_graph_h5(g, dir + "/s.h5");
  expect_equal(g, adgnn::read_graph_h5(dir + "/s.h5"));
  EXPECT_EQ(adgnn::load_dataset(dir + "/s.h5").num_nodes, 50);
}

// The file stores the graph's fingerprint (what a partition folder is checked against), equal to
// the fingerprint of the graph written and of the graph read back; sparse features stored without
// values hash as the ones the file then holds. A non-graph file has none.
TEST(H5Graph, StoresTheGraphFingerprint) {
  const std::string dir = fixtures::scratch_dir();
  for (bool sparse : {false, true}) {
    auto g = random_graph(300, 8, sparse, 3);
    if (sparse) g.features.csr.values.clear();
    adgnn::write_graph_h5(g, dir + "/fp.h5");
    const std::string stored = adgnn::stored_graph_hash(dir + "/fp.h5");
    EXPECT_EQ(stored.size(), 64u);
    EXPECT_EQ(stored, adgnn::graph_fingerprint(g));
    EXPECT_EQ(stored, adgnn::graph_fingerprint(adgnn::read_graph_h5(dir + "/fp.h5")));
  }
  adgnn::write_arrays_h5(dir + "/arrays.h5", {}, {{"format", "something-else"}});
  EXPECT_EQ(adgnn::stored_graph_hash(dir + "/arrays.h5"), "");
  EXPECT_EQ(adgnn::stored_graph_hash(dir + "/missing.h5"), "");
}

TEST(H5Graph, Faults) {
  const std::string dir = fixtures::scratch_dir();
  auto expect = [](const std::string& path, const std::string& fragment) {
    try {
      adgnn::read_graph_h5(path);
      FAIL() << "no error for " << path;
    } catch (const adgnn::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect(dir + "/none.h5", "no such file");
  fixtures::write(dir + "/text.h5", "hello");
  expect(dir + "/text.h5", "not an HDF5 file");
  // Truncated copy of a valid file.
  const auto g = random_graph(40000, 64, false, 3);
  adgnn::write_graph_h5(g, dir + "/full.h5");
  const std::string bytes = adgnn::read_file(dir + "/full.h5");
  fixtures::write(dir + "/cut.h5", bytes.substr(0, bytes.size() / 2));
  EXPECT_THROW(adgnn::read_graph_h5(dir + "/cut.h5"), adgnn::InputError);
  // An invalid graph is refused before anything is written; an existing file stays intact.
  auto bad = g;
  bad.labels[0] = 99;
  EXPECT_THROW(adgnn::write_graph_h5(bad, dir + "/full.h5"), adgnn::InputError);
  expect_equal(g, adgnn::read_graph_h5(dir + "/full.h5"));
}

// Our files use the 1.8 file format (superblock >= 2: checksummed metadata) and fixed-length
// string attributes (no global heap, which has no checksum): flipping any single byte of a file
// gives the graph back or a clear error, never a crash in HDF5 (with the default format and
// variable-length strings, HDF5 1.10 crashed on such files: scripts/fuzz.sh).
TEST(H5Graph, ChecksummedFormatSurvivesEveryByteFlip) {
  const std::string dir = fixtures::scratch_dir();
  const auto g = random_graph(30, 4, false, 11);
  adgnn::write_graph_h5(g, dir + "/g.h5");
  const hid_t f = H5Fopen((dir + "/g.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5F_info2_t info;
  ASSERT_GE(H5Fget_info2(f, &info), 0);
  EXPECT_GE(info.super.version, 2u);
  const hid_t a = H5Aopen(f, "name", H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  EXPECT_EQ(H5Tis_variable_str(t), 0);
  H5Tclose(t);
  H5Aclose(a);
  H5Fclose(f);
  const std::string bytes = adgnn::read_file(dir + "/g.h5");
  int64_t refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = char(~flipped[i]);
    fixtures::write(dir + "/flip.h5", flipped);
    try {
      (void)adgnn::read_graph_h5(dir + "/flip.h5");
    } catch (const adgnn::InputError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

// No creation times in the headers: the same graph written twice, a second apart, gives the same
// bytes (chunked and compressed on several threads, and contiguous).
TEST(H5Graph, SameContentsSameBytes) {
  const std::string dir = fixtures::scratch_dir();
  const auto g = random_graph(40000, 64, false, 13);
  adgnn::write_graph_h5(g, dir + "/a.h5");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // times have 1 s resolution
  adgnn::write_graph_h5(g, dir + "/b.h5");
  EXPECT_TRUE(adgnn::read_file(dir + "/a.h5") == adgnn::read_file(dir + "/b.h5"));
}

// Variable-length string attributes (earlier adgnn versions, h5py's default) still read.
TEST(H5Graph, VariableLengthStringAttributesRead) {
  const std::string dir = fixtures::scratch_dir();
  auto g = random_graph(30, 4, false, 12);
  adgnn::write_graph_h5(g, dir + "/g.h5");
  const hid_t f = H5Fopen((dir + "/g.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Adelete(f, "name");
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  const hid_t sp = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, "name", t, sp, H5P_DEFAULT, H5P_DEFAULT);
  const char* value = "renamed-graph";
  H5Awrite(a, t, &value);
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
  H5Fclose(f);
  g.name = "renamed-graph";
  expect_equal(g, adgnn::read_graph_h5(dir + "/g.h5"));
}

// Files found by fuzzing: well-formed HDF5 whose contents break our expectations.
TEST(H5Graph, FuzzRegressionsAttributeArraysAndImpossibleShapes) {
  const std::string dir = fixtures::scratch_dir();
  const auto g = random_graph(30, 4, false, 7);
  auto corrupt = [&](const std::string& name, auto&& edit) {
    const std::string path = dir + "/" + name + ".h5";
    adgnn::write_graph_h5(g, path);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    edit(f);
    H5Fclose(f);
    return path;
  };
  auto expect = [](const std::string& path, const std::string& fragment) {
    try {
      adgnn::read_graph_h5(path);
      FAIL() << "no error for " << path;
    } catch (const adgnn::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // An integer attribute holding 100 values (H5Aread would write all of them).
  expect(corrupt("int-array", [](hid_t f) {
           H5Adelete(f, "format_version");
           const hsize_t n = 100;
           const hid_t sp = H5Screate_simple(1, &n, nullptr);
           const hid_t a = H5Acreate2(f, "format_version", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
           std::vector<int64_t> v(100, 1);
           H5Awrite(a, H5T_NATIVE_INT64, v.data());
           H5Aclose(a);
           H5Sclose(sp);
         }),
         "format_version");
  // A fixed-length string attribute holding 50 strings.
  expect(corrupt("string-array", [](hid_t f) {
           H5Adelete(f, "format");
           const hsize_t n = 50;
           const hid_t sp = H5Screate_simple(1, &n, nullptr);
           const hid_t t = H5Tcopy(H5T_C_S1);
           H5Tset_size(t, 11);
           const hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
           std::string v(50 * 11, 'a');
           H5Awrite(a, t, v.data());
           H5Aclose(a);
           H5Tclose(t);
           H5Sclose(sp);
         }),
         "format");
  // A split mask of 2^40 entries that were never written (chunked: costs no space in the file).
  expect(corrupt("huge-split", [](hid_t f) {
           H5Ldelete(f, "/splits/random/train", H5P_DEFAULT);
           const hsize_t dims[2] = {1 << 20, 1 << 20}, chunk[2] = {1, 1024};
           const hid_t sp = H5Screate_simple(2, dims, nullptr);
           const hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
           H5Pset_chunk(pl, 2, chunk);
           const hid_t d = H5Dcreate2(f, "/splits/random/train", H5T_STD_U8LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
           H5Dclose(d);
           H5Pclose(pl);
           H5Sclose(sp);
         }),
         "/splits/random/train");
}

}  // namespace
