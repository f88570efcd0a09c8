// Our HDF5 format: round trips (dense and CSR features, chunked fast path and contiguous small
// datasets) and faults.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "adgnn/graph_file.h"
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

// Writes `file` with one bit flipped at each byte in turn (bit i % 8 of byte i) and reads it back
// with `read`, which returns "" when the file read back unchanged, else what differs; a flip
// must be refused (InputError) or harmless. Returns how many flips were refused.
int64_t flip_every_byte(const std::string& file, const std::function<std::string(const std::string&)>& read) {
  const std::string bytes = adgnn::read_file(file);
  const std::string flipped_path = file + ".flip";
  int64_t refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ (1 << (i % 8)));
    fixtures::write(flipped_path, flipped);
    try {
      const std::string diff = read(flipped_path);
      if (!diff.empty()) ADD_FAILURE() << "a flipped bit at byte " << i << " of " << bytes.size() << ": " << diff;
    } catch (const adgnn::InputError&) {
      ++refused;
    }
  }
  return refused;
}

// Our files use the 1.10 file format (superblock 3, checksummed metadata and chunk indices),
// fixed-length string attributes (no global heap, which has no checksum) and a checksum on every
// chunk of data (Fletcher32 on small datasets, zlib's on deflated ones). Flipping any single bit
// of a file gives the graph back unchanged or a clear error: never another graph, and never a
// crash in HDF5 (with the default format and variable-length strings, HDF5 1.10 crashed on such
// files: scripts/fuzz.sh).
TEST(H5Graph, EveryBitFlipIsDetectedOrHarmless) {
  const std::string dir = fixtures::scratch_dir();
  for (bool sparse : {false, true}) {
    const auto g = random_graph(30, 4, sparse, 11);
    adgnn::write_graph_h5(g, dir + "/g.h5");
    const std::string want = adgnn::graph_fingerprint(adgnn::read_graph_h5(dir + "/g.h5"));
    const hid_t f = H5Fopen((dir + "/g.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5F_info2_t info;
    ASSERT_GE(H5Fget_info2(f, &info), 0);
    EXPECT_GE(info.super.version, 3u);
    const hid_t a = H5Aopen(f, "name", H5P_DEFAULT);
    const hid_t t = H5Aget_type(a);
    EXPECT_EQ(H5Tis_variable_str(t), 0);
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
    const int64_t refused = flip_every_byte(dir + "/g.h5", [&](const std::string& path) -> std::string {
      return adgnn::graph_fingerprint(adgnn::read_graph_h5(path)) == want ? "" : "read back as another graph";
    });
    EXPECT_GT(refused, 0) << "sparse " << sparse;
  }
}

// The same for a file of named arrays (checkpoints, part files, predictions): every flipped bit
// is refused or reads back the same arrays and attributes. This includes a small float array
// (a layer's weights) and a small integer array (a part file's send rows), which before the
// checksums changed silently.
TEST(H5Arrays, EveryBitFlipIsDetectedOrHarmless) {
  const std::string dir = fixtures::scratch_dir();
  std::map<std::string, adgnn::H5Array> arrays;
  std::vector<float> w(24);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i) - 0.036f;
  arrays["param/layers.1.weight"] = {"f32", {4, 6}, std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4)};
  std::vector<int64_t> rows{3, 1, 4, 1, 5, 9, 2, 6};
  arrays["send/rows"] = {"i64", {8}, std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * 8)};
  arrays["mask"] = {"u8", {5}, std::string("\x01\x00\x01\x01\x00", 5)};
  const std::map<std::string, std::string> attrs{{"format", "adgnn-checkpoint"}, {"epoch", "7"}};
  adgnn::write_arrays_h5(dir + "/a.h5", arrays, attrs);
  std::map<std::string, std::string> attrs_back;
  const auto back = adgnn::read_arrays_h5(dir + "/a.h5", &attrs_back);
  // What differs from the arrays and attributes read from the unflipped file ("": nothing).
  auto differences = [&](const std::map<std::string, adgnn::H5Array>& x, const std::map<std::string, std::string>& xa) {
    std::string d;
    if (xa != attrs_back) d += "attributes; ";
    for (const auto& [k, v] : x)
      if (back.count(k) == 0 || back.at(k).dtype != v.dtype || back.at(k).shape != v.shape || back.at(k).bytes != v.bytes)
        d += "array " + k + "; ";
    for (const auto& [k, v] : back)
      if (x.count(k) == 0) d += "missing " + k + "; ";
    return d;
  };
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.at("send/rows").bytes, arrays.at("send/rows").bytes);
  EXPECT_EQ(attrs_back, attrs);  // the format's own attributes (checksums, contents) are not returned
  const int64_t refused = flip_every_byte(dir + "/a.h5", [&](const std::string& path) {
    std::map<std::string, std::string> fa;
    const auto f = adgnn::read_arrays_h5(path, &fa);
    return differences(f, fa);
  });
  EXPECT_GT(refused, 0);
}

// A file of the format before the checksums (1.8 format, superblock 2, no 'checksums'
// attribute, contiguous unfiltered datasets) still reads, with one warning that it cannot be
// verified; a 1.10-format file without the attribute is refused.
TEST(H5Arrays, FilesWithoutChecksumsReadWithAWarning) {
  const std::string dir = fixtures::scratch_dir();
  auto make = [&](const std::string& path, H5F_libver_t low) {
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, low, H5F_LIBVER_LATEST);
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    ASSERT_GE(f, 0);
    const hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 16);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "format", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    char value[16] = "adgnn-checkpoin";
    H5Awrite(a, str, value);
    const hsize_t n = 3;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(f, "w", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const float w[3] = {1.5f, -2.0f, 0.25f};
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w);
    H5Dclose(d);
    H5Sclose(space);
    H5Aclose(a);
    H5Sclose(scalar);
    H5Tclose(str);
    H5Fclose(f);
    H5Pclose(fapl);
  };
  make(dir + "/old.h5", H5F_LIBVER_EARLIEST);
  testing::internal::CaptureStderr();
  std::map<std::string, std::string> attrs;
  const auto arrays = adgnn::read_arrays_h5(dir + "/old.h5", &attrs);
  (void)adgnn::read_arrays_h5(dir + "/old.h5", nullptr);  // warned once per file
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(arrays.at("w").bytes.size(), 12u);
  EXPECT_EQ(attrs.at("format"), "adgnn-checkpoin");
  EXPECT_EQ(err, "adgnn: warning: " + dir + "/old.h5: written without checksums on its small datasets, so "
                 "their corruption cannot be detected (write the file again to add them)\n");
  make(dir + "/new.h5", H5F_LIBVER_V110);
  try {
    (void)adgnn::read_arrays_h5(dir + "/new.h5", nullptr);
    ADD_FAILURE() << "no InputError";
  } catch (const adgnn::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("new.h5: no 'checksums' attribute"), std::string::npos) << e.what();
  }
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
  // A num_classes attribute of 10^9 (the model would allocate hidden x 10^9 outputs).
  const std::string classes = corrupt("classes", [](hid_t f) {
    const hid_t a = H5Aopen(f, "num_classes", H5P_DEFAULT);
    const int64_t v = 1000000000;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  });
  expect(classes, "num_classes 1000000000: must be in [0, 65536]");
  try {
    (void)adgnn::GraphFileReader(classes);
    ADD_FAILURE() << "no InputError";
  } catch (const adgnn::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("num_classes 1000000000: must be in [0, 65536]"), std::string::npos) << e.what();
  }
}

}  // namespace
