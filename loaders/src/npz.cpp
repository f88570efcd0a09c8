// NPY arrays and NPZ (ZIP) archives: stored and deflate members, ZIP64 sizes, NPY v1-v3 headers,
// C and Fortran order. Every fault is an InputError naming the file (and member).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include "adgnn/loaders.h"
#include "fmt/format.h"
#include "internal.h"

namespace adgnn {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(in.tellg());
  if (size < 0) throw InputError(fmt::format("{}: cannot read file", path));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  if (!in) throw InputError(fmt::format("{}: read error", path));
  return bytes;
}

namespace {

uint16_t le16(const std::string& b, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[off]) |
                               (static_cast<uint8_t>(b[off + 1]) << 8));
}
uint32_t le32(const std::string& b, size_t off) {
  return static_cast<uint32_t>(le16(b, off)) | (static_cast<uint32_t>(le16(b, off + 2)) << 16);
}
uint64_t le64(const std::string& b, size_t off) {
  return static_cast<uint64_t>(le32(b, off)) | (static_cast<uint64_t>(le32(b, off + 4)) << 32);
}

// The value text after `'key':` in a NumPy header dict.
std::string header_value(const std::string& header, const std::string& key,
                         const std::string& where) {
  const auto k = header.find("'" + key + "'");
  if (k == std::string::npos) throw InputError(fmt::format("{}: NPY header lacks '{}'", where, key));
  auto colon = header.find(':', k);
  if (colon == std::string::npos) throw InputError(fmt::format("{}: malformed NPY header", where));
  auto start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) throw InputError(fmt::format("{}: malformed NPY header", where));
  size_t end;
  if (header[start] == '(') {
    end = header.find(')', start);
    if (end == std::string::npos) throw InputError(fmt::format("{}: malformed NPY shape", where));
    return header.substr(start, end - start + 1);
  }
  if (header[start] == '\'') {
    end = header.find('\'', start + 1);
    if (end == std::string::npos) throw InputError(fmt::format("{}: malformed NPY header", where));
    return header.substr(start + 1, end - start - 1);
  }
  end = header.find_first_of(",}", start);
  if (end == std::string::npos) throw InputError(fmt::format("{}: malformed NPY header", where));
  auto v = header.substr(start, end - start);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& where) {
  std::vector<int64_t> shape;
  size_t i = 1;  // after '('
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size() || text[i] == ')') break;
    int64_t v = 0;
    const char* b = text.data() + i;
    auto [p, ec] = std::from_chars(b, text.data() + text.size(), v);
    if (ec != std::errc() || v < 0)
      throw InputError(fmt::format("{}: bad NPY shape {}", where, text));
    shape.push_back(v);
    i += static_cast<size_t>(p - b);
    if (i < text.size() && text[i] == 'L') ++i;  // Python 2 long suffix
  }
  return shape;
}

