// Our HDF5 graph format (docs/hdf5-format.md). Large datasets are chunked, byte-shuffled and
// deflated; chunks are compressed and decompressed in parallel (H5Dwrite_chunk/H5Dread_chunk with
// the same filter pipeline h5py applies), so loading is the fast path for big graphs.
#include <hdf5.h>
#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <unistd.h>

#include "adgnn/graph_file.h"
#include "adgnn/loaders.h"
#include "fmt/format.h"
#include "h5_internal.h"
#include "fmt/ranges.h"

namespace adgnn {

namespace {

constexpr int kFormatVersion = kGraphFormatVersion;
constexpr hsize_t kChunkBytes = 4 << 20;     // ~4 MiB of raw data per chunk
constexpr hsize_t kUnfilteredBelow = 1 << 16;  // small datasets: not deflated (checksummed)

int threads_or_default(int t) { return t > 0 ? t : std::max(1, omp_get_num_procs()); }

void shuffle_bytes(const char* in, char* out, size_t n_items, size_t item) {
  for (size_t b = 0; b < item; ++b)
    for (size_t i = 0; i < n_items; ++i) out[b * n_items + i] = in[i * item + b];
}
void unshuffle_bytes(const char* in, char* out, size_t n_items, size_t item) {
  for (size_t b = 0; b < item; ++b)
    for (size_t i = 0; i < n_items; ++i) out[i * item + b] = in[b * n_items + i];
}

class Writer {
 public:
  // Writes `path` (a temporary file); errors name `shown`, the file it becomes.
  Writer(const std::string& path, const std::string& shown, const H5WriteOptions& opt) : path_(shown), opt_(opt) {
    silence_hdf5();
    // The 1.10 file format: every piece of metadata carries a checksum (object headers, the
    // superblock, and the chunk indices: a dataset of one chunk keeps its chunk's address in its
    // checksummed header, larger ones a fixed array with checksums), so a corrupted file fails
    // HDF5's checks with an error instead of being parsed (the earliest format has none, and
    // HDF5 1.10 crashes on some corrupt headers: scripts/fuzz.sh). The data carry checksums too:
    // see create_dataset.
    H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#if H5_VERSION_GE(1, 10, 2)
    const H5F_libver_t oldest = H5F_LIBVER_V110;
#else
    const H5F_libver_t oldest = H5F_LIBVER_LATEST;
#endif
    if (fapl < 0 || H5Pset_libver_bounds(fapl, oldest, H5F_LIBVER_LATEST) < 0)
      throw InputError(fmt::format("{}: cannot set up the HDF5 file access", path_));
    // No creation times in the object headers (the root group's here, the others' below): the
    // same contents give the same bytes.
    H5Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    if (fcpl < 0 || H5Pset_obj_track_times(fcpl, false) < 0)
      throw InputError(fmt::format("{}: cannot set up the HDF5 file creation", path_));
    errno = 0;
    file_ = H5Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl), H5Fclose);
    if (file_ < 0) throw InputError(fmt::format("{}: cannot create HDF5 file ({})", path_, os_error()));
    attr_string(file_, kChecksumsAttribute, kChecksumsValue);
  }
  // An existing file of ours, opened for writing more rows (the shared writer's later turns).
  struct Existing {};
  Writer(const std::string& path, const std::string& shown, const H5WriteOptions& opt, Existing)
      : path_(shown), opt_(opt) {
    silence_hdf5();
    errno = 0;
    file_ = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (file_ < 0) throw InputError(fmt::format("{}: cannot open HDF5 file for writing ({})", path_, os_error()));
  }
  // Closes the file now, reporting a failed flush (a full disk) as an error.
  void close() {
    errno = 0;
    if (file_ >= 0 && H5Fclose(file_.id) < 0) {
      file_.id = -1;
      throw InputError(fmt::format("{}: HDF5 failed to write the file out ({})", path_, os_error()));
    }
    file_.id = -1;
  }
  hid_t file() const { return file_; }

