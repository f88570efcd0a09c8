// GraphFileReader: our HDF5 graph file read by rows. Every read walks the requested elements in
// windows of one chunk along the indexed dimension (HDF5 decompresses each chunk it touches once
// per read call) and copies out what was asked for, so a scattered request costs the chunks it
// touches, never the whole dataset.
#include <algorithm>
#include <limits>
#include <numeric>

#include "adgnn/graph_file.h"
#include "h5_internal.h"

namespace adgnn {

namespace {

// Sorted, disjoint element runs [begin, end) along a dataset's indexed dimension.
using Runs = std::vector<std::pair<int64_t, int64_t>>;

// The distinct ids in ascending order, merged into runs of consecutive ids.
Runs runs_of(const std::vector<int64_t>& sorted_unique) {
  Runs r;
  for (int64_t id : sorted_unique) {
    if (!r.empty() && r.back().second == id) ++r.back().second;
    else r.emplace_back(id, id + 1);
  }
  return r;
}

}  // namespace

int64_t GraphFileInfo::memory_bytes() const {
  int64_t masks = 0;
  for (const auto& f : split_families) masks += 3 * f.second * num_nodes;
  const int64_t features = sparse_features ? (num_nodes + 1) * 8 + feature_nnz * 8
                                           : num_nodes * feature_cols * 4;
  return (num_nodes + 1) * 8 + stored_edges * 4 + features + num_nodes * 8 + masks;
}

struct GraphFileReader::Impl {
  GraphFileInfo info;
  H5Handle file;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", info.path, what));
  }

