// partition_distributed under mpirun with 1, 2 and 4 processes: the parts it writes are exactly
// what build_part builds in memory for the same owners (every array of every part, so every node
// is owned once, halos and send lists agree, and the partition ids match), for any number of
// parts, on a directed graph with self-loops and duplicates and on CSBM graphs; PT-Scotch finds
// the communities of a graph with locality; bad input fails on every process with one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <set>

#include "adgnn/comm.h"
#include "adgnn/graph_file.h"
#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "fixtures.h"
#include "part_checks.h"
#include "nlohmann/json.hpp"

namespace fs = std::filesystem;
using namespace adgnn;

namespace {

Communicator& world() {
  static std::unique_ptr<Communicator> c = make_mpi_communicator();
  return *c;
}

// A folder every process names alike: rank 0's temporary folder, broadcast.
std::string shared_dir() {
  std::string d = world().rank() == 0 ? test::TempDir().str() : std::string();
  int64_t len = static_cast<int64_t>(d.size());
  world().broadcast(&len, sizeof len, 0);
  d.resize(static_cast<size_t>(len));
  world().broadcast(d.data(), len, 0);
  return d;
}

Graph communities_csbm() {
  CsbmParams c;
  c.name = "communities";
  c.nodes = 2000;
  c.classes = 3;
  c.avg_degree = 8;
  c.features = 4;
  c.communities = 4;
  c.locality = 0.97;
  c.seed = 11;
  c.threads = 1;
  return generate_csbm(c);
}

// Writes g (rank 0), partitions it across the processes and checks every part against the
// in-memory build; returns the report.
DistributedPartitionReport check_against_memory(const Graph& g, int32_t parts,
                                                const DistributedPartitionOptions& opt = {}) {
  const std::string dir = shared_dir();
  const std::string file = dir + "/graph.h5", out = dir + "/parts";
  if (world().rank() == 0) {
    fs::create_directories(dir);
    write_graph_h5(g, file);
  }
  world().barrier();
  const DistributedPartitionReport rep = partition_distributed(world(), file, parts, out, opt);
  // The reference: the file read whole (sparse values as stored), the owners from the parts.
  const Graph whole = read_graph_h5(file);
  const std::string hash = stored_graph_hash(file);
  std::vector<int32_t> owner(static_cast<size_t>(whole.num_nodes), -1);
  std::vector<GraphPart> got;
  for (int32_t r = 0; r < parts; ++r) {
    got.push_back(read_part(out, r, parts, hash));
    for (int64_t i = 0; i < got.back().num_owned; ++i) {
      const int64_t v = got.back().global_id[i];
      EXPECT_EQ(owner[v], -1) << "node " << v << " owned twice";
      owner[v] = r;
    }
  }
  for (int64_t v = 0; v < whole.num_nodes; ++v) EXPECT_NE(owner[v], -1) << "node " << v << " owned by no part";
  if (std::count(owner.begin(), owner.end(), -1) == 0) {
    Partition p = partition_stats(whole, parts, owner);
    p.method = opt.method;
    for (int32_t r = 0; r < parts; ++r) {
      SCOPED_TRACE("part " + std::to_string(r) + " of " + std::to_string(parts));
      test::expect_part_eq(got[r], build_part(whole, p, r));
    }
    EXPECT_EQ(rep.stats.edge_cut, p.edge_cut);
    EXPECT_EQ(rep.stats.part_nodes, p.part_nodes);
    EXPECT_EQ(rep.stats.part_edges, p.part_edges);
    for (int32_t r = 0; r < parts; ++r) EXPECT_EQ(rep.halo_rows[r], got[r].num_halo());
  }
  EXPECT_EQ(static_cast<int>(rep.peak_rss_bytes.size()), world().size());
  world().barrier();
  if (world().rank() == 0) fs::remove_all(dir);
  return rep;
}

}  // namespace

// Both methods; coarse-metis with few clusters, so that they hold several nodes each.
std::vector<DistributedPartitionOptions> methods() {
  DistributedPartitionOptions pt, cm;
  cm.method = "coarse-metis";
  cm.coarse_nodes = 64;
  return {pt, cm};
}

TEST(PartitionDistributed, PartsEqualTheInMemoryBuildOfTheSameOwners) {
  const int P = world().size();
  for (const auto& opt : methods())
    for (const Graph& g : {test::hand_made(), test::small_csbm()}) {
      SCOPED_TRACE(opt.method + " on " + g.name);
      for (int32_t parts : std::set<int32_t>{1, 3, P, 2 * P}) {
        const DistributedPartitionReport rep = check_against_memory(g, parts, opt);
        if (opt.method == "coarse-metis" && parts > 1 && g.num_nodes > 2 * opt.coarse_nodes) {
          EXPECT_GT(rep.clusters, 0);
          EXPECT_LT(rep.clusters, g.num_nodes);  // nodes were clustered
        }
      }
    }
}

TEST(PartitionDistributed, FindsTheCommunities) {
  // 4 communities keep 97% of the edges: their cut into 4 parts is about 2.3% of the edges;
  // each method must stay within 2x of it (a random assignment cuts 75%), within the imbalance.
  for (const auto& opt : methods()) {
    SCOPED_TRACE(opt.method);
    const DistributedPartitionReport rep = check_against_memory(communities_csbm(), 4, opt);
    const int64_t edges = std::accumulate(rep.stats.part_edges.begin(), rep.stats.part_edges.end(), int64_t{0}) / 2;
    EXPECT_LT(rep.stats.edge_cut, 0.046 * edges) << rep.stats.edge_cut << " of " << edges;
    EXPECT_LT(rep.stats.node_imbalance, 1.06);
  }
}

TEST(PartitionDistributed, BadInputFailsOnEveryProcessWithOneLine) {
  const std::string dir = shared_dir();
  for (auto [file, parts, expect] : {std::tuple<std::string, int32_t, std::string>{dir + "/none.h5", 2, "none.h5"},
                                     {dir + "/none.h5", 0, "--parts 0"}}) {
    try {
      partition_distributed(world(), file, parts, dir + "/out");
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(expect), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  world().barrier();
}