  H5Handle group(const std::string& name) {
    H5Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
    H5Pset_obj_track_times(gcpl, false);
    H5Handle g(H5Gcreate2(file_, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose);
    check(g, "create group " + name);
    return g;
  }

  // Writes an n-dimensional array (row-major) with `item` bytes per element of HDF5 type `type`.
  void dataset(const std::string& name, hid_t type, const void* data,
               const std::vector<hsize_t>& dims) {
    hsize_t row_bytes = H5Tget_size(type);
    for (size_t k = 1; k < dims.size(); ++k) row_bytes *= dims[k];
    dataset_rows(name, type, dims, [&](hsize_t first, hsize_t rows, char* out) {
      std::memcpy(out, static_cast<const char*>(data) + first * row_bytes, rows * row_bytes);
    });
  }

  // Rows [first, first + rows) along the first dimension, written to `out`; called from several
  // threads at once for disjoint rows.
  using RowFill = std::function<void(hsize_t first, hsize_t rows, char* out)>;

  // The same, its rows made by `fill` as they are written: at most a window of chunks (or 4 MiB
  // of an unchunked dataset) is in memory at a time.
  void dataset_rows(const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                    const RowFill& fill) {
    H5Handle dset = create_dataset(name, type, dims);
    write_rows(dset, name, 0, dims[0], fill);
  }

  // An empty dataset of `dims`, chunked along the first dimension (rows stay whole) so that
  // every chunk carries a checksum: large ones byte-shuffled and deflated (zlib's adler32 over
  // each chunk), small ones, and every one when deflate is off, with HDF5's Fletcher32 filter.
  // Only an empty dataset (nothing to check) is contiguous.
  H5Handle create_dataset(const std::string& name, hid_t type, const std::vector<hsize_t>& dims) {
    const size_t item = H5Tget_size(type);
    hsize_t total = 1;
    for (auto d : dims) total *= d;
    H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                   H5Sclose);
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_obj_track_times(dcpl, false);
    if (total > 0) {
      hsize_t row_bytes = item;
      for (size_t k = 1; k < dims.size(); ++k) row_bytes *= dims[k];
      std::vector<hsize_t> chunk(dims);
      chunk[0] = std::clamp<hsize_t>(kChunkBytes / std::max<hsize_t>(row_bytes, 1), 1, dims[0]);
      check(H5Pset_chunk(dcpl, static_cast<int>(dims.size()), chunk.data()), "chunk " + name);
      if (total >= kUnfilteredBelow && opt_.deflate_level > 0) {
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, static_cast<unsigned>(opt_.deflate_level));
      } else {
        check(H5Pset_fletcher32(dcpl), "checksum " + name);
      }
    }
    H5Handle dset(H5Dcreate2(file_, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                  H5Dclose);
    check(dset, "create dataset " + name);
    return dset;
  }

  H5Handle open_dataset(const std::string& name) {
    H5Handle dset(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
    check(dset, "open dataset " + name);
    return dset;
  }

  // Rows [begin, end) along the first dimension of an existing dataset, made by `fill`. Chunks
  // inside the range are filled and compressed in parallel and written whole (H5Dwrite_chunk); a
  // chunk the range covers only in part (its other rows another process's) goes through HDF5's
  // own filters, which read, merge and rewrite it.
  void write_rows(hid_t dset, const std::string& name, hsize_t begin, hsize_t end,
                  const RowFill& fill) {
    H5Handle type(H5Dget_type(dset), H5Tclose);
    H5Handle fspace0(H5Dget_space(dset), H5Sclose);
    const int nd = H5Sget_simple_extent_ndims(fspace0);
    std::vector<hsize_t> dims(static_cast<size_t>(std::max(nd, 0)));
    H5Sget_simple_extent_dims(fspace0, dims.data(), nullptr);
    const size_t item = H5Tget_size(type);
    hsize_t row_bytes = item;
    for (size_t k = 1; k < dims.size(); ++k) row_bytes *= dims[k];
    if (end <= begin) return;
    // Rows [first, first + rows) through a hyperslab, from a buffer `fill` makes.
    auto write_slab = [&](hsize_t first, hsize_t rows) {
      std::string buf(rows * row_bytes, '\0');
      fill(first, rows, buf.data());
      std::vector<hsize_t> start(dims.size(), 0), count(dims);
      start[0] = first;
      count[0] = rows;
      H5Handle mspace(H5Screate_simple(static_cast<int>(dims.size()), count.data(), nullptr), H5Sclose);
      H5Handle fspace(H5Dget_space(dset), H5Sclose);
      H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
      check(H5Dwrite(dset, type, mspace, fspace, H5P_DEFAULT, buf.data()), "write " + name);
    };
    H5Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
    unsigned flags = 0, level = 1;
    size_t ncd = 1;
    if (H5Pget_layout(dcpl) != H5D_CHUNKED ||
        H5Pget_filter_by_id2(dcpl, H5Z_FILTER_DEFLATE, &flags, &ncd, &level, 0, nullptr, nullptr) < 0) {
      // Not deflated: HDF5 applies the (checksum) filter itself, in blocks of about 4 MiB of rows.
      const hsize_t block = std::max<hsize_t>(1, kChunkBytes / std::max<hsize_t>(row_bytes, 1));
      for (hsize_t first = begin; first < end; first += block) write_slab(first, std::min(block, end - first));
      return;
    }
    std::vector<hsize_t> chunk(dims.size());
    H5Pget_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    const hsize_t chunk_bytes = chunk[0] * row_bytes;
    // Whole chunks: those inside [begin, end) (the dataset's last chunk counts as whole when the
    // range reaches the end).
    const hsize_t c_lo = (begin + chunk[0] - 1) / chunk[0];
    const hsize_t c_hi = end == dims[0] ? (end + chunk[0] - 1) / chunk[0] : end / chunk[0];
    if (c_lo >= c_hi) {
      write_slab(begin, end - begin);
      return;
    }
    if (begin < c_lo * chunk[0]) write_slab(begin, c_lo * chunk[0] - begin);
    const int threads = threads_or_default(opt_.threads);
    const int64_t window = 4 * threads;
    std::vector<std::string> packed(static_cast<size_t>(window));
    for (int64_t first = static_cast<int64_t>(c_lo); first < static_cast<int64_t>(c_hi); first += window) {
      const int64_t last = std::min(static_cast<int64_t>(c_hi), first + window);
      bool failed = false;
#pragma omp parallel for num_threads(threads) schedule(dynamic)
      for (int64_t c = first; c < last; ++c) {
        const hsize_t start = static_cast<hsize_t>(c) * chunk[0];
        const hsize_t rows = std::min(chunk[0], dims[0] - start);
        // Edge chunks are stored at full size, zero-padded, as HDF5 itself does.
        std::string raw(chunk_bytes, '\0');
        fill(start, rows, raw.data());
        std::string shuffled(chunk_bytes, '\0');
        shuffle_bytes(raw.data(), shuffled.data(), chunk_bytes / item, item);
        uLongf bound = compressBound(static_cast<uLong>(chunk_bytes));
        std::string& out = packed[static_cast<size_t>(c - first)];
        out.resize(bound);
        if (compress2(reinterpret_cast<Bytef*>(out.data()), &bound,
                      reinterpret_cast<const Bytef*>(shuffled.data()),
                      static_cast<uLong>(chunk_bytes), static_cast<int>(level)) != Z_OK) {
#pragma omp atomic write
          failed = true;
        }
        out.resize(bound);
      }
      if (failed) throw InputError(fmt::format("{}: compression of {} failed", path_, name));
      for (int64_t c = first; c < last; ++c) {
        std::vector<hsize_t> offset(dims.size(), 0);
        offset[0] = static_cast<hsize_t>(c) * chunk[0];
        const auto& buf = packed[static_cast<size_t>(c - first)];
        check(H5Dwrite_chunk(dset, H5P_DEFAULT, 0, offset.data(), buf.size(), buf.data()),
              "write chunk of " + name);
      }
    }
    if (c_hi * chunk[0] < end) write_slab(c_hi * chunk[0], end - c_hi * chunk[0]);
  }

  // Fixed-length UTF-8 strings: they live in the attribute's own (checksummed) header message; a
  // variable-length string's bytes sit in the global heap, which has no checksum, and HDF5 1.10
  // crashes reading a corrupted one (scripts/fuzz.sh). h5py reads them as bytes.
  void attr_string(hid_t obj, const std::string& name, const std::string& value) {
    H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type, std::max<size_t>(value.size(), 1));
    H5Tset_strpad(type, H5T_STR_NULLPAD);
    H5Tset_cset(type, H5T_CSET_UTF8);
    H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    H5Handle a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    check(a, "create attribute " + name);
    const std::string padded = value.empty() ? std::string(1, '\0') : value;
    check(H5Awrite(a, type, padded.data()), "write attribute " + name);
  }
  void attr_int(hid_t obj, const std::string& name, int64_t value) {
    H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    H5Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT),
               H5Aclose);
    check(a, "create attribute " + name);
    check(H5Awrite(a, H5T_NATIVE_INT64, &value), "write attribute " + name);
  }
  void check(herr_t rc, const std::string& what) {
    if (rc < 0) throw InputError(fmt::format("{}: HDF5 failed to {} ({})", path_, what, os_error()));
  }
  void check(const H5Handle& h, const std::string& what) { check(h.id < 0 ? -1 : 0, what); }

 private:
  std::string path_;
  H5WriteOptions opt_;
  H5Handle file_;
};

