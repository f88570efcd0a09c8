// NPY/NPZ parsing: dtypes, orders, ZIP methods, and one test per fault class.
#include <gtest/gtest.h>

#include "adgnn/loaders.h"
#include "fixtures.h"

using adgnn::InputError;
using fixtures::npy;

namespace {

// Runs `fn`, expecting an InputError whose one-line message contains every fragment.
template <typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "no error raised; expected one mentioning " << fragments.front();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
  }
}

TEST(Npy, ReadsEveryNumericDtype) {
  const auto f4 = adgnn::parse_npy(npy<float>("<f4", {3}, {1.5f, -2, 3}), "x");
  EXPECT_EQ(f4.as_double("x"), (std::vector<double>{1.5, -2, 3}));
  const auto f8 = adgnn::parse_npy(npy<double>("<f8", {2}, {0.25, 1e300}), "x");
  EXPECT_EQ(f8.as_double("x")[1], 1e300);
  const auto i4 = adgnn::parse_npy(npy<int32_t>("<i4", {2}, {-7, 9}), "x");
  EXPECT_EQ(i4.as_int64("x"), (std::vector<int64_t>{-7, 9}));
  const auto i8 = adgnn::parse_npy(npy<int64_t>("<i8", {2}, {int64_t(1) << 40, -1}), "x");
  EXPECT_EQ(i8.as_int64("x"), (std::vector<int64_t>{int64_t(1) << 40, -1}));
  const auto u1 = adgnn::parse_npy(npy<uint8_t>("|u1", {3}, {0, 1, 255}), "x");
  EXPECT_EQ(u1.as_int64("x"), (std::vector<int64_t>{0, 1, 255}));
  const auto b1 = adgnn::parse_npy(npy<uint8_t>("|b1", {2}, {1, 0}), "x");
  EXPECT_EQ(b1.as_int64("x"), (std::vector<int64_t>{1, 0}));
  const auto scalar = adgnn::parse_npy(npy<int64_t>("<i8", {}, {42}), "x");
  EXPECT_EQ(scalar.size(), 1);
}