  struct Dataset {
    H5Handle d;
    std::vector<hsize_t> dims;
    hsize_t window = 1;  // elements of the indexed dimension per read
  };
  Dataset open(const std::string& name, int axis) const {
    Dataset ds;
    // H5Lexists fails on a path whose parent group is missing: test the parents first.
    for (size_t p = name.find('/', 1); p != std::string::npos; p = name.find('/', p + 1))
      if (H5Lexists(file, name.substr(0, p).c_str(), H5P_DEFAULT) <= 0)
        fail(fmt::format("missing dataset {}", name));
    if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) fail(fmt::format("missing dataset {}", name));
    ds.d = H5Handle(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
    if (ds.d < 0) fail(fmt::format("cannot open dataset {}", name));
    H5Handle space(H5Dget_space(ds.d), H5Sclose);
    const int nd = H5Sget_simple_extent_ndims(space);
    if (nd < 1 || nd > 2 || axis >= nd) fail(fmt::format("dataset {} has {} dimensions", name, nd));
    ds.dims.resize(static_cast<size_t>(nd));
    H5Sget_simple_extent_dims(space, ds.dims.data(), nullptr);
    H5Handle dcpl(H5Dget_create_plist(ds.d), H5Pclose);
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(ds.dims.size());
      H5Pget_chunk(dcpl, nd, chunk.data());
      ds.window = std::max<hsize_t>(chunk[static_cast<size_t>(axis)], 1);
    } else {
      // Contiguous: about 4 MiB per read.
      hsize_t row = H5Tget_size(H5Handle(H5Dget_type(ds.d), H5Tclose));
      if (axis == 0 && nd == 2) row *= ds.dims[1];
      ds.window = std::max<hsize_t>((4u << 20) / std::max<hsize_t>(row, 1), 1);
    }
    return ds;
  }

  // The elements of `runs` along `axis` of `name`: for axis 0, whole rows (of dims[1] elements
  // for a 2-D dataset); for axis 1, the entries of row `fixed` of a 2-D dataset. Concatenated in
  // run order.
  template <class T>
  std::vector<T> read_runs(const std::string& name, hid_t mem_type, const Runs& runs, int axis = 0,
                           hsize_t fixed = 0) const {
    const Dataset ds = open(name, axis);
    const hsize_t extent = ds.dims[static_cast<size_t>(axis)];
    const hsize_t row = (axis == 0 && ds.dims.size() == 2) ? ds.dims[1] : 1;
    if (axis == 1 && fixed >= ds.dims[0]) fail(fmt::format("{} has no row {}", name, fixed));
    H5Handle ftype(H5Dget_type(ds.d), H5Tclose);
    if (H5Tget_class(ftype) != H5Tget_class(mem_type))
      fail(fmt::format("{} has the wrong element type", name));
    int64_t total = 0;
    for (const auto& [b, e] : runs) {
      if (b < 0 || e < b || static_cast<hsize_t>(e) > extent)
        fail(fmt::format("{}: elements [{}, {}) outside its {} (corrupt index?)", name, b, e, extent));
      total += e - b;
    }
    std::vector<T> out(static_cast<size_t>(total) * row);
    std::vector<T> buf;
    H5Handle fspace(H5Dget_space(ds.d), H5Sclose);
    size_t r = 0;
    int64_t pos = runs.empty() ? 0 : runs[0].first;  // next element to copy
    T* dst = out.data();
    while (r < runs.size()) {
      const hsize_t wb = static_cast<hsize_t>(pos) / ds.window * ds.window;
      const hsize_t we = std::min(extent, wb + ds.window);
      const hsize_t len = we - wb;
      buf.resize(static_cast<size_t>(len * row));
      std::vector<hsize_t> start(ds.dims.size(), 0), count(ds.dims);
      start[static_cast<size_t>(axis)] = wb;
      count[static_cast<size_t>(axis)] = len;
      if (axis == 1) start[0] = fixed, count[0] = 1;
      const hsize_t mdims = len * row;
      H5Handle mspace(H5Screate_simple(1, &mdims, nullptr), H5Sclose);
      if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
          H5Dread(ds.d, mem_type, mspace, fspace, H5P_DEFAULT, buf.data()) < 0)
        fail(fmt::format("cannot read {} [{}, {}) (corrupt data?)", name, wb, we));
      // Copy every run part inside [wb, we).
      while (r < runs.size() && static_cast<hsize_t>(pos) < we) {
        const int64_t stop = std::min<int64_t>(runs[r].second, static_cast<int64_t>(we));
        const size_t n = static_cast<size_t>((stop - pos) * static_cast<int64_t>(row));
        std::copy_n(buf.data() + (static_cast<hsize_t>(pos) - wb) * row, n, dst);
        dst += n;
        pos = stop;
        if (pos == runs[r].second && ++r < runs.size()) pos = runs[r].first;
      }
    }
    return out;
  }

  // ids -> (distinct ids ascending, position of ids[i] among them).
  std::pair<std::vector<int64_t>, std::vector<size_t>> distinct(const std::vector<int64_t>& ids) const {
    std::vector<int64_t> u(ids);
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    if (!u.empty() && (u.front() < 0 || u.back() >= info.num_nodes))
      fail(fmt::format("node id outside [0, {}) requested", info.num_nodes));
    std::vector<size_t> at(ids.size());
    for (size_t i = 0; i < ids.size(); ++i)
      at[i] = static_cast<size_t>(std::lower_bound(u.begin(), u.end(), ids[i]) - u.begin());
    return {std::move(u), std::move(at)};
  }
};

