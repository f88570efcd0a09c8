// Partition folders: read_part returns exactly what build_part builds (dense and sparse
// features), the manifest's statistics, and the refusals (another graph, another rank count,
// missing, corrupt or foreign files).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "adgnn/graph_file.h"
#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "fixtures.h"
#include "part_checks.h"
#include "nlohmann/json.hpp"

namespace fs = std::filesystem;
using adgnn::Csr;
using adgnn::Graph;
using adgnn::GraphPart;
using adgnn::InputError;
using adgnn::Partition;
using adgnn::PartitionOptions;
using adgnn::test::expect_part_eq;
using adgnn::test::TempDir;

namespace {

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
    return msg;
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

nlohmann::json manifest(const TempDir& d) {
  return nlohmann::json::parse(adgnn::read_file(d.file("manifest.json")));
}

}  // namespace

TEST(PartitionFolder, RoundTripDenseAndSparse) {
  for (const Graph& g : {adgnn::test::small_csbm(), adgnn::test::hand_made()}) {
    SCOPED_TRACE(g.name);
    for (int32_t parts : {1, 3}) {
      SCOPED_TRACE("parts " + std::to_string(parts));
      TempDir d;
      PartitionOptions opt;
      // Stratified on the CSBM; METIS on the 12-node graph (strata of 6 nodes are too small to
      // balance well). Both record their strata in the manifest.
      opt.method = g.num_nodes >= 100 ? "stratified" : "metis";
      opt.strata = 2;
      opt.seed = 9;
      const Partition p = adgnn::partition_graph(g, parts, opt);
      const std::string desc = opt.method + " (2 strata)";
      adgnn::write_partition(g, p, d.str(), desc, &opt);
      const std::string hash = adgnn::graph_fingerprint(g);
      for (int32_t r = 0; r < parts; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        expect_part_eq(adgnn::read_part(d.str(), r, parts, hash), adgnn::build_part(g, p, r));
      }
      // Nothing but the manifest and the part files (no temporary left behind).
      int files = 0;
      for (const auto& e : fs::directory_iterator(d.str())) {
        const std::string name = e.path().filename().string();
        EXPECT_TRUE(name == "manifest.json" || name.rfind("part-", 0) == 0) << name;
        ++files;
      }
      EXPECT_EQ(files, parts + 1);

      const nlohmann::json m = manifest(d);
      EXPECT_EQ(m["format_version"], 2);
      EXPECT_EQ(m["graph_hash"], hash);
      EXPECT_EQ(m["graph_name"], g.name);
      EXPECT_EQ(m["parts"], parts);
      EXPECT_EQ(m["method"], desc);
      EXPECT_EQ(m["objective"], "cut");
      EXPECT_EQ(m["seed"], 9);
      EXPECT_EQ(m["strata"], 2);
      EXPECT_EQ(m["edge_cut"], p.edge_cut);
      EXPECT_DOUBLE_EQ(m["balance"]["nodes"].get<double>(), p.node_imbalance);
      EXPECT_DOUBLE_EQ(m["balance"]["edges"].get<double>(), p.edge_imbalance);
      EXPECT_EQ(m["balance"]["strata"].size(), 2u);
      EXPECT_FALSE(m["balance"].contains("train"));
      ASSERT_EQ(m["halo_rows"].size(), static_cast<size_t>(parts));
      for (int32_t r = 0; r < parts; ++r)
        EXPECT_EQ(m["halo_rows"][r], adgnn::build_part(g, p, r).num_halo());
      // What a rank learns without the graph.
      const adgnn::PartitionManifest pm = adgnn::read_partition_manifest(d.str());
      EXPECT_EQ(pm.graph_hash, hash);
      EXPECT_EQ(pm.graph_source_sha256, g.source_sha256);
      EXPECT_EQ(pm.partition_id, adgnn::build_part(g, p, 0).partition_id);
      EXPECT_EQ(pm.nodes, g.num_nodes);
      EXPECT_EQ(pm.stored_edges, g.adj.nnz());
      EXPECT_EQ(pm.features, g.features.cols);
      EXPECT_EQ(pm.classes, g.num_classes);
      ASSERT_EQ(pm.split_families.size(), g.splits.size());
      for (size_t s = 0; s < g.splits.size(); ++s) {
        EXPECT_EQ(pm.split_families[s].first, g.splits[s].name);
        EXPECT_EQ(pm.split_families[s].second, g.splits[s].count);
      }
    }
  }
}

