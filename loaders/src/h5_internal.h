// HDF5 helpers shared by our graph file's whole-file reader/writer (h5graph.cpp) and its row
// reader (graph_file.cpp); not part of the public interface.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "adgnn/loaders.h"
#include "fmt/format.h"

namespace adgnn {

// The graph file's format version (docs/hdf5-format.md).
inline constexpr int kGraphFormatVersion = 1;

// The root attribute of every HDF5 file we write: each of its datasets carries checksums
// (docs/hdf5-format.md). Such files use the 1.10 file format (superblock version 3); files of the
// 1.8 format (superblock 2) come from before the checksums, and their small datasets have none.
inline constexpr const char* kChecksumsAttribute = "checksums";
inline constexpr const char* kChecksumsValue = "every chunk";
// The root attribute of a file of named arrays (write_arrays_h5): a SHA-256 over its structure
// (every dataset's name, type and shape, every other root attribute). HDF5 1.10 reads an object
// header whose continuation fails its checksum as if that part were absent, so a corrupt header
// can hide datasets or attributes without an error; the digest turns that into one.
inline constexpr const char* kContentsAttribute = "contents";
// Whether `file` is of the checksummed kind. A superblock-3 file without kChecksumsAttribute is
// refused with InputError (corrupt, or not written by us); an older file gets a warning (once per
// path and process) that it cannot be verified, and false.
bool check_checksummed(hid_t file, const std::string& path);

// Why `path` cannot be read as a file ("no such file", "a folder, not a file", or the OS error
// such as "Permission denied"), or "" when it can: HDF5 itself reports all of these as "not an
// HDF5 file".
std::string unreadable_reason(const std::string& path);

// An HDF5 id closed by its close function when it goes out of scope.
struct H5Handle {
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  H5Handle() = default;
  H5Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id(o.id), close(o.close) { o.id = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    std::swap(id, o.id);
    std::swap(close, o.close);
    return *this;
  }
  ~H5Handle() {
    if (id >= 0 && close) close(id);
  }
  operator hid_t() const { return id; }
};

// HDF5 prints its error stack to stderr by default; we report errors ourselves.
inline void silence_hdf5() {
  static bool done = [] {
    // No HDF5 clean-up at exit: a file whose close failed (a full disk) stays in HDF5's tables,
    // and closing it again at exit crashes HDF5 1.10. Every file we open is closed explicitly.
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// Attributes must hold exactly one value: H5Aread writes every element it has.
inline void h5_expect_scalar(hid_t attr, const std::string& name, const std::string& path) {
  H5Handle space(H5Aget_space(attr), H5Sclose);
  if (space < 0 || H5Sget_simple_extent_npoints(space) != 1)
    throw InputError(fmt::format("{}: attribute '{}' is not a single value", path, name));
}

// A string attribute of `obj` (fixed-length or variable-length); InputError naming `path`.
inline std::string h5_attr_string(hid_t obj, const std::string& name, const std::string& path) {
  if (H5Aexists(obj, name.c_str()) <= 0)
    throw InputError(fmt::format("{}: missing attribute '{}'", path, name));
  H5Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  h5_expect_scalar(a, name, path);
  H5Handle ftype(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(ftype) != H5T_STRING)
    throw InputError(fmt::format("{}: attribute '{}' is not a string", path, name));
  if (H5Tis_variable_str(ftype) > 0) {
    H5Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mtype, H5T_VARIABLE);
    H5Tset_cset(mtype, H5Tget_cset(ftype));
    char* p = nullptr;
    if (H5Aread(a, mtype, &p) < 0)
      throw InputError(fmt::format("{}: cannot read attribute '{}'", path, name));
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(ftype);
  std::string s(n, '\0');
  if (H5Aread(a, ftype, s.data()) < 0)
    throw InputError(fmt::format("{}: cannot read attribute '{}'", path, name));
  s.resize(std::strlen(s.c_str()));
  return s;
}

inline int64_t h5_attr_int(hid_t obj, const std::string& name, const std::string& path) {
  if (H5Aexists(obj, name.c_str()) <= 0)
    throw InputError(fmt::format("{}: missing attribute '{}'", path, name));
  H5Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  h5_expect_scalar(a, name, path);
  H5Handle ftype(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(ftype) != H5T_INTEGER)
    throw InputError(fmt::format("{}: attribute '{}' is not an integer", path, name));
  int64_t v = 0;
  if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0)
    throw InputError(fmt::format("{}: cannot read attribute '{}'", path, name));
  return v;
}

}  // namespace adgnn