class Reader {
 public:
  Reader(const std::string& path, int threads) : path_(path), threads_(threads_or_default(threads)) {
    silence_hdf5();
    const std::string why = unreadable_reason(path);
    if (!why.empty()) throw InputError(fmt::format("{}: {}", path, why));
    if (H5Fis_hdf5(path.c_str()) <= 0)
      throw InputError(fmt::format("{}: not an HDF5 file", path));
    file_ = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (file_ < 0) throw InputError(fmt::format("{}: cannot open HDF5 file (corrupt?)", path));
    file_bytes_ = std::filesystem::file_size(path);
    checksummed_ = check_checksummed(file_, path);
  }
  hid_t file() const { return file_; }
  bool checksummed() const { return checksummed_; }
  bool exists(const std::string& name) const {
    // H5Lexists on each path component (a missing parent is an error otherwise).
    std::string partial;
    size_t pos = 1;
    while (pos <= name.size()) {
      const size_t next = name.find('/', pos);
      partial = name.substr(0, next);
      if (H5Lexists(file_, partial.c_str(), H5P_DEFAULT) <= 0) return false;
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    return true;
  }

  std::vector<hsize_t> dims(const std::string& name) const {
    H5Handle d = open(name);
    H5Handle space(H5Dget_space(d), H5Sclose);
    const int nd = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> out(static_cast<size_t>(std::max(nd, 0)));
    H5Sget_simple_extent_dims(space, out.data(), nullptr);
    return out;
  }

  // Reads a dataset converted to `mem_type` (item bytes each) into `out`.
  template <typename T>
  std::vector<T> read(const std::string& name, hid_t mem_type,
                      const std::vector<hsize_t>& expect) const {
    H5Handle d = open(name);
    const auto shape = dims(name);
    if (shape != expect) {
      throw InputError(fmt::format("{}: {} has shape ({}), expected ({})", path_, name,
                                   fmt::join(shape, ", "), fmt::join(expect, ", ")));
    }
    hsize_t total = 1;
    for (auto s : shape)
      if (__builtin_mul_overflow(total, s, &total))
        throw InputError(fmt::format("{}: {} has an impossible shape", path_, name));
    // A dataset cannot hold more than the file could inflate to (deflate ~1032:1): refuse
    // corrupt shapes before allocating them.
    if (total > (file_bytes_ * 1100 + (1 << 20)) / sizeof(T))
      throw InputError(fmt::format("{}: {} claims {} elements, more than the file can hold (corrupt?)",
                                   path_, name, total));
    std::vector<T> out(static_cast<size_t>(total));
    if (total == 0) return out;
    H5Handle ftype(H5Dget_type(d), H5Tclose);
    if (H5Tget_class(ftype) != H5Tget_class(mem_type))
      throw InputError(fmt::format("{}: {} has the wrong element type", path_, name));
    if (!fast_read(d, ftype, mem_type, shape, out.data()))
      if (H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
        throw InputError(fmt::format("{}: cannot read {} (corrupt data?)", path_, name));
    return out;
  }

  std::string attr_string(hid_t obj, const std::string& name) const {
    return h5_attr_string(obj, name, path_);
  }
  int64_t attr_int(hid_t obj, const std::string& name) const { return h5_attr_int(obj, name, path_); }

  H5Handle open(const std::string& name) const {
    if (!exists(name)) throw InputError(fmt::format("{}: missing dataset {}", path_, name));
    H5Handle d(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
    if (d < 0) throw InputError(fmt::format("{}: cannot open dataset {}", path_, name));
    return d;
  }
  H5Handle open_group(const std::string& name) const {
    if (!exists(name)) throw InputError(fmt::format("{}: missing group {}", path_, name));
    H5Handle g(H5Gopen2(file_, name.c_str(), H5P_DEFAULT), H5Gclose);
    if (g < 0) throw InputError(fmt::format("{}: cannot open group {}", path_, name));
    return g;
  }

 private:
  // Parallel decompression of chunks filtered exactly [shuffle, deflate] or [deflate], chunked
  // along dim 0 only, stored in the memory type. Anything else falls back to H5Dread.
  bool fast_read(hid_t d, hid_t ftype, hid_t mem_type, const std::vector<hsize_t>& shape,
                 void* out) const {
    if (H5Tequal(ftype, mem_type) <= 0) return false;
    H5Handle dcpl(H5Dget_create_plist(d), H5Pclose);
    if (H5Pget_layout(dcpl) != H5D_CHUNKED) return false;
    std::vector<hsize_t> chunk(shape.size());
    if (H5Pget_chunk(dcpl, static_cast<int>(shape.size()), chunk.data()) !=
        static_cast<int>(shape.size()))
      return false;
    for (size_t k = 1; k < shape.size(); ++k)
      if (chunk[k] != shape[k]) return false;
    const int nf = H5Pget_nfilters(dcpl);
    bool shuffle = false;
    for (int f = 0; f < nf; ++f) {
      unsigned flags = 0, cd[8];
      size_t ncd = 8;
      const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(f), &flags, &ncd, cd, 0,
                                             nullptr, nullptr);
      if (id == H5Z_FILTER_SHUFFLE && f == 0) shuffle = true;
      else if (!(id == H5Z_FILTER_DEFLATE && f == nf - 1)) return false;
    }
    if (nf == 0 || nf > 2 || (nf == 2 && !shuffle)) return false;
    const size_t item = H5Tget_size(ftype);
    size_t row_bytes = item;
    for (size_t k = 1; k < shape.size(); ++k) row_bytes *= shape[k];
    const size_t chunk_bytes = chunk[0] * row_bytes;
    const int64_t n_chunks = static_cast<int64_t>((shape[0] + chunk[0] - 1) / chunk[0]);
    const int64_t window = 4 * threads_;
    std::vector<std::string> raw(static_cast<size_t>(window));
    std::vector<uint32_t> masks(static_cast<size_t>(window));
    for (int64_t first = 0; first < n_chunks; first += window) {
      const int64_t last = std::min(n_chunks, first + window);
      for (int64_t c = first; c < last; ++c) {
        std::vector<hsize_t> offset(shape.size(), 0);
        offset[0] = static_cast<hsize_t>(c) * chunk[0];
        hsize_t nbytes = 0;
        if (H5Dget_chunk_storage_size(d, offset.data(), &nbytes) < 0) return false;
        auto& buf = raw[static_cast<size_t>(c - first)];
        buf.resize(nbytes);
        if (H5Dread_chunk(d, H5P_DEFAULT, offset.data(), &masks[static_cast<size_t>(c - first)],
                          buf.data()) < 0)
          return false;
        if (masks[static_cast<size_t>(c - first)] != 0) return false;  // a filter was skipped
      }
      bool failed = false;
#pragma omp parallel for num_threads(threads_) schedule(dynamic)
      for (int64_t c = first; c < last; ++c) {
        std::string plain(chunk_bytes, '\0');
        uLongf len = static_cast<uLongf>(chunk_bytes);
        const auto& buf = raw[static_cast<size_t>(c - first)];
        if (uncompress(reinterpret_cast<Bytef*>(plain.data()), &len,
                       reinterpret_cast<const Bytef*>(buf.data()),
                       static_cast<uLong>(buf.size())) != Z_OK ||
            len != chunk_bytes) {
#pragma omp atomic write
          failed = true;
          continue;
        }
        const hsize_t begin = static_cast<hsize_t>(c) * chunk[0];
        const size_t rows = static_cast<size_t>(std::min<hsize_t>(chunk[0], shape[0] - begin));
        char* dst = static_cast<char*>(out) + begin * row_bytes;
        if (shuffle) {
          std::string un(chunk_bytes, '\0');
          unshuffle_bytes(plain.data(), un.data(), chunk_bytes / item, item);
          std::memcpy(dst, un.data(), rows * row_bytes);
        } else {
          std::memcpy(dst, plain.data(), rows * row_bytes);
        }
      }
      if (failed) throw InputError(fmt::format("{}: corrupt compressed chunk", path_));
    }
    return true;
  }

  std::string path_;
  int threads_;
  H5Handle file_;
  uintmax_t file_bytes_ = 0;
  bool checksummed_ = false;
};

}  // namespace

namespace {

hid_t h5_type(const std::string& dtype, const std::string& where) {
  if (dtype == "f32") return H5T_IEEE_F32LE;
  if (dtype == "f64") return H5T_IEEE_F64LE;
  if (dtype == "i64") return H5T_STD_I64LE;
  if (dtype == "u8") return H5T_STD_U8LE;
  throw InputError(fmt::format("{}: unsupported array dtype '{}'", where, dtype));
}

size_t dtype_size(const std::string& dtype) { return dtype == "u8" ? 1 : dtype == "f32" ? 4 : 8; }

}  // namespace

std::string unreadable_reason(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "no such file";
  if (std::filesystem::is_directory(path, ec)) return "a folder, not a file";
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return fmt::format("cannot open ({})", os_error());
  std::fclose(f);
  return "";
}

bool check_checksummed(hid_t file, const std::string& path) {
  H5F_info2_t info;
  if (H5Fget_info2(file, &info) < 0)
    throw InputError(fmt::format("{}: cannot read the HDF5 superblock (corrupt?)", path));
  const bool marked = H5Aexists(file, kChecksumsAttribute) > 0;
  if (info.super.version >= 3) {
    if (!marked)
      throw InputError(fmt::format("{}: no '{}' attribute (corrupt, or not written by adgnn)", path,
                                   kChecksumsAttribute));
    return true;
  }
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(path).second)
    std::fprintf(stderr,
                 "adgnn: warning: %s: written without checksums on its small datasets, so their "
                 "corruption cannot be detected (write the file again to add them)\n",
                 path.c_str());
  return false;
}

