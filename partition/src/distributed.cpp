// partition_distributed: a partition folder made by several processes, none of which holds the
// whole graph. The steps, each a pass over this process's rows or one all-to-all exchange:
//   1. read rows [lo, hi) of the stored adjacency (GraphFileReader, hyperslabs);
//   2. send every edge u -> v to v's process, which gets its rows' in-edges; out, in and their
//      union (the symmetric graph) are sorted, deduplicated and self-loop-free;
//   3. PT-Scotch partitions the symmetric graph in place (SCOTCH_dgraphPart), or coarse-metis
//      does (coarse_metis.cpp: clusters per process, METIS on the cluster graph, refinement);
//   4. each row goes, with its three neighbour lists and degrees, to the process that writes its
//      part (part q: process q mod P), which asks the rows' processes for the owners and degrees
//      of its halo rows and reads its rows' features, labels and split masks from the file;
//   5. the parts are written, then process 0 writes the manifest.
// The exchanges go through the Communicator (every wait has its timeout); PT-Scotch's own MPI
// calls cannot be bounded, so every process checks that all are ready before entering it.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only
#endif
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

// PT-Scotch's 64-bit build (Debian libptscotch-dev: include/scotch-int64): SCOTCH_Num is int64_t.
#include <ptscotch.h>

#include "adgnn/comm.h"
#include "adgnn/first_error.h"
#include "adgnn/graph_file.h"
#include "adgnn/partition.h"
#include "fmt/format.h"
#include "internal.h"

static_assert(sizeof(SCOTCH_Num) == sizeof(int64_t), "link PT-Scotch's int64 build");

namespace adgnn {

using detail::all_gather;
using detail::all_to_all;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void sum_all(Communicator& c, std::vector<int64_t>& v) {
  if (!v.empty()) c.allreduce(v.data(), static_cast<int64_t>(v.size()), DType::I64, ReduceOp::Sum);
}

// Runs `step`; a failure on any process becomes an InputError on every process.
template <class Fn>
void on_every_process(Communicator& c, Fn&& step) {
  std::string why;
  try {
    step();
  } catch (const InputError& e) {
    why = e.what();
  } catch (const std::exception& e) {
    why = fmt::format("partition: {}", e.what());
  }
  const std::string first = first_error(c, why);
  if (!first.empty()) throw InputError(first);
}

// Sorted, deduplicated rows of a CSR, optionally without the diagonal (global row = first + r).
std::vector<std::vector<int32_t>> simple_rows(const Csr& a, int64_t first) {
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(a.rows));
  for (int64_t r = 0; r < a.rows; ++r) {
    auto& row = rows[r];
    for (int64_t k = a.indptr[r]; k < a.indptr[r + 1]; ++k)
      if (a.indices[k] != first + r) row.push_back(a.indices[k]);
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
  }
  return rows;
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// One row of this process as the writer of its part receives it.
struct RowRecord {
  int64_t id, index_in_owner, degree, out_degree, in_degree;
  bool out_is_sym, in_is_sym;  // then out / in are empty: they equal sym
  std::vector<int32_t> sym, out, in;
};

}  // namespace