GraphFileReader::GraphFileReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  silence_hdf5();
  Impl& m = *impl_;
  GraphFileInfo& in = m.info;
  in.path = path;
  const std::string why = unreadable_reason(path);
  if (!why.empty()) m.fail(why);
  if (H5Fis_hdf5(path.c_str()) <= 0) m.fail("not an HDF5 file");
  m.file = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (m.file < 0) m.fail("cannot open HDF5 file (corrupt?)");
  const hid_t root = m.file;
  check_checksummed(root, path);
  if (H5Aexists(root, "format") <= 0 || h5_attr_string(root, "format", path) != "adgnn-graph")
    m.fail("not an adgnn graph file (no format='adgnn-graph')");
  const int64_t version = h5_attr_int(root, "format_version", path);
  if (version != kGraphFormatVersion)
    m.fail(fmt::format("format version {} is not supported (this build reads {})", version,
                       kGraphFormatVersion));
  in.name = h5_attr_string(root, "name", path);
  in.source = h5_attr_string(root, "source", path);
  in.source_sha256 = h5_attr_string(root, "source_sha256", path);
  if (H5Aexists(root, "graph_hash") > 0) in.graph_hash = h5_attr_string(root, "graph_hash", path);
  in.directed = h5_attr_int(root, "directed", path) != 0;
  in.num_nodes = h5_attr_int(root, "num_nodes", path);
  in.num_classes = h5_attr_int(root, "num_classes", path);
  if (in.num_nodes <= 0 || in.num_nodes > std::numeric_limits<int32_t>::max())
    m.fail(fmt::format("num_nodes {} out of range", in.num_nodes));
  if (in.num_classes < 0 || in.num_classes > kMaxClasses)
    m.fail(fmt::format("num_classes {}: must be in [0, {}]", in.num_classes, kMaxClasses));
  const hsize_t n = static_cast<hsize_t>(in.num_nodes);
  auto dims = [&](const std::string& name) {
    return m.open(name, 0).dims;
  };
  if (dims("/graph/indptr") != std::vector<hsize_t>{n + 1}) m.fail("/graph/indptr is not (num_nodes + 1,)");
  const auto e = dims("/graph/indices");
  if (e.size() != 1) m.fail("/graph/indices is not 1-D");
  in.stored_edges = static_cast<int64_t>(e[0]);
  {
    if (H5Lexists(root, "/features", H5P_DEFAULT) <= 0) m.fail("missing group /features");
    H5Handle grp(H5Gopen2(root, "/features", H5P_DEFAULT), H5Gclose);
    const std::string layout = h5_attr_string(grp, "layout", path);
    in.feature_cols = h5_attr_int(grp, "cols", path);
    if (h5_attr_int(grp, "rows", path) != in.num_nodes || in.feature_cols < 0)
      m.fail(fmt::format("/features is {} x {} for {} nodes", h5_attr_int(grp, "rows", path),
                         in.feature_cols, in.num_nodes));
    if (layout == "csr") {
      in.sparse_features = true;
      const auto nnz = dims("/features/indices");
      if (nnz.size() != 1 || dims("/features/data") != nnz) m.fail("/features/indices and data differ in shape");
      in.feature_nnz = static_cast<int64_t>(nnz[0]);
    } else if (layout == "dense") {
      if (dims("/features/values") != std::vector<hsize_t>{n, static_cast<hsize_t>(in.feature_cols)})
        m.fail("/features/values is not (num_nodes, cols)");
    } else {
      m.fail(fmt::format("/features layout '{}' is neither dense nor csr", layout));
    }
  }
  if (dims("/labels") != std::vector<hsize_t>{n}) m.fail("/labels is not (num_nodes,)");
  in.has_original_id = H5Lexists(root, "/original_id", H5P_DEFAULT) > 0;
  if (H5Lexists(root, "/splits", H5P_DEFAULT) > 0) {
    H5Handle grp(H5Gopen2(root, "/splits", H5P_DEFAULT), H5Gclose);
    H5G_info_t ginfo;
    H5Gget_info(grp, &ginfo);
    for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
      char name[256];
      if (H5Lget_name_by_idx(grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name),
                             H5P_DEFAULT) < 0)
        m.fail("cannot list /splits");
      const std::string base = std::string("/splits/") + name;
      const auto d = dims(base + "/train");
      if (d.size() != 2 || d[1] != n || dims(base + "/val") != d || dims(base + "/test") != d)
        m.fail(fmt::format("{} masks must be (splits, {})", base, n));
      in.split_families.emplace_back(name, static_cast<int64_t>(d[0]));
    }
  }
}

GraphFileReader::~GraphFileReader() = default;

const GraphFileInfo& GraphFileReader::info() const { return impl_->info; }

Csr GraphFileReader::adjacency_rows(int64_t begin, int64_t end) const {
  const Impl& m = *impl_;
  const int64_t n = m.info.num_nodes;
  if (begin < 0 || end < begin || end > n)
    m.fail(fmt::format("adjacency rows [{}, {}) outside [0, {})", begin, end, n));
  Csr c;
  c.rows = end - begin;
  c.cols = n;
  c.indptr = m.read_runs<int64_t>("/graph/indptr", H5T_NATIVE_INT64, {{begin, end + 1}});
  for (int64_t r = 0; r < c.rows; ++r)
    if (c.indptr[r + 1] < c.indptr[r])
      m.fail(fmt::format("/graph/indptr decreases at row {}", begin + r));
  const int64_t first = c.indptr.front(), last = c.indptr.back();
  if (first < 0 || last > m.info.stored_edges)
    m.fail(fmt::format("/graph/indptr points outside /graph/indices ({} entries)", m.info.stored_edges));
  for (auto& p : c.indptr) p -= first;
  c.indices = m.read_runs<int32_t>("/graph/indices", H5T_NATIVE_INT32, {{first, last}});
  for (int32_t v : c.indices)
    if (v < 0 || v >= n) m.fail(fmt::format("/graph/indices holds {}, outside [0, {})", v, n));
  return c;
}