namespace {

// The digest stored as kContentsAttribute: names, types and shapes of the arrays, and the root
// attributes but itself.
std::string contents_digest(const std::map<std::string, H5Array>& arrays,
                            const std::map<std::string, std::string>& attrs) {
  std::string s;
  for (const auto& [name, a] : arrays) s += fmt::format("d {} {} {}\n", name, a.dtype, fmt::join(a.shape, "x"));
  for (const auto& [k, v] : attrs)
    if (k != kContentsAttribute) s += fmt::format("a {}={}\n", k, v);
  return sha256_hex(s);
}

}  // namespace

// Runs write(tmp) on a temporary file beside `path`, then renames it into place; on any failure
// the temporary file is removed and an existing `path` is left untouched.
template <typename Fn>
void write_atomically(const std::string& path, Fn&& write) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  try {
    write(tmp);
  } catch (...) {
    remove_temporary(tmp);
    throw;
  }
  commit_file(tmp, path);
}

void write_arrays_h5(const std::string& path, const std::map<std::string, H5Array>& arrays,
                     const std::map<std::string, std::string>& attrs) {
  write_atomically(path, [&](const std::string& tmp) {
    Writer w(tmp, path, H5WriteOptions{});
    for (const auto& [k, v] : attrs) w.attr_string(w.file(), k, v);
    for (const auto& [name, a] : arrays) {
      std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
      hsize_t total = 1;
      for (auto d : dims) total *= d;
      if (total * dtype_size(a.dtype) != a.bytes.size())
        throw InputError(fmt::format("{}: array {} holds {} bytes for shape of {} elements", path,
                                     name, a.bytes.size(), total));
      // Intermediate groups ("a/b/c") are created on the way.
      for (size_t p = name.find('/', 1); p != std::string::npos; p = name.find('/', p + 1)) {
        const std::string grp = "/" + name.substr(0, p);
        if (H5Lexists(w.file(), grp.c_str(), H5P_DEFAULT) <= 0) w.group(grp);
      }
      w.dataset("/" + name, h5_type(a.dtype, path), a.bytes.data(), dims);
    }
    std::map<std::string, std::string> all(attrs);
    all[kChecksumsAttribute] = kChecksumsValue;
    w.attr_string(w.file(), kContentsAttribute, contents_digest(arrays, all));
    w.close();
  });
}