// Reorders a Fortran-ordered array's bytes into C order.
std::string fortran_to_c(const std::string& data, const std::vector<int64_t>& shape, int item) {
  const size_t nd = shape.size();
  if (nd < 2) return data;
  int64_t total = 1;
  for (auto s : shape) total *= s;
  std::string out(data.size(), '\0');
  // Fortran strides (in items): stride_f[0] = 1, stride_f[k] = stride_f[k-1] * shape[k-1].
  std::vector<int64_t> stride_f(nd, 1), idx(nd, 0);
  for (size_t k = 1; k < nd; ++k) stride_f[k] = stride_f[k - 1] * shape[k - 1];
  for (int64_t c = 0; c < total; ++c) {
    int64_t f = 0;
    for (size_t k = 0; k < nd; ++k) f += idx[k] * stride_f[k];
    std::memcpy(&out[static_cast<size_t>(c) * item], &data[static_cast<size_t>(f) * item],
                static_cast<size_t>(item));
    for (size_t k = nd; k-- > 0;) {  // C-order increment: last index fastest
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

int64_t NpyArray::size() const {
  // parse_npy guarantees the product fits (it checks against the data), except for opaque
  // object arrays, whose shape is only checked not to overflow.
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

NpyArray parse_npy(const std::string& bytes, const std::string& where) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, magic, 6) != 0)
    throw InputError(fmt::format("{}: not an NPY array (bad magic)", where));
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = le16(bytes, 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputError(fmt::format("{}: truncated NPY header", where));
    header_len = le32(bytes, 8);
    header_start = 12;
  } else {
    throw InputError(fmt::format("{}: unsupported NPY version {}", where, major));
  }
  if (header_start + header_len > bytes.size())
    throw InputError(fmt::format("{}: truncated NPY header", where));
  const std::string header = bytes.substr(header_start, header_len);
  NpyArray a;
  a.descr = header_value(header, "descr", where);
  const std::string fortran = header_value(header, "fortran_order", where);
  if (fortran != "True" && fortran != "False")
    throw InputError(fmt::format("{}: bad fortran_order '{}'", where, fortran));
  a.shape = parse_shape(header_value(header, "shape", where), where);
  if (a.descr == "|O" || a.descr == "O") {  // pickled objects: kept opaque, never converted
    a.kind = 'O';
    a.itemsize = 8;
    int64_t n = 1;
    for (auto d : a.shape)
      if (__builtin_mul_overflow(n, d, &n))
        throw InputError(fmt::format("{}: NPY shape overflows 64 bits", where));
    a.data = bytes.substr(header_start + header_len);
    return a;
  }
  if (a.descr.size() < 3) throw InputError(fmt::format("{}: bad dtype '{}'", where, a.descr));
  const char order = a.descr[0];
  a.kind = a.descr[1];
  int count = 0;
  {
    auto [p, ec] = std::from_chars(a.descr.data() + 2, a.descr.data() + a.descr.size(), count);
    if (ec != std::errc() || p != a.descr.data() + a.descr.size() || count <= 0)
      throw InputError(fmt::format("{}: bad dtype '{}'", where, a.descr));
  }
  if (order == '>' && count > 1)
    throw InputError(fmt::format("{}: big-endian dtype '{}' is not supported", where, a.descr));
  switch (a.kind) {
    case 'f':
      if (count != 4 && count != 8)
        throw InputError(fmt::format("{}: unsupported float dtype '{}'", where, a.descr));
      a.itemsize = count;
      break;
    case 'i':
    case 'u':
      if (count != 1 && count != 2 && count != 4 && count != 8)
        throw InputError(fmt::format("{}: unsupported integer dtype '{}'", where, a.descr));
      a.itemsize = count;
      break;
    case 'b':
      if (count != 1) throw InputError(fmt::format("{}: bad bool dtype '{}'", where, a.descr));
      a.itemsize = 1;
      break;
    case 'U':
      if (count > (1 << 20))
        throw InputError(fmt::format("{}: string dtype '{}' is implausibly wide", where, a.descr));
      a.itemsize = 4 * count;
      break;
    default:
      throw InputError(fmt::format("{}: unsupported dtype '{}'", where, a.descr));
  }
  const size_t data_start = header_start + header_len;
  // Overflow-safe size check: the product of the shape must fit what the bytes hold.
  uint64_t items = 1;
  const uint64_t avail = (bytes.size() - data_start) / static_cast<uint64_t>(a.itemsize);
  for (auto s : a.shape) {
    if (s != 0 && items > avail / static_cast<uint64_t>(s) + 1)
      throw InputError(fmt::format("{}: shape larger than the data (truncated array?)", where));
    items *= static_cast<uint64_t>(s);
  }
  const uint64_t need = items * static_cast<uint64_t>(a.itemsize);
  if (bytes.size() - data_start < need)
    throw InputError(fmt::format("{}: truncated array data ({} of {} bytes)", where,
                                 bytes.size() - data_start, need));
  a.data = bytes.substr(data_start, need);
  if (fortran == "True") a.data = fortran_to_c(a.data, a.shape, a.itemsize);
  return a;
}

template <typename Out>
static std::vector<Out> convert(const NpyArray& a, const std::string& where, bool to_integer) {
  const int64_t n = a.size();
  std::vector<Out> out(static_cast<size_t>(n));
  const char* p = a.data.data();
  auto fail = [&](const char* why) {
    throw InputError(fmt::format("{}: dtype {} {}", where, a.descr, why));
  };
  switch (a.kind) {
    case 'f':
      if (to_integer) fail("is floating point, expected integers");
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<Out>(a.itemsize == 4 ? load_le<float>(p + 4 * i)
                                                  : load_le<double>(p + 8 * i));
      break;
    case 'i':
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = a.itemsize == 1   ? load_le<int8_t>(p + i)
                    : a.itemsize == 2 ? load_le<int16_t>(p + 2 * i)
                    : a.itemsize == 4 ? load_le<int32_t>(p + 4 * i)
                                      : load_le<int64_t>(p + 8 * i);
        out[i] = static_cast<Out>(v);
      }
      break;
    case 'u':
    case 'b':
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = a.itemsize == 1   ? load_le<uint8_t>(p + i)
                     : a.itemsize == 2 ? load_le<uint16_t>(p + 2 * i)
                     : a.itemsize == 4 ? load_le<uint32_t>(p + 4 * i)
                                       : load_le<uint64_t>(p + 8 * i);
        if (to_integer && v > static_cast<uint64_t>(INT64_MAX)) fail("holds a value beyond int64");
        out[i] = static_cast<Out>(v);
      }
      break;
    default:
      fail("is not numeric");
  }
  return out;
}