// A rank's labels and split masks cover its halo rows too, as the whole graph has them.
// From our HDF5 file without its features (what `adgnn partition` does with one): the structure
// partitions alike, and every part, its features read from the file by rows, equals the part
// of the graph read whole.
TEST(PartitionFolder, FromTheFileWithoutItsFeatures) {
  for (const Graph& g : {adgnn::test::small_csbm(), adgnn::test::hand_made()}) {
    SCOPED_TRACE(g.name);
    TempDir d;
    std::filesystem::create_directories(d.str());
    adgnn::write_graph_h5(g, d.file("g.h5"));
    const Graph whole = adgnn::read_graph_h5(d.file("g.h5"));
    const adgnn::GraphFileReader rows(d.file("g.h5"));
    const Graph structure = rows.read_structure();
    PartitionOptions opt;
    opt.seed = 3;
    const Partition p = adgnn::partition_graph(structure, 3, opt);
    EXPECT_EQ(p.owner, adgnn::partition_graph(whole, 3, opt).owner);
    adgnn::write_partition(structure, p, d.file("parts"), "metis", &opt, &rows);
    for (int32_t r = 0; r < 3; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      expect_part_eq(adgnn::read_part(d.file("parts"), r, 3, adgnn::graph_fingerprint(whole)),
                     adgnn::build_part(whole, p, r));
    }
  }
}

TEST(PartitionFolder, HaloRowsCarryLabelsAndSplits) {
  const Graph g = adgnn::test::small_csbm();
  const Partition p = adgnn::partition_graph(g, 3);
  for (int32_t r = 0; r < 3; ++r) {
    const GraphPart gp = adgnn::build_part(g, p, r);
    const size_t sources = gp.global_id.size();
    ASSERT_GT(gp.num_halo(), 0);
    ASSERT_EQ(gp.labels.size(), sources);
    for (size_t i = 0; i < sources; ++i) EXPECT_EQ(gp.labels[i], g.labels[size_t(gp.global_id[i])]);
    ASSERT_EQ(gp.splits.size(), g.splits.size());
    for (size_t s = 0; s < g.splits.size(); ++s)
      for (int64_t k = 0; k < g.splits[s].count; ++k)
        for (size_t i = 0; i < sources; ++i)
          EXPECT_EQ(gp.splits[s].train[size_t(k) * sources + i],
                    g.splits[s].train[size_t(k * g.num_nodes + gp.global_id[i])]);
  }
}

// Part files of two partitions of the same graph (same graph, same part count) never mix: each
// carries its partition's id, which must be the manifest's.
TEST(PartitionFolder, PartsOfAnotherPartitionAreRefused) {
  const Graph g = adgnn::test::small_csbm();
  TempDir a, b;
  PartitionOptions metis, random;
  random.method = "random";
  adgnn::write_partition(g, adgnn::partition_graph(g, 2, metis), a.str(), "metis", &metis);
  adgnn::write_partition(g, adgnn::partition_graph(g, 2, random), b.str(), "random", &random);
  EXPECT_NE(manifest(a)["partition_id"], manifest(b)["partition_id"]);
  fs::copy_file(b.file("part-1.h5"), a.file("part-1.h5"), fs::copy_options::overwrite_existing);
  const std::string hash = adgnn::graph_fingerprint(g);
  EXPECT_EQ(adgnn::read_part(a.str(), 0, 2, hash).rank, 0);
  const std::string msg = input_error([&] { adgnn::read_part(a.str(), 1, 2, hash); });
  EXPECT_NE(msg.find("two partitions mixed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--partition-dir"), std::string::npos) << msg;
}

// A folder of an earlier format is refused with the way out.
TEST(PartitionFolder, OlderFormatIsRefusedWithTheRemedy) {
  const Graph g = adgnn::test::small_csbm();
  TempDir d;
  adgnn::write_partition(g, adgnn::partition_graph(g, 2), d.str(), "metis");
  nlohmann::json m = manifest(d);
  m["format_version"] = 1;
  std::ofstream(d.file("manifest.json")) << m.dump();
  const std::string msg = input_error([&] { adgnn::read_partition_manifest(d.str()); });
  EXPECT_NE(msg.find("run `adgnn partition` again"), std::string::npos) << msg;
}

TEST(PartitionFolder, TrainBalanceRecorded) {
  const Graph g = adgnn::test::small_csbm();
  const std::vector<uint8_t> train(g.splits[0].train.begin(), g.splits[0].train.begin() + g.num_nodes);
  PartitionOptions opt;
  opt.balance_train = true;
  const Partition p = adgnn::partition_graph(g, 2, opt, &train);
  TempDir d;
  adgnn::write_partition(g, p, d.str(), "metis");
  const nlohmann::json m = manifest(d);
  EXPECT_DOUBLE_EQ(m["balance"]["train"].get<double>(), p.train_imbalance);
  EXPECT_EQ(m["part_train"].get<std::vector<int64_t>>(), p.part_train);
  EXPECT_TRUE(m["objective"].is_null());  // no options given
  // The options that made it, METIS's tolerance among them when one was asked for.
  opt.imbalance = 1.01;
  TempDir e;
  adgnn::write_partition(g, adgnn::partition_graph(g, 2, opt, &train), e.str(), "metis", &opt);
  const nlohmann::json me = manifest(e);
  EXPECT_DOUBLE_EQ(me["imbalance"].get<double>(), 1.01);
  EXPECT_TRUE(me["balance_train"].get<bool>());
  EXPECT_FALSE(manifest(d).contains("imbalance"));
}