TEST(Npy, FortranOrderIsTransposedToC) {
  // Logical 2x3 matrix [[0,1,2],[3,4,5]] stored column-major: 0,3,1,4,2,5.
  const auto a = adgnn::parse_npy(npy<int32_t>("<i4", {2, 3}, {0, 3, 1, 4, 2, 5}, true), "x");
  EXPECT_EQ(a.as_int64("x"), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Npy, VersionTwoHeader) {
  std::string v1 = npy<float>("<f4", {2}, {1, 2});
  // Rewrite as version 2.0: 4-byte header length.
  const uint16_t hl = uint16_t(uint8_t(v1[8]) | (uint8_t(v1[9]) << 8));
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  v2 += char(hl & 0xff); v2 += char(hl >> 8); v2 += '\0'; v2 += '\0';
  v2 += v1.substr(10);
  EXPECT_EQ(adgnn::parse_npy(v2, "x").as_double("x"), (std::vector<double>{1, 2}));
}

TEST(Npy, Faults) {
  expect_error([] { adgnn::parse_npy("garbage!!", "a.npy"); }, {"a.npy", "magic"});
  const std::string good = npy<float>("<f4", {4}, {1, 2, 3, 4});
  expect_error([&] { adgnn::parse_npy(good.substr(0, good.size() - 3), "a.npy"); },
               {"a.npy", "truncated"});
  expect_error([] { adgnn::parse_npy(npy<float>("<c8", {1}, {1.f, 0.f}), "a.npy"); },
               {"a.npy", "dtype"});
  expect_error(
      [] { adgnn::parse_npy(npy<float>("<f4", {1}, {1.5f}), "a.npy").as_int64("a.npy[labels]"); },
      {"a.npy[labels]", "<f4", "integers"});
}

TEST(Npz, StoredAndDeflatedMembersSkippingStringsAndObjects) {
  for (bool deflate : {false, true}) {
    const std::string bytes = fixtures::zip(
        {{"x.npy", npy<float>("<f4", {2, 2}, {1, 2, 3, 4})},
         {"names.npy", fixtures::npy_raw("<U2", {1}, std::string(8, 'a'))},
         {"meta.npy", fixtures::npy_raw("|O", {}, "pickle")},
         {"y.npy", npy<int64_t>("<i8", {2}, {5, 6})}},
        deflate);
    const auto arrays = adgnn::parse_npz(bytes, "t.npz");
    ASSERT_EQ(arrays.size(), 2u);
    EXPECT_EQ(arrays.at("x").as_double("x"), (std::vector<double>{1, 2, 3, 4}));
    EXPECT_EQ(arrays.at("y").as_int64("y"), (std::vector<int64_t>{5, 6}));
    EXPECT_EQ(adgnn::parse_npz(bytes, "t.npz", true).size(), 4u);
  }
}

TEST(Npz, Faults) {
  const std::string big(4000, 'q');
  const std::string good = fixtures::zip({{"x.npy", npy<float>("<f4", {1000}, std::vector<float>(1000, 0.5f))}}, true);
  expect_error([] { adgnn::parse_npz("", "e.npz"); }, {"e.npz", "empty"});
  expect_error([&] { adgnn::parse_npz(big, "n.npz"); }, {"n.npz", "not a ZIP"});
  // Truncated: the end of central directory is gone.
  expect_error([&] { adgnn::parse_npz(good.substr(0, good.size() / 2), "t.npz"); },
               {"t.npz", "truncated"});
  // Corrupt deflate payload: flip bytes in the middle of the compressed member.
  std::string bad = good;
  for (size_t i = 40; i < 60; ++i) bad[i] = char(bad[i] ^ 0x5a);
  expect_error([&] { adgnn::parse_npz(bad, "c.npz"); }, {"c.npz[x.npy]"});
  // Corrupt stored member: the CRC catches it.
  std::string stored = fixtures::zip({{"x.npy", npy<float>("<f4", {8}, std::vector<float>(8, 1))}}, false);
  stored[stored.size() / 3] ^= 0x01;
  expect_error([&] { adgnn::parse_npz(stored, "s.npz"); }, {"s.npz"});
  expect_error([] { adgnn::read_npz("/nonexistent/dir/x.npz"); }, {"/nonexistent/dir/x.npz", "cannot open"});
}

TEST(Gzip, RoundTripAndFaults) {
  const std::string text = "1,2\n3,4\n";
  EXPECT_EQ(adgnn::gunzip(fixtures::gzip(text), "f.gz"), text);
  EXPECT_EQ(adgnn::gunzip(fixtures::gzip("a") + fixtures::gzip("b"), "f.gz"), "ab");
  const std::string gz = fixtures::gzip(std::string(10000, 'x') + "tail");
  expect_error([&] { adgnn::gunzip(gz.substr(0, gz.size() - 12), "t.gz"); }, {"t.gz", "truncated"});
  expect_error([] { adgnn::gunzip("not gzip data", "n.gz"); }, {"n.gz", "corrupt"});
  expect_error([] { adgnn::gunzip("", "e.gz"); }, {"e.gz", "empty"});
}

}  // namespace

namespace {

// Inputs found by fuzzing (scripts/fuzz.sh): each must end in an InputError, not a crash,
// an overflow or a huge allocation.
TEST(FuzzRegressions, NpyAndNpz) {
  expect_error([] { adgnn::parse_npy(fixtures::npy_raw("|O", {207186800001, 207186801616}, "pickle"), "o.npy"); },
               {"o.npy", "overflows"});
  expect_error([] { adgnn::parse_npy(fixtures::npy_raw("<U999999999", {1}, "abcd"), "u.npy"); },
               {"u.npy", "<U999999999"});
  // A deflated member whose header claims 4 GiB: refused before allocating.
  std::string z = fixtures::zip({{"x.npy", npy<float>("<f4", {4}, {1, 2, 3, 4})}}, true);
  const size_t cd = z.rfind(std::string("PK\x01\x02", 4));
  for (size_t off : {size_t(22), cd + 24}) {
    z[off] = char(0xf0);
    z[off + 1] = z[off + 2] = z[off + 3] = char(0xff);
  }
  expect_error([&] { adgnn::parse_npz(z, "big.npz"); }, {"big.npz[x.npy]", "claims"});
}

}  // namespace
