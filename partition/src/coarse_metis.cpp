// coarse-metis: the owners of a graph spread over processes, with no process holding more than
// its rows and a small cluster graph. Three steps:
//   1. each process clusters its own rows by size-constrained label propagation over the edges
//      between them (a node joins the neighbouring cluster it has most edges to, while that
//      cluster is below the size cap), a few sweeps in a seeded random order;
//   2. the cluster graph (clusters weighted by their nodes, cluster pairs by their edges) goes
//      to process 0, where METIS k-way partitions it; every node takes its cluster's part;
//   3. label propagation refines the nodes: a node moves to the part most of its neighbours are
//      in when that beats its own part and the part stays under the imbalance cap (each process
//      may fill a 1/P share of a part's room per sweep, so that the cap holds without a lock).
// Clusters never span processes, so the result depends on the number of processes, and a
// process clusters with only the edges among its own rows: with many processes, ids that keep no
// neighbours near and a low degree, few such edges remain and the clusters (and the cut) thin
// out. docs/scaling.md compares it with ptscotch and METIS, on ordered and on random ids.
#include <metis.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "adgnn/first_error.h"
#include "fmt/format.h"
#include "internal.h"

namespace adgnn::detail {

namespace {

constexpr int kClusterSweeps = 8;
constexpr int kRefineSweeps = 4;

// Ghost nodes (neighbours held by other processes) and who asked this process for which rows.
struct Ghosts {
  std::vector<int32_t> ids;                 // ascending; grouped by holder as a consequence
  std::vector<std::vector<int32_t>> asked;  // asked[p]: this process's rows process p reads
  int64_t index(int32_t v) const {
    return std::lower_bound(ids.begin(), ids.end(), v) - ids.begin();
  }
  // value(row) of every ghost, from the processes holding them.
  template <class Fn>
  std::vector<int32_t> fetch(Communicator& comm, int64_t lo, Fn value) const {
    std::vector<std::vector<int32_t>> answer(asked.size());
    for (size_t p = 0; p < asked.size(); ++p)
      for (int32_t v : asked[p]) answer[p].push_back(value(v - lo));
    std::vector<int32_t> out;
    out.reserve(ids.size());
    for (const auto& a : all_to_all(comm, answer)) out.insert(out.end(), a.begin(), a.end());
    return out;
  }
};

Ghosts find_ghosts(Communicator& comm, const std::vector<std::vector<int32_t>>& sym,
                   const std::vector<int64_t>& bounds) {
  const int P = comm.size(), me = comm.rank();
  const int64_t lo = bounds[me], hi = bounds[me + 1];
  Ghosts g;
  for (const auto& row : sym)
    for (int32_t v : row)
      if (v < lo || v >= hi) g.ids.push_back(v);
  std::sort(g.ids.begin(), g.ids.end());
  g.ids.erase(std::unique(g.ids.begin(), g.ids.end()), g.ids.end());
  std::vector<std::vector<int32_t>> ask(static_cast<size_t>(P));
  for (int32_t v : g.ids)
    ask[std::upper_bound(bounds.begin(), bounds.end(), v) - bounds.begin() - 1].push_back(v);
  g.asked = all_to_all(comm, ask);
  return g;
}

}  // namespace

std::vector<int32_t> coarse_metis_owners(Communicator& comm, const std::vector<std::vector<int32_t>>& sym,
                                         const std::vector<int64_t>& bounds, int32_t parts,
                                         const DistributedPartitionOptions& opt,
                                         DistributedPartitionReport& rep) {
  const int P = comm.size(), me = comm.rank();
  const int64_t n = bounds.back(), lo = bounds[me], hi = bounds[me + 1], rows = hi - lo;
  std::vector<int32_t> owner(static_cast<size_t>(rows), 0);
  if (parts == 1) return owner;
  std::mt19937_64 rng(opt.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(me));
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);