namespace {

// Every root attribute, as strings.
void read_root_attributes(const Reader& r, const std::string& path, std::map<std::string, std::string>& out) {
  H5O_info_t info;
  if (H5Oget_info2(r.file(), &info, H5O_INFO_NUM_ATTRS) < 0)
    throw InputError(fmt::format("{}: cannot read the root group's attributes (corrupt?)", path));
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    char name[512];
    if (H5Aget_name_by_idx(r.file(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name),
                           H5P_DEFAULT) < 0)
      throw InputError(fmt::format("{}: cannot read attribute {} of the root group (corrupt?)", path, i));
    out[name] = r.attr_string(r.file(), name);
  }
}

}  // namespace

std::map<std::string, H5Array> read_arrays_h5(const std::string& path,
                                              std::map<std::string, std::string>* attrs) {
  Reader r(path, 0);
  std::map<std::string, H5Array> out;
  // Walk every dataset in the file.
  struct Ctx {
    std::vector<std::string> names;
  } ctx;
  if (H5Ovisit2(
          r.file(), H5_INDEX_NAME, H5_ITER_INC,
          [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
            if (info->type == H5O_TYPE_DATASET) static_cast<Ctx*>(data)->names.push_back(name);
            return 0;
          },
          &ctx, H5O_INFO_BASIC) < 0)
    throw InputError(fmt::format("{}: cannot list the datasets (corrupt?)", path));
  for (const auto& name : ctx.names) {
    const std::string full = "/" + name;
    H5Handle d = r.open(full);
    H5Handle ft(H5Dget_type(d), H5Tclose);
    H5Array a;
    const H5T_class_t cls = H5Tget_class(ft);
    const size_t sz = H5Tget_size(ft);
    hid_t mem;
    if (cls == H5T_FLOAT && sz == 4) a.dtype = "f32", mem = H5T_NATIVE_FLOAT;
    else if (cls == H5T_FLOAT && sz == 8) a.dtype = "f64", mem = H5T_NATIVE_DOUBLE;
    else if (cls == H5T_INTEGER && sz == 8) a.dtype = "i64", mem = H5T_NATIVE_INT64;
    else if (cls == H5T_INTEGER && sz == 1) a.dtype = "u8", mem = H5T_NATIVE_UINT8;
    else throw InputError(fmt::format("{}: dataset {} has an unsupported type", path, full));
    const auto dims = r.dims(full);
    a.shape.assign(dims.begin(), dims.end());
    if (a.dtype == "u8") {
      const auto v = r.read<uint8_t>(full, mem, dims);
      a.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size());
    } else if (a.dtype == "f32") {
      const auto v = r.read<float>(full, mem, dims);
      a.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    } else if (a.dtype == "f64") {
      const auto v = r.read<double>(full, mem, dims);
      a.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 8);
    } else {
      const auto v = r.read<int64_t>(full, mem, dims);
      a.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 8);
    }
    out.emplace(name, std::move(a));
  }
  if (!r.checksummed() && !attrs) return out;
  std::map<std::string, std::string> all;
  read_root_attributes(r, path, all);
  if (r.checksummed()) {
    const auto stored = all.find(kContentsAttribute);
    if (stored == all.end() || stored->second != contents_digest(out, all))
      throw InputError(fmt::format("{}: its datasets and attributes do not match the '{}' digest "
                                   "(corrupt)", path, kContentsAttribute));
  }
  if (attrs) {
    all.erase(kContentsAttribute);
    all.erase(kChecksumsAttribute);
    *attrs = std::move(all);
  }
  return out;
}