std::vector<double> NpyArray::as_double(const std::string& where) const {
  return convert<double>(*this, where, false);
}
std::vector<float> NpyArray::as_float(const std::string& where) const {
  return convert<float>(*this, where, false);
}
std::vector<int64_t> NpyArray::as_int64(const std::string& where) const {
  return convert<int64_t>(*this, where, true);
}

namespace {

std::string inflate_raw(const std::string& in, size_t offset, size_t comp, size_t uncomp,
                        const std::string& where) {
  std::string out(uncomp, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    throw InputError(fmt::format("{}: zlib init failed", where));
  // Sizes may exceed uInt for huge members; feed in slices of at most 1 GiB.
  const size_t slice = size_t{1} << 30;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + offset));
  zs.avail_in = static_cast<uInt>(std::min(comp, slice));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(std::min(uncomp, slice));
  size_t in_left = comp - zs.avail_in, out_left = uncomp - zs.avail_out;
  int rc;
  for (;;) {
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
    if (zs.avail_in == 0 && in_left > 0) {
      const size_t take = std::min(in_left, slice);
      zs.avail_in = static_cast<uInt>(take);
      in_left -= take;
    } else if (zs.avail_out == 0 && out_left > 0) {
      const size_t take = std::min(out_left, slice);
      zs.avail_out = static_cast<uInt>(take);
      out_left -= take;
    } else {
      break;  // no progress possible: truncated or corrupt
    }
  }
  const size_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    if (rc == Z_DATA_ERROR)
      throw InputError(fmt::format("{}: corrupt deflate data ({})", where,
                                   zs.msg ? zs.msg : "invalid stream"));
    throw InputError(fmt::format("{}: truncated deflate data ({} of {} bytes inflated)", where,
                                 produced, uncomp));
  }
  if (produced != uncomp)
    throw InputError(fmt::format("{}: inflated size {} differs from the recorded {}", where,
                                 produced, uncomp));
  return out;
}

}  // namespace