std::vector<int64_t> GraphFileReader::adjacency_offsets(int64_t begin, int64_t end) const {
  const Impl& m = *impl_;
  if (begin < 0 || end < begin || end > m.info.num_nodes)
    m.fail(fmt::format("adjacency offsets [{}, {}] outside [0, {}]", begin, end, m.info.num_nodes));
  return m.read_runs<int64_t>("/graph/indptr", H5T_NATIVE_INT64, {{begin, end + 1}});
}

Features GraphFileReader::feature_rows(const std::vector<int64_t>& ids) const {
  const Impl& m = *impl_;
  const auto [u, at] = m.distinct(ids);
  const Runs runs = runs_of(u);
  Features f;
  f.rows = static_cast<int64_t>(ids.size());
  f.cols = m.info.feature_cols;
  f.sparse = m.info.sparse_features;
  if (!f.sparse) {
    const std::vector<float> rows = m.read_runs<float>("/features/values", H5T_NATIVE_FLOAT, runs);
    const size_t cols = static_cast<size_t>(f.cols);
    f.dense.resize(ids.size() * cols);
    for (size_t i = 0; i < ids.size(); ++i)
      std::copy_n(rows.data() + at[i] * cols, cols, f.dense.data() + i * cols);
    return f;
  }
  // Sparse: each distinct row's [start, end) from indptr (entries id and id + 1), then its
  // entries.
  Runs ptr_runs;
  for (const auto& [b, e] : runs) {
    if (!ptr_runs.empty() && ptr_runs.back().second >= b) ptr_runs.back().second = e + 1;
    else ptr_runs.emplace_back(b, e + 1);
  }
  const std::vector<int64_t> ptr = m.read_runs<int64_t>("/features/indptr", H5T_NATIVE_INT64, ptr_runs);
  std::vector<int64_t> start(u.size()), stop(u.size());
  {
    size_t k = 0, base = 0;  // base: offset of ptr_runs[k] in ptr
    for (size_t i = 0; i < u.size(); ++i) {
      while (u[i] >= ptr_runs[k].second - 1) base += static_cast<size_t>(ptr_runs[k].second - ptr_runs[k].first), ++k;
      const size_t o = base + static_cast<size_t>(u[i] - ptr_runs[k].first);
      start[i] = ptr[o];
      stop[i] = ptr[o + 1];
      if (stop[i] < start[i] || start[i] < 0 || stop[i] > m.info.feature_nnz)
        m.fail(fmt::format("/features/indptr is corrupt at row {}", u[i]));
    }
  }
  Runs entry_runs;
  for (size_t i = 0; i < u.size(); ++i) {
    if (start[i] == stop[i]) continue;
    if (!entry_runs.empty() && entry_runs.back().second == start[i]) entry_runs.back().second = stop[i];
    else entry_runs.emplace_back(start[i], stop[i]);
  }
  const std::vector<int32_t> idx = m.read_runs<int32_t>("/features/indices", H5T_NATIVE_INT32, entry_runs);
  const std::vector<float> val = m.read_runs<float>("/features/data", H5T_NATIVE_FLOAT, entry_runs);
  // Offsets of each distinct row's entries in idx / val.
  std::vector<int64_t> off(u.size() + 1, 0);
  for (size_t i = 0; i < u.size(); ++i) off[i + 1] = off[i] + (stop[i] - start[i]);
  Csr& c = f.csr;
  c.rows = f.rows;
  c.cols = f.cols;
  c.indptr.assign(ids.size() + 1, 0);
  for (size_t i = 0; i < ids.size(); ++i) c.indptr[i + 1] = c.indptr[i] + (off[at[i] + 1] - off[at[i]]);
  c.indices.resize(static_cast<size_t>(c.indptr.back()));
  c.values.resize(c.indices.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t b = static_cast<size_t>(off[at[i]]), n = static_cast<size_t>(off[at[i] + 1]) - b;
    std::copy_n(idx.begin() + b, n, c.indices.begin() + c.indptr[i]);
    std::copy_n(val.begin() + b, n, c.values.begin() + c.indptr[i]);
  }
  for (int32_t j : c.indices)
    if (j < 0 || j >= f.cols) m.fail(fmt::format("/features/indices holds {}, outside [0, {})", j, f.cols));
  return f;
}