namespace {

// The root attributes but the graph hash.
void write_attributes(Writer& w, const Graph& g) {
  const hid_t root = w.file();
  w.attr_string(root, "format", "adgnn-graph");
  w.attr_int(root, "format_version", kFormatVersion);
  w.attr_string(root, "name", g.name);
  w.attr_string(root, "source", g.source);
  w.attr_string(root, "source_sha256", g.source_sha256);
  w.attr_int(root, "directed", g.directed ? 1 : 0);
  w.attr_int(root, "num_nodes", g.num_nodes);
  w.attr_int(root, "num_classes", g.num_classes);
}

// Labels, original ids and split masks.
void write_node_arrays(Writer& w, const Graph& g) {
  const hsize_t n = static_cast<hsize_t>(g.num_nodes);
  w.dataset("/labels", H5T_STD_I64LE, g.labels.data(), {n});
  if (!g.original_id.empty()) w.dataset("/original_id", H5T_STD_I64LE, g.original_id.data(), {n});
  auto grp = w.group("/splits");
  for (const auto& s : g.splits) {
    auto sg = w.group("/splits/" + s.name);
    const std::vector<hsize_t> dims{static_cast<hsize_t>(s.count), n};
    w.dataset("/splits/" + s.name + "/train", H5T_STD_U8LE, s.train.data(), dims);
    w.dataset("/splits/" + s.name + "/val", H5T_STD_U8LE, s.val.data(), dims);
    w.dataset("/splits/" + s.name + "/test", H5T_STD_U8LE, s.test.data(), dims);
  }
}

void write_features_group(Writer& w, const Features& f) {
  auto grp = w.group("/features");
  w.attr_string(grp, "layout", f.sparse ? "csr" : "dense");
  w.attr_int(grp, "rows", f.rows);
  w.attr_int(grp, "cols", f.cols);
}

}  // namespace

void write_graph_h5(const Graph& g, const std::string& path, const H5WriteOptions& opt) {
  g.validate(path);
  write_atomically(path, [&](const std::string& tmp) {
    Writer w(tmp, path, opt);
    write_attributes(w, g);
    w.attr_string(w.file(), "graph_hash", graph_fingerprint(g));
    const hsize_t n = static_cast<hsize_t>(g.num_nodes);
    {
      auto grp = w.group("/graph");
      w.dataset("/graph/indptr", H5T_STD_I64LE, g.adj.indptr.data(), {n + 1});
      w.dataset("/graph/indices", H5T_STD_I32LE, g.adj.indices.data(),
                {static_cast<hsize_t>(g.adj.nnz())});
    }
    write_features_group(w, g.features);
    if (g.features.sparse) {
      const auto& c = g.features.csr;
      std::vector<float> ones;
      const float* vals = c.values.data();
      if (c.values.empty()) {
        ones.assign(c.indices.size(), 1.0f);
        vals = ones.data();
      }
      w.dataset("/features/indptr", H5T_STD_I64LE, c.indptr.data(), {n + 1});
      w.dataset("/features/indices", H5T_STD_I32LE, c.indices.data(),
                {static_cast<hsize_t>(c.nnz())});
      w.dataset("/features/data", H5T_IEEE_F32LE, vals, {static_cast<hsize_t>(c.nnz())});
    } else {
      w.dataset("/features/values", H5T_IEEE_F32LE, g.features.dense.data(),
                {n, static_cast<hsize_t>(g.features.cols)});
    }
    write_node_arrays(w, g);
    w.close();
  });
}