std::map<std::string, NpyArray> parse_npz(const std::string& bytes, const std::string& where,
                                          bool keep_all) {
  if (bytes.empty()) throw InputError(fmt::format("{}: empty file", where));
  if (bytes.size() < 22 || le32(bytes, 0) != 0x04034b50)
    throw InputError(fmt::format("{}: not a ZIP/NPZ archive", where));
  // End of central directory: last 22 + up to 65535 comment bytes.
  size_t eocd = std::string::npos;
  const size_t lo = bytes.size() > 22 + 65535 ? bytes.size() - 22 - 65535 : 0;
  for (size_t i = bytes.size() - 22 + 1; i-- > lo;) {
    if (le32(bytes, i) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos)
    throw InputError(fmt::format("{}: truncated ZIP archive (no end of central directory)", where));
  uint64_t entries = le16(bytes, eocd + 10);
  uint64_t cd_size = le32(bytes, eocd + 12);
  uint64_t cd_off = le32(bytes, eocd + 16);
  if (entries == 0xFFFF || cd_off == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) {
    // ZIP64: locator 20 bytes before the EOCD points at the ZIP64 end record.
    if (eocd < 20 || le32(bytes, eocd - 20) != 0x07064b50)
      throw InputError(fmt::format("{}: ZIP64 archive without a ZIP64 locator", where));
    const uint64_t z64 = le64(bytes, eocd - 20 + 8);
    if (z64 + 56 > bytes.size() || le32(bytes, z64) != 0x06064b50)
      throw InputError(fmt::format("{}: corrupt ZIP64 end record", where));
    entries = le64(bytes, z64 + 32);
    cd_size = le64(bytes, z64 + 40);
    cd_off = le64(bytes, z64 + 48);
  }
  if (cd_off > bytes.size() || cd_size > bytes.size() - cd_off)
    throw InputError(fmt::format("{}: central directory beyond the end of the file", where));

  std::map<std::string, NpyArray> out;
  size_t p = cd_off;
  for (uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > bytes.size() || le32(bytes, p) != 0x02014b50)
      throw InputError(fmt::format("{}: corrupt central directory entry {}", where, e));
    const uint16_t flags = le16(bytes, p + 8);
    const uint16_t method = le16(bytes, p + 10);
    const uint32_t crc = le32(bytes, p + 16);
    uint64_t comp = le32(bytes, p + 20), uncomp = le32(bytes, p + 24);
    const uint16_t name_len = le16(bytes, p + 28), extra_len = le16(bytes, p + 30),
                   comment_len = le16(bytes, p + 32);
    uint64_t local = le32(bytes, p + 42);
    if (p + 46 + name_len + extra_len + comment_len > bytes.size())
      throw InputError(fmt::format("{}: corrupt central directory entry {}", where, e));
    const std::string name = bytes.substr(p + 46, name_len);
    // ZIP64 extra field (id 1): the 0xFFFFFFFF fields, in order uncomp, comp, local offset.
    for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint16_t id = le16(bytes, x), len = le16(bytes, x + 2);
      if (x + 4 + len > p + 46 + name_len + extra_len) break;
      if (id == 1) {
        size_t q = x + 4;
        auto take = [&](uint64_t& field) {
          if (field == 0xFFFFFFFFu && q + 8 <= x + 4 + len) {
            field = le64(bytes, q);
            q += 8;
          }
        };
        take(uncomp);
        take(comp);
        take(local);
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    const std::string member = fmt::format("{}[{}]", where, name);
    if (flags & 1) throw InputError(fmt::format("{}: encrypted ZIP member", member));
    if (local + 30 > bytes.size() || le32(bytes, local) != 0x04034b50)
      throw InputError(fmt::format("{}: corrupt local header", member));
    const size_t data_off = local + 30 + le16(bytes, local + 26) + le16(bytes, local + 28);
    if (data_off > bytes.size() || comp > bytes.size() - data_off)
      throw InputError(fmt::format("{}: member data runs past the end of the file (truncated?)",
                                   member));
    std::string raw;
    if (method == 0) {
      if (comp != uncomp) throw InputError(fmt::format("{}: stored member size mismatch", member));
      raw = bytes.substr(data_off, comp);
    } else if (method == 8) {
      // Deflate expands at most ~1032:1: a larger claimed size is corrupt, and must not be
      // allocated before inflating.
      if (uncomp > comp * 1032 + 1024)
        throw InputError(fmt::format("{}: claims {} bytes from {} compressed (corrupt header)",
                                     member, uncomp, comp));
      raw = inflate_raw(bytes, data_off, comp, uncomp, member);
    } else {
      throw InputError(fmt::format("{}: unsupported ZIP compression method {}", member, method));
    }
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < raw.size(); off += (1u << 30)) {
      const size_t len = std::min<size_t>(raw.size() - off, 1u << 30);
      c = crc32(c, reinterpret_cast<const Bytef*>(raw.data() + off), static_cast<uInt>(len));
    }
    if (static_cast<uint32_t>(c) != crc)
      throw InputError(fmt::format("{}: CRC mismatch (corrupt data)", member));
    std::string key = name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    NpyArray arr = parse_npy(raw, member);
    if (!keep_all && (arr.kind == 'U' || arr.kind == 'O')) continue;
    out.emplace(std::move(key), std::move(arr));
  }
  return out;
}

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  return parse_npz(read_file(path), path);
}

std::string gunzip(const std::string& bytes, const std::string& where) {
  if (bytes.empty()) throw InputError(fmt::format("{}: empty file", where));
  std::string out;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw InputError(fmt::format("{}: zlib init failed", where));
  size_t pos = 0;
  char buf[1 << 16];
  int rc = Z_OK;
  while (true) {
    if (zs.avail_in == 0 && pos < bytes.size()) {
      const size_t take = std::min<size_t>(bytes.size() - pos, 1u << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + pos));
      zs.avail_in = static_cast<uInt>(take);
      pos += take;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are one stream (as gzip(1) reads them).
      if (zs.avail_in == 0 && pos >= bytes.size()) break;
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR) {
      const std::string msg = zs.msg ? zs.msg : "invalid data";
      inflateEnd(&zs);
      throw InputError(fmt::format("{}: corrupt gzip data ({})", where, msg));
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && pos >= bytes.size()) {
      inflateEnd(&zs);
      throw InputError(fmt::format("{}: truncated gzip data", where));
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace adgnn
