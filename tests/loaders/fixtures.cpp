#include "fixtures.h"

#include <random>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "adgnn/loaders.h"

namespace fixtures {

namespace {
void put16(std::string& s, uint16_t v) {
  s += char(v & 0xff);
  s += char(v >> 8);
}
void put32(std::string& s, uint32_t v) {
  put16(s, uint16_t(v & 0xffff));
  put16(s, uint16_t(v >> 16));
}
}  // namespace

std::string npy_raw(const std::string& descr, const std::vector<int64_t>& shape,
                    const std::string& data, bool fortran) {
  std::string sh = "(";
  for (size_t i = 0; i < shape.size(); ++i) sh += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  sh += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " +
                       (fortran ? "True" : "False") + ", 'shape': " + sh + ", }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put16(out, uint16_t(header.size()));
  return out + header + data;
}

std::string zip(const std::vector<std::pair<std::string, std::string>>& members, bool compressed) {
  std::string out, central;
  for (const auto& [name, raw] : members) {
    std::string body = raw;
    if (compressed) {
      z_stream zs{};
      deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
      body.assign(deflateBound(&zs, raw.size()), '\0');
      zs.next_in = (Bytef*)raw.data();
      zs.avail_in = uInt(raw.size());
      zs.next_out = (Bytef*)body.data();
      zs.avail_out = uInt(body.size());
      deflate(&zs, Z_FINISH);
      body.resize(zs.total_out);
      deflateEnd(&zs);
    }
    const uint32_t crc = uint32_t(crc32(0, (const Bytef*)raw.data(), uInt(raw.size())));
    const uint32_t offset = uint32_t(out.size());
    put32(out, 0x04034b50);
    put16(out, 20); put16(out, 0); put16(out, compressed ? 8 : 0); put16(out, 0); put16(out, 0x21);
    put32(out, crc); put32(out, uint32_t(body.size())); put32(out, uint32_t(raw.size()));
    put16(out, uint16_t(name.size())); put16(out, 0);
    out += name + body;
    put32(central, 0x02014b50);
    put16(central, 20); put16(central, 20); put16(central, 0); put16(central, compressed ? 8 : 0);
    put16(central, 0); put16(central, 0x21);
    put32(central, crc); put32(central, uint32_t(body.size())); put32(central, uint32_t(raw.size()));
    put16(central, uint16_t(name.size())); put16(central, 0); put16(central, 0); put16(central, 0);
    put16(central, 0); put32(central, 0); put32(central, offset);
    central += name;
  }
  const uint32_t cd_off = uint32_t(out.size());
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0); put16(out, 0);
  put16(out, uint16_t(members.size())); put16(out, uint16_t(members.size()));
  put32(out, uint32_t(central.size())); put32(out, cd_off); put16(out, 0);
  return out;
}

std::string gzip(const std::string& text) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, text.size()) + 64, '\0');
  zs.next_in = (Bytef*)text.data();
  zs.avail_in = uInt(text.size());
  zs.next_out = (Bytef*)out.data();
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) throw std::runtime_error("cannot write fixture " + path);
}

std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "x";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("adgnn-test-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string data_dir() {
  const char* env = std::getenv("ADGNN_DATA");
  std::string d = env && *env ? env : ADGNN_TEST_DATA;
  return std::filesystem::is_directory(d) ? d : "";
}

void expect_same_content(const adgnn::Graph& a, const adgnn::Graph& b) {
  EXPECT_EQ(a.num_nodes, b.num_nodes);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.adj.indptr, b.adj.indptr);
  EXPECT_EQ(a.adj.indices, b.adj.indices);
  EXPECT_EQ(a.features.sparse, b.features.sparse);
  EXPECT_EQ(a.features.dense, b.features.dense);
  EXPECT_EQ(a.features.csr.indptr, b.features.csr.indptr);
  EXPECT_EQ(a.features.csr.indices, b.features.csr.indices);
  EXPECT_EQ(a.features.csr.values, b.features.csr.values);
  EXPECT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.splits.size(), b.splits.size());
  for (size_t k = 0; k < a.splits.size(); ++k) {
    EXPECT_EQ(a.splits[k].name, b.splits[k].name);
    EXPECT_EQ(a.splits[k].train, b.splits[k].train);
    EXPECT_EQ(a.splits[k].val, b.splits[k].val);
    EXPECT_EQ(a.splits[k].test, b.splits[k].test);
  }
}

adgnn::Graph random_graph(int64_t n, int64_t f, bool sparse, uint64_t seed) {
  std::mt19937_64 rng(seed);
  adgnn::Graph g;
  g.name = "rand";
  g.source = "test";
  g.source_sha256 = adgnn::sha256_hex("test");
  g.directed = true;
  g.num_nodes = n;
  g.num_classes = 3;
  std::vector<int64_t> src, dst;
  g.adj.rows = g.adj.cols = n;
  for (int64_t u = 0; u < n; ++u) {
    const int k = int(rng() % 6);
    for (int j = 0; j < k; ++j) g.adj.indices.push_back(int32_t(rng() % uint64_t(n)));
    g.adj.indptr.push_back(int64_t(g.adj.indices.size()));
  }
  g.features.rows = n;
  g.features.cols = f;
  g.features.sparse = sparse;
  std::normal_distribution<float> normal;
  if (sparse) {
    g.features.csr.rows = n;
    g.features.csr.cols = f;
    for (int64_t u = 0; u < n; ++u) {
      for (int64_t c = 0; c < f; ++c)
        if (rng() % 7 == 0) {
          g.features.csr.indices.push_back(int32_t(c));
          g.features.csr.values.push_back(normal(rng));
        }
      g.features.csr.indptr.push_back(int64_t(g.features.csr.indices.size()));
    }
  } else {
    for (int64_t i = 0; i < n * f; ++i) g.features.dense.push_back(normal(rng));
  }
  for (int64_t u = 0; u < n; ++u) g.labels.push_back(int64_t(rng() % 3));
  adgnn::SplitSet s;
  s.name = "random";
  s.count = 2;
  for (int64_t i = 0; i < 2 * n; ++i) {
    const int r = int(rng() % 3);
    s.train.push_back(r == 0);
    s.val.push_back(r == 1);
    s.test.push_back(r == 2);
  }
  g.splits.push_back(s);
  return g;
}

}  // namespace fixtures