TEST(PartitionFolder, RefusesAnotherGraphOrRankCount) {
  const Graph g = adgnn::test::small_csbm();
  const Graph other = adgnn::test::hand_made();
  TempDir d;
  adgnn::write_partition(g, adgnn::partition_graph(g, 4), d.str(), "metis");
  const std::string hash = adgnn::graph_fingerprint(g), other_hash = adgnn::graph_fingerprint(other);

  EXPECT_EQ(input_error([&] { adgnn::read_part(d.str(), 0, 2, hash); }),
            "--partition-dir " + d.str() + ": made for 4 parts, this run has 2 ranks");
  const std::string msg = input_error([&] { adgnn::read_part(d.str(), 0, 4, other_hash); });
  EXPECT_EQ(msg.rfind("--partition-dir " + d.str() + ": made for graph ", 0), 0u) << msg;
  EXPECT_NE(msg.find(hash), std::string::npos) << msg;
  EXPECT_NE(msg.find(other_hash), std::string::npos) << msg;
  EXPECT_NE(msg.find("'small'"), std::string::npos) << msg;
  // An empty expected hash skips the graph check only.
  EXPECT_EQ(adgnn::read_part(d.str(), 3, 4, "").rank, 3);
  EXPECT_NE(input_error([&] { adgnn::read_part(d.str(), 4, 4, hash); }).find("rank 4"),
            std::string::npos);
}

TEST(PartitionFolder, MissingCorruptAndForeignFiles) {
  const Graph g = adgnn::test::small_csbm();
  const std::string hash = adgnn::graph_fingerprint(g);
  const std::string flag_of_missing = "--partition-dir /nonexistent/adgnn-part";
  EXPECT_EQ(input_error([&] { adgnn::read_part("/nonexistent/adgnn-part", 0, 1, hash); }),
            flag_of_missing + ": no such folder");

  TempDir d;
  const Partition p = adgnn::partition_graph(g, 3);
  adgnn::write_partition(g, p, d.str(), "metis");
  const std::string flag = "--partition-dir " + d.str();

  fs::remove(d.file("part-1.h5"));
  std::string msg = input_error([&] { adgnn::read_part(d.str(), 1, 3, hash); });
  EXPECT_EQ(msg.rfind(flag + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("part-1.h5: no such file"), std::string::npos) << msg;
  EXPECT_EQ(adgnn::read_part(d.str(), 0, 3, hash).rank, 0);  // the others still read

  { std::ofstream(d.file("part-2.h5"), std::ios::binary) << "not hdf5 at all"; }
  msg = input_error([&] { adgnn::read_part(d.str(), 2, 3, hash); });
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;

  // A part file from another partition (same graph, two parts) copied in is refused.
  TempDir e;
  adgnn::write_partition(g, adgnn::partition_graph(g, 2), e.str(), "metis");
  fs::copy_file(e.file("part-0.h5"), d.file("part-0.h5"), fs::copy_options::overwrite_existing);
  msg = input_error([&] { adgnn::read_part(d.str(), 0, 3, hash); });
  EXPECT_NE(msg.find("the manifest says rank 0 of 3"), std::string::npos) << msg;

  // A part file of another kind: arrays written by hand, no partition attributes.
  adgnn::write_arrays_h5(d.file("part-0.h5"), {}, {{"format", "something-else"}});
  msg = input_error([&] { adgnn::read_part(d.str(), 0, 3, hash); });
  EXPECT_NE(msg.find("not a partition part file"), std::string::npos) << msg;

  { std::ofstream(d.file("manifest.json")) << "{ \"format\": "; }
  EXPECT_EQ(input_error([&] { adgnn::read_part(d.str(), 0, 3, hash); }),
            flag + ": manifest.json is not valid JSON (corrupt?)");
  fs::remove(d.file("manifest.json"));
  EXPECT_NE(input_error([&] { adgnn::read_part(d.str(), 0, 3, hash); }).find("no manifest.json"),
            std::string::npos);
}

TEST(PartitionFolder, RewriteWithFewerPartsRemovesStaleFiles) {
  const Graph g = adgnn::test::small_csbm();
  TempDir d;
  adgnn::write_partition(g, adgnn::partition_graph(g, 4), d.str(), "metis");
  ASSERT_TRUE(fs::exists(d.file("part-3.h5")));
  adgnn::write_partition(g, adgnn::partition_graph(g, 2), d.str(), "metis");
  EXPECT_FALSE(fs::exists(d.file("part-2.h5")));
  EXPECT_FALSE(fs::exists(d.file("part-3.h5")));
  EXPECT_EQ(manifest(d)["parts"], 2);
  EXPECT_EQ(adgnn::read_part(d.str(), 1, 2, adgnn::graph_fingerprint(g)).parts, 2);
}
