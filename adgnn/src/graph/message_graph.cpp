// Loaded graphs -> tensors (to_tensors); graph tensors -> message graphs: one process's
// (message_graph) and a rank's share of a partitioned graph (part_tensors), with their edge
// normalisations; and the smaller graphs a pass builds from them (subgraphs.h).
#include <ATen/OpMathType.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "adgnn/graph.h"
#include "backbones/layer.h"
#include "ops/csr.h"
#include "graph/subgraphs.h"

namespace adgnn {

namespace {

// A host vector as a tensor of its own (copied), of the vector's element type.
template <typename T>
at::Tensor vec_tensor(const std::vector<T>& v) {
  return torch::from_blob(const_cast<T*>(v.data()), {int64_t(v.size())}, c10::CppTypeToScalarType<T>::value).clone();
}

}  // namespace

GraphTensors to_tensors(const Graph& g, c10::Device device) {
  GraphTensors t;
  t.num_nodes = g.num_nodes;
  t.num_features = g.features.cols;
  t.num_classes = g.num_classes;
  const Csr sym = g.symmetric();
  const Csr out = g.directed_simple();
  const Csr in = transpose_csr(out);
  t.rowptr = vec_tensor(sym.indptr).to(device);
  t.col = vec_tensor(sym.indices).to(device);
  t.out_rowptr = vec_tensor(out.indptr).to(device);
  t.out_col = vec_tensor(out.indices).to(device);
  t.in_rowptr = vec_tensor(in.indptr).to(device);
  t.in_col = vec_tensor(in.indices).to(device);
  t.degree = (t.rowptr.slice(0, 1) - t.rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  // Dense features only here: the models consume dense rows (sparse inputs densify once).
  const std::vector<float> dense = g.features.to_dense();
  t.x = torch::from_blob(const_cast<float*>(dense.data()), {g.num_nodes, g.features.cols},
                         torch::kFloat32)
            .clone()
            .to(device);
  t.y = vec_tensor(g.labels).to(device);
  return t;
}

// ---- graph tensors -> message graph ---------------------------------------------------------------

namespace {

at::Tensor entry_rows(const at::Tensor& rowptr) {
  return torch::repeat_interleave(rowptr.slice(0, 1) - rowptr.slice(0, 0, -1));
}

// The edge normalisations from the degrees of the source rows, computed in float64 and stored in
// the model's precision.
void fill_weights(MessageGraph& g, c10::ScalarType dtype) {
  const at::Tensor rows = entry_rows(g.rowptr), cols = g.col.to(torch::kInt64);
  const at::Tensor inv_sqrt = (g.degree.to(torch::kFloat64) + 1).rsqrt();
  g.gcn_weight = (inv_sqrt.index_select(0, rows) * inv_sqrt.index_select(0, cols)).to(dtype);
  g.gcn_self_weight = (g.degree.to(at::toOpMathType(dtype)) + 1).reciprocal().to(dtype);  // as gcn_self_weight
  // DirGNN: PyG's gcn_norm without self-loops uses the degree at the message's target for both
  // endpoints: in-degree for incoming messages, out-degree for outgoing ones (0 -> weight 0).
  auto dir_weight = [&](const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& deg) {
    const at::Tensor d = deg.to(torch::kFloat64);
    const at::Tensor inv = torch::where(d > 0, d.rsqrt(), torch::zeros_like(d));
    return (inv.index_select(0, entry_rows(rowptr)) * inv.index_select(0, col.to(torch::kInt64))).to(dtype);
  };
  g.in_weight = dir_weight(g.in_rowptr, g.in_col, g.in_degree);
  g.out_weight = dir_weight(g.out_rowptr, g.out_col, g.out_degree);
}

}  // namespace

// The rows `read` as a graph of their own (row i = read[i]) in which `rows` (sorted, among
// `read`) keep their entries, remapped to positions in `read`: a layer computing those few rows
// then reads a compact input of |read| rows instead of every source row. The directed CSRs only
// when `directed` (DirGNN; `read` must then hold both directions' neighbours).
MessageGraph detail::restrict_to(const MessageGraph& g, const at::Tensor& rows, const at::Tensor& read, bool directed) {
  MessageGraph s;
  s.num_dst = s.num_src = read.numel();
  const at::Tensor pos = torch::searchsorted(read, rows);
  auto sub = [&](const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& w, at::Tensor& s_rowptr,
                 at::Tensor& s_col, at::Tensor& s_w) {
    const detail::EdgeList e = detail::edges_of_rows(rowptr, col, rows);
    const at::Tensor counts = rowptr.index_select(0, rows + 1) - rowptr.index_select(0, rows);
    s_rowptr = torch::zeros({s.num_dst + 1}, rowptr.options()).index_put_({pos + 1}, counts).cumsum(0);
    s_col = torch::searchsorted(read, e.src).to(torch::kInt32);
    if (w.defined()) s_w = w.index_select(0, e.edge);
  };
  sub(g.rowptr, g.col, g.gcn_weight, s.rowptr, s.col, s.gcn_weight);
  if (directed) {
    sub(g.in_rowptr, g.in_col, g.in_weight, s.in_rowptr, s.in_col, s.in_weight);
    sub(g.out_rowptr, g.out_col, g.out_weight, s.out_rowptr, s.out_col, s.out_weight);
    s.in_degree = g.in_degree.index_select(0, read);
    s.out_degree = g.out_degree.index_select(0, read);
  }
  s.degree = g.degree.index_select(0, read);
  if (g.gcn_self_weight.defined()) s.gcn_self_weight = g.gcn_self_weight.index_select(0, read);
  s.global_id = g.global_id.index_select(0, read);
  s.max_degree_product = g.max_degree_product;
  return s;
}

// A rank's graph for layers >= 2 when those read only `rows` of its halo rows (bool mask,
// `count` of them): the same owned rows and CSR entries, the source rows [owned; those halo rows]
// (docs/distributed.md). Columns of other halo rows, which no computed row reads, point at row 0.
// halo_pos: each halo row's position among the kept ones, -1 for the others. The directed CSRs
// only when `directed` (DirGNN; the others' directed columns, 2 x 31 M entries per rank of
// products-scale, are not remapped and not kept). computed_rows (defined, undirected): the only
// rows those layers compute, with `computed_entries` CSR entries; the columns of the other rows
// point at row 0 too: a gather over the few rows' entries instead of every entry's (31 M per rank
// of products-scale).
MessageGraph detail::compact_halo_graph(const MessageGraph& g, const at::Tensor& rows, int64_t count, bool directed,
                                at::Tensor& halo_pos, const at::Tensor& computed_rows, int64_t computed_entries) {
  const int64_t n = g.num_dst;
  const auto idx = g.rowptr.options();
  const at::Tensor kept = torch::nonzero_static(rows, count).squeeze(1);  // size known: no wait
  halo_pos = torch::full({g.num_halo()}, -1, idx).index_put_({kept}, torch::arange(count, idx));
  const at::Tensor column = torch::cat({torch::arange(n, idx), torch::where(halo_pos >= 0, halo_pos + n, 0)});
  // One gather over every CSR entry in the columns' own type (int32): converting them to int64
  // and back would cost two more passes over them.
  auto remap = [&](const at::Tensor& col) {
    return col.defined() ? column.to(col.scalar_type()).index_select(0, col) : col;
  };
  const at::Tensor source = torch::cat({torch::arange(n, idx), kept + n});
  auto rows_of = [&](const at::Tensor& v) { return v.defined() ? v.index_select(0, source) : v; };
  MessageGraph c = g;
  c.num_src = n + count;
  if (computed_rows.defined() && !directed) {
    const detail::EdgeList e = detail::edges_of_rows(g.rowptr, g.col, computed_rows, computed_entries);
    c.col = torch::zeros_like(g.col).index_put_({e.edge}, column.index_select(0, e.src).to(g.col.scalar_type()));
  } else {
    c.col = remap(g.col);
  }
  if (directed) {
    c.in_col = remap(g.in_col);
    c.out_col = remap(g.out_col);
  } else {
    c.in_rowptr = c.in_col = c.in_weight = c.out_rowptr = c.out_col = c.out_weight = at::Tensor();
  }
  c.degree = rows_of(g.degree);
  c.gcn_self_weight = rows_of(g.gcn_self_weight);
  c.in_degree = rows_of(g.in_degree);
  c.out_degree = rows_of(g.out_degree);
  c.global_id = rows_of(g.global_id);
  // The halo bookkeeping stays the full graph's (HaloPass reads it from g).
  return c;
}

MessageGraph message_graph(const GraphTensors& t, c10::ScalarType dtype) {
  MessageGraph g;
  g.num_dst = g.num_src = t.num_nodes;
  g.rowptr = t.rowptr;
  g.col = t.col;
  g.out_rowptr = t.out_rowptr;
  g.out_col = t.out_col;
  g.in_rowptr = t.in_rowptr;
  g.in_col = t.in_col;
  g.degree = t.degree;
  g.in_degree = (t.in_rowptr.slice(0, 1) - t.in_rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  g.out_degree = (t.out_rowptr.slice(0, 1) - t.out_rowptr.slice(0, 0, -1)).to(torch::kFloat32);
  g.global_id = torch::arange(t.num_nodes, t.rowptr.options());
  fill_weights(g, dtype);
  const at::Tensor rows = entry_rows(g.rowptr), cols = g.col.to(torch::kInt64);
  g.max_degree_product =
      g.col.numel() ? (g.degree.index_select(0, rows) * g.degree.index_select(0, cols)).max()
                    : torch::ones({}, g.degree.options());
  return g;
}

PartTensors part_tensors(const GraphPart& part, c10::Device device, c10::ScalarType dtype) {
  PartTensors pt;
  MessageGraph& g = pt.graph;
  g.num_dst = part.num_owned;
  g.num_src = int64_t(part.global_id.size());
  auto csr = [&](const Csr& c, at::Tensor& rowptr, at::Tensor& col) {
    rowptr = vec_tensor(c.indptr).to(device);
    col = vec_tensor(c.indices).to(device);
  };
  csr(part.sym, g.rowptr, g.col);
  csr(part.out, g.out_rowptr, g.out_col);
  csr(part.in, g.in_rowptr, g.in_col);
  g.degree = vec_tensor(part.degree).to(device, torch::kFloat32);
  g.in_degree = vec_tensor(part.in_degree).to(device, torch::kFloat32);
  g.out_degree = vec_tensor(part.out_degree).to(device, torch::kFloat32);
  g.global_id = vec_tensor(part.global_id).to(device);
  g.max_degree_product = torch::full({}, part.max_degree_product, torch::dtype(torch::kFloat32).device(device));
  fill_weights(g, dtype);
  for (int32_t p = 0; p < part.parts; ++p)
    g.send_rows.push_back(vec_tensor(part.send[size_t(p)]).to(device));
  g.recv_offset = part.recv_offset;
  g.halo_owner = vec_tensor(part.halo_owner).to(device, torch::kInt64);
  const at::Tensor rows = entry_rows(g.rowptr), cols = g.col.to(torch::kInt64);
  const at::Tensor bnd = (cols >= g.num_dst).nonzero().squeeze(1);
  g.boundary_row = rows.index_select(0, bnd);
  g.boundary_halo = cols.index_select(0, bnd) - g.num_dst;
  // Dense features are copied once, straight from the part (to_dense would copy them twice).
  const std::vector<float> densified = part.features.sparse ? part.features.to_dense() : std::vector<float>();
  const float* dense = part.features.sparse ? densified.data() : part.features.dense.data();
  pt.x = torch::from_blob(const_cast<float*>(dense), {g.num_src, part.features.cols}, torch::kFloat32)
             .clone()
             .to(device, dtype);
  pt.y = vec_tensor(part.labels).to(device);
  return pt;
}

}  // namespace adgnn