  // 1. Clusters of this process's rows (ids: local row indices, then compacted).
  const int64_t coarse = opt.coarse_nodes > 0 ? opt.coarse_nodes : int64_t{1024} * parts;
  const int64_t cap = std::max<int64_t>(1, (n + coarse - 1) / coarse);
  std::vector<int32_t> cluster(static_cast<size_t>(rows));
  std::iota(cluster.begin(), cluster.end(), 0);
  {
    std::vector<int64_t> size(static_cast<size_t>(rows), 1), weight(static_cast<size_t>(rows), 0);
    std::vector<int32_t> touched;
    for (int sweep = 0; sweep < kClusterSweeps && cap > 1; ++sweep) {
      std::shuffle(order.begin(), order.end(), rng);
      int64_t moves = 0;
      for (int64_t r : order) {
        touched.clear();
        for (int32_t v : sym[r])
          if (v >= lo && v < hi) {
            const int32_t c = cluster[v - lo];
            if (weight[c]++ == 0) touched.push_back(c);
          }
        const int32_t cur = cluster[r];
        int32_t best = cur;
        int64_t best_w = weight[cur];
        // Ties: stay, else the larger cluster (on dense graphs most weights are 1 or 2, and a
        // tie broken by id would let the rare edge between communities decide).
        for (int32_t c : touched)
          if (c != cur && size[c] < cap &&
              (weight[c] > best_w || (weight[c] == best_w && best != cur && size[c] > size[best])))
            best = c, best_w = weight[c];
        for (int32_t c : touched) weight[c] = 0;
        if (best != cur) {
          --size[cur];
          ++size[best];
          cluster[r] = best;
          ++moves;
        }
      }
      if (moves * 100 < rows) break;
    }
  }
  // Compact ids, then global ones: process p's clusters follow those of processes < p.
  std::vector<int64_t> cluster_size;
  {
    std::vector<int32_t> id(static_cast<size_t>(rows), -1);
    for (int64_t r = 0; r < rows; ++r) {
      int32_t& c = id[cluster[r]];
      if (c < 0) {
        c = static_cast<int32_t>(cluster_size.size());
        cluster_size.push_back(0);
      }
      cluster[r] = c;
      ++cluster_size[c];
    }
  }
  const auto counts = all_gather(comm, std::vector<int64_t>{static_cast<int64_t>(cluster_size.size())});
  int64_t first = 0, clusters = 0;
  for (int p = 0; p < P; ++p) {
    if (p < me) first += counts[p][0];
    clusters += counts[p][0];
  }
  if (clusters > std::numeric_limits<idx_t>::max() / 2)
    throw InputError(fmt::format("--coarse-nodes: {} clusters exceed METIS's index range", clusters));
  for (auto& c : cluster) c += static_cast<int32_t>(first);