void write_graph_h5(const Graph& share, int64_t first_row, const DenseRowSource& rows,
                    const std::string& path, ProcessGroup& group, const H5WriteOptions& opt) {
  const int P = group.size(), me = group.rank();
  const int64_t n = share.num_nodes, cols = share.features.cols;
  // Every process's rows and entries, and process 0's pid for the temporary file's name.
  std::vector<int64_t> counts(static_cast<size_t>(2 * P + 1), 0);
  counts[2 * me] = share.adj.rows;
  counts[2 * me + 1] = share.adj.nnz();
  if (me == 0) counts[2 * P] = ::getpid();
  group.sum(counts);
  int64_t row0 = 0, edge0 = 0, total_rows = 0, nnz = 0;
  for (int p = 0; p < P; ++p) {
    if (p < me) row0 += counts[2 * p], edge0 += counts[2 * p + 1];
    total_rows += counts[2 * p];
    nnz += counts[2 * p + 1];
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, counts[2 * P]);
  // A failure on any process becomes an InputError on every process; the file is removed.
  auto step = [&](auto&& fn) {
    std::string why;
    try {
      fn();
    } catch (const std::exception& e) {
      why = e.what();
    }
    const std::string first = group.first_error(why);
    if (!first.empty()) {
      if (me == 0) remove_temporary(tmp);
      throw InputError(first);
    }
  };
  step([&] {
    if (row0 != first_row || total_rows != n || share.adj.cols != n ||
        static_cast<int64_t>(share.adj.indptr.size()) != share.adj.rows + 1)
      throw std::invalid_argument(fmt::format(
          "write_graph_h5: rows [{}, {}) of {} do not continue the previous process's", first_row,
          first_row + share.adj.rows, n));
    if (static_cast<int64_t>(share.labels.size()) != n)
      throw std::invalid_argument(fmt::format("write_graph_h5: {} labels for {} nodes", share.labels.size(), n));
    if (share.features.sparse || !share.features.dense.empty() || share.features.rows != n)
      throw std::invalid_argument("write_graph_h5: the shared writer takes dense features from a row source");
    if (me != 0) return;
    Writer w(tmp, path, opt);
    write_attributes(w, share);
    {
      auto grp = w.group("/graph");
      w.create_dataset("/graph/indptr", H5T_STD_I64LE, {static_cast<hsize_t>(n) + 1});
      w.create_dataset("/graph/indices", H5T_STD_I32LE, {static_cast<hsize_t>(nnz)});
    }
    write_features_group(w, share.features);
    w.create_dataset("/features/values", H5T_IEEE_F32LE,
                     {static_cast<hsize_t>(n), static_cast<hsize_t>(cols)});
    write_node_arrays(w, share);
    w.close();
  });
  // One process after another: HDF5 files have one writer at a time.
  for (int turn = 0; turn < P; ++turn)
    step([&] {
      if (me != turn) return;
      Writer w(tmp, path, opt, Writer::Existing{});
      const int64_t count = share.adj.rows;
      // The last process also writes indptr's closing entry.
      const int64_t indptr_rows = count + (me == P - 1 ? 1 : 0);
      w.write_rows(w.open_dataset("/graph/indptr"), "/graph/indptr", static_cast<hsize_t>(first_row),
                   static_cast<hsize_t>(first_row + indptr_rows), [&](hsize_t first, hsize_t k, char* out) {
                     auto* dst = reinterpret_cast<int64_t*>(out);
                     for (hsize_t i = 0; i < k; ++i)
                       dst[i] = edge0 + share.adj.indptr[first - static_cast<hsize_t>(first_row) + i];
                   });
      w.write_rows(w.open_dataset("/graph/indices"), "/graph/indices", static_cast<hsize_t>(edge0),
                   static_cast<hsize_t>(edge0 + share.adj.nnz()), [&](hsize_t first, hsize_t k, char* out) {
                     std::memcpy(out, share.adj.indices.data() + (first - static_cast<hsize_t>(edge0)),
                                 k * sizeof(int32_t));
                   });
      w.write_rows(w.open_dataset("/features/values"), "/features/values", static_cast<hsize_t>(first_row),
                   static_cast<hsize_t>(first_row + count), [&](hsize_t first, hsize_t k, char* out) {
                     rows(static_cast<int64_t>(first), static_cast<int64_t>(k), reinterpret_cast<float*>(out));
                   });
      w.close();
    });
  // The fingerprint (the structure as the file now holds it, the features as `rows` made them), then
  // the file into place.
  step([&] {
    if (me != 0) return;
    const std::string hash = graph_fingerprint(GraphFileReader(tmp), &rows, opt.threads);
    Writer w(tmp, path, opt, Writer::Existing{});
    w.attr_string(w.file(), "graph_hash", hash);
    w.close();
    commit_file(tmp, path);
  });
}