std::vector<int64_t> GraphFileReader::label_rows(const std::vector<int64_t>& ids) const {
  const Impl& m = *impl_;
  const auto [u, at] = m.distinct(ids);
  const std::vector<int64_t> rows = m.read_runs<int64_t>("/labels", H5T_NATIVE_INT64, runs_of(u));
  std::vector<int64_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    out[i] = rows[at[i]];
    if (out[i] < kUnlabelled || out[i] >= std::max<int64_t>(m.info.num_classes, 1))
      m.fail(fmt::format("label {} of node {} outside [0, {})", out[i], ids[i], m.info.num_classes));
  }
  return out;
}

std::vector<SplitSet> GraphFileReader::split_rows(const std::vector<int64_t>& ids) const {
  const Impl& m = *impl_;
  const auto [u, at] = m.distinct(ids);
  const Runs runs = runs_of(u);
  std::vector<SplitSet> out;
  const size_t k = ids.size();
  for (const auto& [name, count] : m.info.split_families) {
    SplitSet s;
    s.name = name;
    s.count = count;
    for (auto [which, mask] : {std::pair<const char*, std::vector<uint8_t>*>{"train", &s.train},
                               {"val", &s.val},
                               {"test", &s.test}}) {
      mask->resize(static_cast<size_t>(count) * k);
      for (int64_t j = 0; j < count; ++j) {
        const std::vector<uint8_t> row = m.read_runs<uint8_t>(
            "/splits/" + name + "/" + which, H5T_NATIVE_UINT8, runs, 1, static_cast<hsize_t>(j));
        for (size_t i = 0; i < k; ++i) (*mask)[static_cast<size_t>(j) * k + i] = row[at[i]];
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Graph GraphFileReader::read_structure() const {
  const GraphFileInfo& in = impl_->info;
  Graph g;
  g.name = in.name;
  g.source = in.source;
  g.source_sha256 = in.source_sha256;
  g.directed = in.directed;
  g.num_nodes = in.num_nodes;
  g.num_classes = in.num_classes;
  g.adj = adjacency_rows(0, in.num_nodes);
  g.features.cols = in.feature_cols;
  g.features.sparse = in.sparse_features;
  g.features.rows = 0;
  // Whole columns are read as one run each (no id mapping, no copy of N ids).
  const Runs all{{0, in.num_nodes}};
  g.labels = impl_->read_runs<int64_t>("/labels", H5T_NATIVE_INT64, all);
  for (int64_t v = 0; v < in.num_nodes; ++v)
    if (g.labels[v] < kUnlabelled || g.labels[v] >= std::max<int64_t>(in.num_classes, 1))
      impl_->fail(fmt::format("label {} of node {} outside [0, {})", g.labels[v], v, in.num_classes));
  for (const auto& [name, count] : in.split_families) {
    SplitSet s;
    s.name = name;
    s.count = count;
    for (auto [which, mask] : {std::pair<const char*, std::vector<uint8_t>*>{"train", &s.train},
                               {"val", &s.val},
                               {"test", &s.test}})
      for (int64_t j = 0; j < count; ++j) {
        const std::vector<uint8_t> row = impl_->read_runs<uint8_t>(
            "/splits/" + name + "/" + which, H5T_NATIVE_UINT8, all, 1, static_cast<hsize_t>(j));
        mask->insert(mask->end(), row.begin(), row.end());
      }
    g.splits.push_back(std::move(s));
  }
  return g;
}

}  // namespace adgnn