DistributedPartitionReport partition_distributed(Communicator& comm, const std::string& graph_path,
                                                 int32_t parts, const std::string& dir,
                                                 const DistributedPartitionOptions& opt) {
  const int P = comm.size(), me = comm.rank();
  if (parts < 1) throw InputError(fmt::format("--parts {}: must be >= 1", parts));
  if (opt.method != "ptscotch" && opt.method != "coarse-metis")
    throw InputError(fmt::format("--partition {}: across processes only ptscotch or coarse-metis", opt.method));
  if (opt.coarse_nodes < 0)
    throw InputError(fmt::format("--coarse-nodes {}: must be >= 0", opt.coarse_nodes));
  if (!(opt.imbalance > 1 && opt.imbalance <= 2))
    throw InputError(fmt::format("--imbalance {}: must be in (1, 2]", opt.imbalance));
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (comm.device_memory() || world != P)
    throw InputError("partition_distributed: needs the MPI communicator over every process");

  DistributedPartitionReport rep;
  const auto t_read = std::chrono::steady_clock::now();
  std::unique_ptr<GraphFileReader> file;
  int64_t n = 0, lo = 0, hi = 0;
  std::vector<int64_t> bounds;  // process p holds rows [bounds[p], bounds[p + 1])
  on_every_process(comm, [&] {
    file = std::make_unique<GraphFileReader>(graph_path);
    if (file->info().graph_hash.empty())
      throw InputError(fmt::format("{}: stores no graph_hash (written before it existed): write it "
                                   "again with `adgnn data convert`",
                                   graph_path));
    if (me == 0) detail::prepare_partition_folder(dir, parts);
  });
  const GraphFileInfo& info = file->info();
  n = info.num_nodes;
  for (int p = 0; p <= P; ++p) bounds.push_back(n * p / P);
  lo = bounds[me];
  hi = bounds[me + 1];
  const int64_t rows = hi - lo;
  auto process_of = [&](int64_t v) {
    return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), v) - bounds.begin()) - 1;
  };

  // 1-2. This process's rows: out (stored direction), in (by exchange), sym (their union).
  std::vector<std::vector<int32_t>> out, in(static_cast<size_t>(rows)), sym(static_cast<size_t>(rows));
  on_every_process(comm, [&] { out = simple_rows(file->adjacency_rows(lo, hi), lo); });
  {
    std::vector<std::vector<int32_t>> send(static_cast<size_t>(P));
    for (int64_t r = 0; r < rows; ++r)
      for (int32_t v : out[r]) {
        auto& s = send[process_of(v)];
        s.push_back(v);
        s.push_back(static_cast<int32_t>(lo + r));
      }
    const auto got = all_to_all(comm, send);
    for (const auto& g : got)
      for (size_t k = 0; k < g.size(); k += 2) in[g[k] - lo].push_back(g[k + 1]);
    for (int64_t r = 0; r < rows; ++r) {
      std::sort(in[r].begin(), in[r].end());  // senders' rows ascend, but by sender first
      std::set_union(out[r].begin(), out[r].end(), in[r].begin(), in[r].end(), std::back_inserter(sym[r]));
    }
  }
  rep.read_s = seconds_since(t_read);

  // 3. Owners of this process's rows.
  const auto t_part = std::chrono::steady_clock::now();
  std::vector<int32_t> owner(static_cast<size_t>(rows), 0);
  if (parts > 1 && opt.method == "coarse-metis") {
    on_every_process(comm, [&] { owner = detail::coarse_metis_owners(comm, sym, bounds, parts, opt, rep); });
  } else if (parts > 1) {
    std::vector<SCOTCH_Num> vert(static_cast<size_t>(rows) + 1, 0), edges;
    edges.reserve(1);  // never a null pointer, also on a process without rows
    for (int64_t r = 0; r < rows; ++r) {
      vert[r + 1] = vert[r] + static_cast<SCOTCH_Num>(sym[r].size());
      edges.insert(edges.end(), sym[r].begin(), sym[r].end());
    }
    std::vector<SCOTCH_Num> part(static_cast<size_t>(std::max<int64_t>(rows, 1)));
    // The graph is partitioned through `bound`, a view of it bound to a context that asks for
    // deterministic behaviour and carries the seed: without it PT-Scotch's threads make the
    // parts differ from run to run at a fixed seed (the global SCOTCH_randomSeed is not enough).
    SCOTCH_Dgraph graph, bound;
    SCOTCH_Context context;
    SCOTCH_Strat strat;
    std::string why;
    if (SCOTCH_dgraphInit(&graph, MPI_COMM_WORLD) != 0 || SCOTCH_dgraphInit(&bound, MPI_COMM_WORLD) != 0)
      why = "SCOTCH_dgraphInit failed";
    if (SCOTCH_contextInit(&context) != 0 ||
        SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMDETERMINISTIC, 1) != 0)
      why = "SCOTCH_contextInit failed";
    SCOTCH_contextRandomSeed(&context, static_cast<SCOTCH_Num>(opt.seed));
    SCOTCH_stratInit(&strat);
    // Every process must enter each PT-Scotch call: agree before each.
    const std::string first = first_error(comm, why);
    if (!first.empty()) throw InputError(first);
    // PT-Scotch keeps pointers to vert and edges (no copy) until SCOTCH_dgraphExit.
    int rc = SCOTCH_dgraphBuild(&graph, 0, rows, rows, vert.data(), nullptr, nullptr, nullptr,
                                vert[rows], vert[rows], edges.data(), nullptr, nullptr);
    int64_t bad = rc != 0;
    comm.allreduce(&bad, 1, DType::I64, ReduceOp::Max);
    const auto release = [&] {
      SCOTCH_dgraphExit(&bound);
      SCOTCH_dgraphExit(&graph);
      SCOTCH_contextExit(&context);
      SCOTCH_stratExit(&strat);
    };
    if (bad) {
      release();
      throw InputError(fmt::format("{}: PT-Scotch refused the graph (SCOTCH_dgraphBuild)", graph_path));
    }
    rc = SCOTCH_contextBindDgraph(&context, &graph, &bound);
    if (rc == 0) rc = SCOTCH_stratDgraphMapBuild(&strat, SCOTCH_STRATDEFAULT, parts, parts, opt.imbalance - 1);
    if (rc == 0) rc = SCOTCH_dgraphPart(&bound, parts, &strat, part.data());
    release();
    bad = rc != 0;
    comm.allreduce(&bad, 1, DType::I64, ReduceOp::Max);
    if (bad) throw InputError(fmt::format("{}: PT-Scotch failed to partition into {} parts", graph_path, parts));
    on_every_process(comm, [&] {
      for (int64_t r = 0; r < rows; ++r) {
        if (part[r] < 0 || part[r] >= parts)
          throw InputError(fmt::format("{}: PT-Scotch gave node {} part {}, outside [0, {})", graph_path,
                                       lo + r, part[r], parts));
        owner[r] = static_cast<int32_t>(part[r]);
      }
    });
  }
  rep.partition_s = seconds_since(t_part);

  // Each row's index among its owner's rows: rows of a part ascend by id, and process p's rows
  // come after those of processes < p.
  const auto t_write = std::chrono::steady_clock::now();
  std::vector<int64_t> mine(static_cast<size_t>(parts), 0);
  for (int32_t q : owner) ++mine[q];
  const auto counts = all_gather(comm, mine);
  std::vector<int64_t> next(static_cast<size_t>(parts), 0);
  for (int p = 0; p < me; ++p)
    for (int32_t q = 0; q < parts; ++q) next[q] += counts[p][q];
  std::vector<int64_t> index_in_owner(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) index_in_owner[r] = next[owner[r]]++;
  uint64_t digest = 0;
  for (const auto& d : all_gather(comm, std::vector<uint64_t>{owner_digest(owner.data(), lo, rows)}))
    digest += d[0];
  const std::string pid = partition_id(info.graph_hash, parts, digest);

  // 4. Rows to their writers: [id, part, index_in_owner, |sym|, |out| or -1, |in| or -1, sym...,
  // out..., in...] as int32, -1 (and no list) where the list equals sym (every row of a graph
  // stored in both directions).
  std::vector<int64_t> out_degree(static_cast<size_t>(rows)), in_degree(static_cast<size_t>(rows));
  std::vector<std::vector<int32_t>> send(static_cast<size_t>(P));
  for (int64_t r = 0; r < rows; ++r) {
    auto& s = send[owner[r] % P];
    out_degree[r] = int64_t(out[r].size());
    in_degree[r] = int64_t(in[r].size());
    const bool out_sym = out[r] == sym[r], in_sym = in[r] == sym[r];
    s.insert(s.end(), {static_cast<int32_t>(lo + r), owner[r], static_cast<int32_t>(index_in_owner[r]),
                       static_cast<int32_t>(sym[r].size()), out_sym ? -1 : static_cast<int32_t>(out_degree[r]),
                       in_sym ? -1 : static_cast<int32_t>(in_degree[r])});
    s.insert(s.end(), sym[r].begin(), sym[r].end());
    if (!out_sym) s.insert(s.end(), out[r].begin(), out[r].end());
    if (!in_sym) s.insert(s.end(), in[r].begin(), in[r].end());
    std::vector<int32_t>().swap(out[r]);
    std::vector<int32_t>().swap(in[r]);
  }
  std::vector<std::vector<int32_t>>().swap(out);
  std::vector<std::vector<int32_t>>().swap(in);
  std::vector<int64_t> degree(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) degree[r] = int64_t(sym[r].size());
  std::vector<std::vector<int32_t>>().swap(sym);
  std::vector<std::vector<RowRecord>> owned;  // [my part k = part q / P]: rows ascending
  for (int32_t q = me; q < parts; q += P) owned.emplace_back();
  {
    auto got = all_to_all(comm, send);
    std::vector<std::vector<int32_t>>().swap(send);
    for (auto& g : got) {  // senders in rank order: each part's rows ascend by id
      for (size_t k = 0; k < g.size();) {
        RowRecord rr;
        rr.id = g[k];
        const int32_t q = g[k + 1];
        rr.index_in_owner = g[k + 2];
        const int64_t ns = g[k + 3], no = g[k + 4], ni = g[k + 5];
        rr.degree = ns;
        rr.out_degree = no < 0 ? ns : no;
        rr.in_degree = ni < 0 ? ns : ni;
        rr.out_is_sym = no < 0;
        rr.in_is_sym = ni < 0;
        k += 6;
        rr.sym.assign(g.begin() + k, g.begin() + k + ns), k += size_t(ns);
        if (no >= 0) rr.out.assign(g.begin() + k, g.begin() + k + no), k += size_t(no);
        if (ni >= 0) rr.in.assign(g.begin() + k, g.begin() + k + ni), k += size_t(ni);
        owned[size_t(q / P)].push_back(std::move(rr));
      }
      std::vector<int32_t>().swap(g);
    }
  }

  // The halo rows of every part written here, and what their processes say of them:
  // [owner, index_in_owner, degree, out_degree, in_degree].
  auto owned_index = [](const std::vector<RowRecord>& rr, int64_t v) -> int64_t {
    auto it = std::lower_bound(rr.begin(), rr.end(), v, [](const RowRecord& a, int64_t x) { return a.id < x; });
    return it != rr.end() && it->id == v ? it - rr.begin() : -1;
  };
  std::vector<int64_t> wanted;
  for (const auto& rr : owned)
    for (const auto& row : rr)
      for (int32_t v : row.sym)
        if (owned_index(rr, v) < 0) wanted.push_back(v);
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<int64_t> facts(wanted.size() * 5);  // per wanted id, in wanted's order
  {
    std::vector<std::vector<int64_t>> ask(static_cast<size_t>(P));
    for (int64_t v : wanted) ask[process_of(v)].push_back(v);
    const auto asked = all_to_all(comm, ask);
    std::vector<std::vector<int64_t>> answer(static_cast<size_t>(P));
    for (int p = 0; p < P; ++p)
      for (int64_t v : asked[p]) {
        const int64_t r = v - lo;
        answer[p].insert(answer[p].end(), {int64_t(owner[r]), index_in_owner[r], degree[r],
                                           out_degree[r], in_degree[r]});
      }
    const auto answered = all_to_all(comm, answer);
    std::vector<size_t> at(static_cast<size_t>(P), 0);
    for (size_t i = 0; i < wanted.size(); ++i) {  // wanted ascends, so do its runs per process
      const int p = process_of(wanted[i]);
      std::copy_n(answered[p].begin() + at[p], 5, facts.begin() + i * 5);
      at[p] += 5;
    }
  }
  auto fact = [&](int64_t v) {
    return facts.begin() + (std::lower_bound(wanted.begin(), wanted.end(), v) - wanted.begin()) * 5;
  };

  // 5. Build, then write, every part of this process.
  std::vector<GraphPart> built;
  int64_t best_product = 0;
  std::string why;
  try {
    for (size_t k = 0; k < owned.size(); ++k) {
      const int32_t q = me + static_cast<int32_t>(k) * P;
      const std::vector<RowRecord>& rr = owned[k];
      GraphPart gp;
      gp.rank = q;
      gp.parts = parts;
      gp.graph_hash = info.graph_hash;
      gp.graph_name = info.name;
      gp.graph_source_sha256 = info.source_sha256;
      gp.partition_id = pid;
      gp.method = opt.method;
      gp.global_nodes = n;
      gp.num_classes = info.num_classes;
      const int64_t own = static_cast<int64_t>(rr.size());
      gp.num_owned = own;
      for (const auto& row : rr) gp.global_id.push_back(row.id);
      // Halo rows sorted by (owner, id).
      std::vector<std::pair<int32_t, int64_t>> halo;
      for (const auto& row : rr)
        for (int32_t v : row.sym)
          if (owned_index(rr, v) < 0) halo.emplace_back(static_cast<int32_t>(fact(v)[0]), v);
      std::sort(halo.begin(), halo.end());
      halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
      gp.recv_offset.assign(static_cast<size_t>(parts) + 1, 0);
      for (const auto& [o, v] : halo) {
        ++gp.recv_offset[o + 1];
        gp.global_id.push_back(v);
        gp.halo_owner.push_back(o);
        gp.halo_owner_index.push_back(fact(v)[1]);
      }
      for (int32_t o = 0; o < parts; ++o) gp.recv_offset[o + 1] += gp.recv_offset[o];
      const int64_t sources = static_cast<int64_t>(gp.global_id.size());
      // Global id -> local source row: owned rows by position, halo rows through a sorted list.
      std::vector<std::pair<int64_t, int32_t>> halo_local;
      for (int64_t h = 0; h < int64_t(halo.size()); ++h)
        halo_local.emplace_back(halo[h].second, static_cast<int32_t>(own + h));
      std::sort(halo_local.begin(), halo_local.end());
      auto local = [&](int64_t v) -> int32_t {
        const int64_t i = owned_index(rr, v);
        if (i >= 0) return static_cast<int32_t>(i);
        auto it = std::lower_bound(halo_local.begin(), halo_local.end(), std::make_pair(v, int32_t{-1}));
        return it->second;
      };
      auto slice = [&](std::vector<int32_t> RowRecord::*list, bool RowRecord::*is_sym) {
        Csr c;
        c.rows = own;
        c.cols = sources;
        c.indptr.assign(static_cast<size_t>(own) + 1, 0);
        for (int64_t i = 0; i < own; ++i) {
          const bool same = is_sym && rr[i].*is_sym;
          for (int32_t v : same ? rr[i].sym : rr[i].*list) c.indices.push_back(local(v));
          c.indptr[i + 1] = c.nnz();
        }
        return c;
      };
      gp.sym = slice(&RowRecord::sym, nullptr);
      gp.out = slice(&RowRecord::out, &RowRecord::out_is_sym);
      gp.in = slice(&RowRecord::in, &RowRecord::in_is_sym);
      for (const auto& row : rr) {
        gp.degree.push_back(row.degree);
        gp.out_degree.push_back(row.out_degree);
        gp.in_degree.push_back(row.in_degree);
      }
      for (const auto& [o, v] : halo) {
        const auto f = fact(v);
        gp.degree.push_back(f[2]);
        gp.out_degree.push_back(f[3]);
        gp.in_degree.push_back(f[4]);
      }
      for (int64_t i = 0; i < own; ++i)
        for (int64_t e = gp.sym.indptr[i]; e < gp.sym.indptr[i + 1]; ++e)
          best_product = std::max(best_product, gp.degree[i] * gp.degree[gp.sym.indices[e]]);
      // send[o]: owned rows with a neighbour owned by o, ascending.
      gp.send.assign(static_cast<size_t>(parts), {});
      std::vector<int64_t> last(static_cast<size_t>(parts), -1);
      for (int64_t i = 0; i < own; ++i)
        for (int64_t e = gp.sym.indptr[i]; e < gp.sym.indptr[i + 1]; ++e) {
          const int32_t l = gp.sym.indices[e];
          if (l < own) continue;
          const int32_t o = gp.halo_owner[l - own];
          if (last[o] != i) last[o] = i, gp.send[o].push_back(i);
        }
      gp.features = file->feature_rows(gp.global_id);
      gp.labels = file->label_rows(gp.global_id);
      gp.splits = file->split_rows(gp.global_id);
      built.push_back(std::move(gp));
      std::vector<RowRecord>().swap(owned[k]);
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  {
    const std::string first = first_error(comm, why);
    if (!first.empty()) throw InputError(first);
  }
  comm.allreduce(&best_product, 1, DType::I64, ReduceOp::Max);

  // Statistics per part, summed over the processes (each part is one process's).
  std::vector<int64_t> part_nodes(static_cast<size_t>(parts), 0), part_edges(part_nodes),
      part_train(part_nodes), halo_rows(part_nodes), send_rows(part_nodes), cut(1, 0);
  const bool has_train = !info.split_families.empty() && info.split_families[0].second > 0;
  on_every_process(comm, [&] {
    for (GraphPart& gp : built) {
      gp.max_degree_product = best_product > 0 ? static_cast<double>(best_product) : 1.0;
      const int32_t q = gp.rank;
      part_nodes[q] = gp.num_owned;
      for (int64_t i = 0; i < gp.num_owned; ++i) {
        part_edges[q] += gp.degree[i];
        for (int64_t e = gp.sym.indptr[i]; e < gp.sym.indptr[i + 1]; ++e) cut[0] += gp.sym.indices[e] >= gp.num_owned;
        if (has_train) part_train[q] += gp.splits[0].train[static_cast<size_t>(i)] != 0;
      }
      halo_rows[q] = gp.num_halo();
      send_rows[q] = detail::write_part_file(dir, gp);
    }
  });
  std::vector<GraphPart>().swap(built);
  for (auto* v : {&part_nodes, &part_edges, &part_train, &halo_rows, &send_rows, &cut}) sum_all(comm, *v);
  rep.write_s = seconds_since(t_write);

  Partition& st = rep.stats;
  st.parts = parts;
  st.method = opt.method;
  st.edge_cut = cut[0] / 2;
  st.part_nodes = part_nodes;
  st.part_edges = part_edges;
  auto imbalance = [&](const std::vector<int64_t>& v) {
    const double total = static_cast<double>(std::accumulate(v.begin(), v.end(), int64_t{0}));
    return total > 0 ? *std::max_element(v.begin(), v.end()) / (total / parts) : 1.0;
  };
  st.node_imbalance = imbalance(part_nodes);
  st.edge_imbalance = imbalance(part_edges);
  if (has_train) {
    st.part_train = part_train;
    st.train_imbalance = imbalance(part_train);
  }
  rep.halo_rows = halo_rows;
  rep.send_rows = send_rows;
  for (const auto& r : all_gather(comm, std::vector<int64_t>{peak_rss_bytes()})) rep.peak_rss_bytes.push_back(r[0]);

  on_every_process(comm, [&] {
    if (me != 0) return;
    PartitionManifest id;
    id.graph_hash = info.graph_hash;
    id.graph_name = info.name;
    id.graph_source_sha256 = info.source_sha256;
    id.partition_id = pid;
    id.nodes = n;
    id.stored_edges = info.stored_edges;
    id.features = info.feature_cols;
    id.classes = info.num_classes;
    id.split_families = info.split_families;
    id.halo_rows = halo_rows;
    PartitionOptions po;
    po.method = opt.method;
    po.seed = opt.seed;
    po.imbalance = opt.imbalance;
    detail::write_manifest(dir, id, st, opt.method, &po, send_rows);
  });
  return rep;
}

}  // namespace adgnn