  // 2. The cluster graph on process 0, partitioned by METIS.
  const Ghosts ghosts = find_ghosts(comm, sym, bounds);
  {
    const std::vector<int32_t> ghost_cluster = ghosts.fetch(comm, lo, [&](int64_t r) { return cluster[r]; });
    // Edges of each of this process's clusters to every other cluster, summed: [a, b, weight].
    std::vector<int64_t> triples;
    {
      std::vector<int64_t> by_cluster(cluster_size.size() + 1, 0), members(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) ++by_cluster[cluster[r] - first + 1];
      std::partial_sum(by_cluster.begin(), by_cluster.end(), by_cluster.begin());
      {
        std::vector<int64_t> fill(by_cluster.begin(), by_cluster.end() - 1);
        for (int64_t r = 0; r < rows; ++r) members[fill[cluster[r] - first]++] = r;
      }
      std::vector<int64_t> weight(static_cast<size_t>(clusters), 0);
      std::vector<int32_t> touched;
      for (size_t a = 0; a < cluster_size.size(); ++a) {
        const int32_t ga = static_cast<int32_t>(first + static_cast<int64_t>(a));
        touched.clear();
        for (int64_t k = by_cluster[a]; k < by_cluster[a + 1]; ++k)
          for (int32_t v : sym[members[k]]) {
            const int32_t b = (v >= lo && v < hi) ? cluster[v - lo] : ghost_cluster[ghosts.index(v)];
            if (b != ga && weight[b]++ == 0) touched.push_back(b);
          }
        for (int32_t b : touched) {
          triples.insert(triples.end(), {ga, b, weight[b]});
          weight[b] = 0;
        }
      }
    }
    std::vector<std::vector<int64_t>> to(static_cast<size_t>(P)), sizes_to(static_cast<size_t>(P));
    to[0] = std::move(triples);
    sizes_to[0] = cluster_size;
    const auto got = all_to_all(comm, to);
    const auto got_sizes = all_to_all(comm, sizes_to);
    std::vector<int32_t> part(static_cast<size_t>(clusters), 0);
    std::string why;
    if (me == 0) {
      try {
        // Every cluster's row of the cluster graph: the triples arrive grouped by their first
        // cluster, in cluster order within each process, and processes in order.
        std::vector<idx_t> xadj(static_cast<size_t>(clusters) + 1, 0), adjncy, adjwgt, vwgt;
        for (const auto& s : got_sizes)
          for (int64_t w : s) vwgt.push_back(static_cast<idx_t>(w));
        for (const auto& t : got)
          for (size_t k = 0; k < t.size(); k += 3) ++xadj[t[k] + 1];
        std::partial_sum(xadj.begin(), xadj.end(), xadj.begin());
        adjncy.resize(static_cast<size_t>(xadj.back()));
        adjwgt.resize(adjncy.size());
        {
          std::vector<idx_t> fill(xadj.begin(), xadj.end() - 1);
          for (const auto& t : got)
            for (size_t k = 0; k < t.size(); k += 3) {
              adjncy[fill[t[k]]] = static_cast<idx_t>(t[k + 1]);
              adjwgt[fill[t[k]]++] = static_cast<idx_t>(std::min<int64_t>(t[k + 2], std::numeric_limits<idx_t>::max()));
            }
        }
        rep.cluster_edges = static_cast<int64_t>(adjncy.size()) / 2;
        idx_t nvtxs = static_cast<idx_t>(clusters), ncon = 1, nparts = parts, objval = 0;
        idx_t options[METIS_NOPTIONS];
        METIS_SetDefaultOptions(options);
        options[METIS_OPTION_SEED] = static_cast<idx_t>(opt.seed % 1000000007ull);
        options[METIS_OPTION_NUMBERING] = 0;
        // The cluster graph is small: the best of several tries costs little.
        options[METIS_OPTION_NCUTS] = 8;
        options[METIS_OPTION_UFACTOR] = std::max<idx_t>(1, static_cast<idx_t>(std::lround((opt.imbalance - 1) * 1000)));
        std::vector<idx_t> cpart(static_cast<size_t>(clusters), 0);
        const int rc = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr,
                                           adjwgt.data(), &nparts, nullptr, nullptr, options, &objval,
                                           cpart.data());
        if (rc != METIS_OK)
          throw InputError(fmt::format("--partition coarse-metis: METIS failed ({}) on the cluster graph "
                                       "of {} clusters", rc, clusters));
        for (int64_t c = 0; c < clusters; ++c) {
          if (cpart[c] < 0 || cpart[c] >= parts)
            throw InputError(fmt::format("--partition coarse-metis: METIS gave part {}", cpart[c]));
          part[c] = static_cast<int32_t>(cpart[c]);
        }
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    const std::string failed = first_error(comm, why);
    if (!failed.empty()) throw InputError(failed);
    comm.broadcast(part.data(), static_cast<int64_t>(part.size() * sizeof(int32_t)), 0);
    int64_t edges = rep.cluster_edges;
    comm.broadcast(&edges, sizeof edges, 0);
    rep.cluster_edges = edges;
    rep.clusters = clusters;
    for (int64_t r = 0; r < rows; ++r) owner[r] = part[cluster[r]];
  }

  // 3. Refinement.
  const int64_t room = std::max<int64_t>(static_cast<int64_t>(opt.imbalance * static_cast<double>(n) / parts),
                                         (n + parts - 1) / parts);
  std::vector<int64_t> count(static_cast<size_t>(parts), 0);
  for (int sweep = 0; sweep < kRefineSweeps; ++sweep) {
    const std::vector<int32_t> ghost_owner = ghosts.fetch(comm, lo, [&](int64_t r) { return owner[r]; });
    std::vector<int64_t> sizes(static_cast<size_t>(parts), 0);
    for (int32_t q : owner) ++sizes[q];
    comm.allreduce(sizes.data(), parts, DType::I64, ReduceOp::Sum);
    std::vector<int64_t> quota(static_cast<size_t>(parts));
    for (int32_t q = 0; q < parts; ++q) quota[q] = std::max<int64_t>(0, room - sizes[q]) / P;
    std::shuffle(order.begin(), order.end(), rng);
    int64_t moves = 0;
    for (int64_t r : order) {
      for (int32_t v : sym[r])
        ++count[(v >= lo && v < hi) ? owner[v - lo] : ghost_owner[ghosts.index(v)]];
      const int32_t cur = owner[r];
      int32_t best = cur;
      for (int32_t q = 0; q < parts; ++q)
        if (count[q] > count[best] && quota[q] > 0) best = q;
      std::fill(count.begin(), count.end(), 0);
      if (best != cur) {
        --quota[best];
        ++quota[cur];
        owner[r] = best;
        ++moves;
      }
    }
    comm.allreduce(&moves, 1, DType::I64, ReduceOp::Sum);
    if (moves * 1000 < n) break;
  }
  return owner;
}

}  // namespace adgnn::detail