std::string stored_graph_hash(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "";
  silence_hdf5();
  if (H5Fis_hdf5(path.c_str()) <= 0) return "";
  Reader r(path, 1);
  const hid_t root = r.file();
  if (H5Aexists(root, "format") <= 0 || r.attr_string(root, "format") != "adgnn-graph") return "";
  if (H5Aexists(root, "graph_hash") <= 0) return "";
  return r.attr_string(root, "graph_hash");
}

Graph read_graph_h5(const std::string& path, int threads) {
  Reader r(path, threads);
  const hid_t root = r.file();
  if (H5Aexists(root, "format") <= 0 || r.attr_string(root, "format") != "adgnn-graph")
    throw InputError(fmt::format("{}: not an adgnn graph file (no format='adgnn-graph')", path));
  const int64_t version = r.attr_int(root, "format_version");
  if (version != kFormatVersion)
    throw InputError(fmt::format("{}: format version {} is not supported (this build reads {})",
                                 path, version, kFormatVersion));
  Graph g;
  g.name = r.attr_string(root, "name");
  g.source = r.attr_string(root, "source");
  g.source_sha256 = r.attr_string(root, "source_sha256");
  g.directed = r.attr_int(root, "directed") != 0;
  g.num_nodes = r.attr_int(root, "num_nodes");
  g.num_classes = r.attr_int(root, "num_classes");
  if (g.num_nodes <= 0 || g.num_nodes > INT32_MAX)
    throw InputError(fmt::format("{}: num_nodes {} out of range", path, g.num_nodes));
  if (g.num_classes < 0 || g.num_classes > kMaxClasses)
    throw InputError(fmt::format("{}: num_classes {}: must be in [0, {}]", path, g.num_classes, kMaxClasses));
  const hsize_t n = static_cast<hsize_t>(g.num_nodes);
  g.adj.rows = g.adj.cols = g.num_nodes;
  g.adj.indptr = r.read<int64_t>("/graph/indptr", H5T_NATIVE_INT64, {n + 1});
  const auto idims = r.dims("/graph/indices");
  if (idims.size() != 1) throw InputError(fmt::format("{}: /graph/indices is not 1-D", path));
  g.adj.indices = r.read<int32_t>("/graph/indices", H5T_NATIVE_INT32, idims);
  {
    auto grp = r.open_group("/features");
    const std::string layout = r.attr_string(grp, "layout");
    g.features.rows = r.attr_int(grp, "rows");
    g.features.cols = r.attr_int(grp, "cols");
    if (g.features.rows != g.num_nodes || g.features.cols < 0)
      throw InputError(fmt::format("{}: /features is {} x {} for {} nodes", path,
                                   g.features.rows, g.features.cols, g.num_nodes));
    const hsize_t f = static_cast<hsize_t>(g.features.cols);
    if (layout == "dense") {
      g.features.dense = r.read<float>("/features/values", H5T_NATIVE_FLOAT, {n, f});
    } else if (layout == "csr") {
      g.features.sparse = true;
      auto& c = g.features.csr;
      c.rows = g.features.rows;
      c.cols = g.features.cols;
      c.indptr = r.read<int64_t>("/features/indptr", H5T_NATIVE_INT64, {n + 1});
      const auto nnz = r.dims("/features/indices");
      if (nnz.size() != 1) throw InputError(fmt::format("{}: /features/indices is not 1-D", path));
      c.indices = r.read<int32_t>("/features/indices", H5T_NATIVE_INT32, nnz);
      c.values = r.read<float>("/features/data", H5T_NATIVE_FLOAT, nnz);
    } else {
      throw InputError(fmt::format("{}: /features layout '{}' is neither dense nor csr", path,
                                   layout));
    }
  }
  g.labels = r.read<int64_t>("/labels", H5T_NATIVE_INT64, {n});
  if (r.exists("/original_id")) g.original_id = r.read<int64_t>("/original_id", H5T_NATIVE_INT64, {n});
  if (r.exists("/splits")) {
    auto grp = r.open_group("/splits");
    H5G_info_t info;
    H5Gget_info(grp, &info);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[256];
      if (H5Lget_name_by_idx(grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name),
                             H5P_DEFAULT) < 0)
        throw InputError(fmt::format("{}: cannot list /splits", path));
      SplitSet s;
      s.name = name;
      const std::string base = "/splits/" + s.name;
      const auto d = r.dims(base + "/train");
      if (d.size() != 2 || d[1] != n)
        throw InputError(fmt::format("{}: {}/train must be (splits, {})", path, base, n));
      s.count = static_cast<int64_t>(d[0]);
      s.train = r.read<uint8_t>(base + "/train", H5T_NATIVE_UINT8, d);
      s.val = r.read<uint8_t>(base + "/val", H5T_NATIVE_UINT8, d);
      s.test = r.read<uint8_t>(base + "/test", H5T_NATIVE_UINT8, d);
      g.splits.push_back(std::move(s));
    }
  }
  g.validate(path);
  return g;
}

}  // namespace adgnn
