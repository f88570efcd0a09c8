// Training: AD-GCN_fast against GCN on a heterophilic graph, checkpoint/resume, configs, errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "adgnn/model.h"
#include "adgnn/partition.h"
#include "adgnn/trainer.h"

namespace {

std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("adgnn-trainer-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

adgnn::Graph heterophilic(uint64_t seed) {
  adgnn::CsbmParams p;
  p.nodes = 1200;
  p.classes = 4;
  p.avg_degree = 8;
  p.homophily = 0.1;
  p.features = 16;
  p.separation = 3;
  p.degree_dist = "powerlaw";
  p.seed = seed;
  return adgnn::generate_csbm(p);
}

adgnn::TrainConfig base() {
  adgnn::TrainConfig c;
  c.model.hidden = 32;
  c.model.layers = 2;
  c.epochs = 60;
  c.lr = 0.01;
  c.progress = false;
  c.threads = 1;
  return c;
}

// The paper's case: on a strongly heterophilic graph, nodes that stop aggregating (T(v) = 0 for
// most of them when lambda > 0) beat a GCN that must mix in mostly other-class neighbours.
TEST(Training, AdGcnFastBeatsGcnOnAHeterophilicGraph) {
  double gcn = 0, ad = 0;
  for (uint64_t seed : {1, 2, 3}) {
    const auto g = heterophilic(seed);
    auto c = base();
    c.model.seed = seed;
    c.model.lambda = 0.8;
    c.model.variant = adgnn::Variant::Plain;
    gcn += adgnn::train_run(g, c, 0).test_at_best / 3;
    c.model.variant = adgnn::Variant::AdFast;
    ad += adgnn::train_run(g, c, 0).test_at_best / 3;
  }
  EXPECT_GT(ad, gcn + 0.10) << "AD-GCN_fast " << ad << " vs GCN " << gcn;
}

// The ordering by depth benefit (`adgnn data reorder --method benefit`): renumbered by
// partition/'s fast score, AD-GCN_fast's eps_tilde is non-increasing over the rows, so every
// layer's active rows (and its surrogate band) are a prefix. On the generator's order they are not.
TEST(BenefitOrder, MakesEveryLayersActiveRowsAPrefix) {
  const adgnn::Graph g = heterophilic(4);
  const adgnn::Graph by_benefit = adgnn::permute_nodes(g, adgnn::locality_order(g, "benefit", 1));
  adgnn::ModelConfig m;
  m.variant = adgnn::Variant::AdFast;
  m.layers = 4;
  m.hidden = 16;
  m.in_dim = g.features.cols;
  m.out_dim = g.num_classes;
  m.normalisation = "log";  // depths spread over 1..4 (the linear one puts most nodes at 1)
  m.seed = 5;
  auto forward = [&](const adgnn::Graph& graph) {
    const auto t = adgnn::to_tensors(graph, c10::Device(c10::kCPU));
    adgnn::Model model(m);
    return model.forward(adgnn::message_graph(t), t.x, true, 0);
  };
  auto non_increasing = [](const at::Tensor& v) {
    const at::Tensor c = v.contiguous();
    return c.slice(0, 1).le(c.slice(0, 0, -1)).all().item<bool>();
  };
  const auto plain = forward(g), sorted = forward(by_benefit);
  EXPECT_FALSE(non_increasing(plain.depth));
  EXPECT_TRUE(non_increasing(sorted.eps));
  EXPECT_TRUE(non_increasing(sorted.depth));
  const at::Tensor d = sorted.depth.contiguous();
  EXPECT_GE(d.slice(0, 1).ne(d.slice(0, 0, -1)).sum().item<int64_t>() + 1, 3) << "too few depths to mean much";
  // The same graph: the same depths, renumbered.
  EXPECT_TRUE(std::get<0>(plain.depth.sort()).equal(std::get<0>(sorted.depth.sort())));
  ASSERT_EQ(sorted.stats.computed_rows.size(), 4u);
  for (size_t t = 1; t < 4; ++t) {
    EXPECT_LE(sorted.stats.computed_rows[t], sorted.stats.computed_rows[t - 1]);
    EXPECT_EQ(sorted.stats.active_rows[t], sorted.depth.gt(int64_t(t)).sum().item<int64_t>());
  }
}

TEST(Training, ResumeContinuesExactlyWhereItStopped) {
  const auto g = heterophilic(5);
  const std::string dir = scratch("resume");
  for (const char* variant : {"plain", "ad", "ad_sharp"}) {
    auto c = base();
    c.model.variant = adgnn::parse_variant(variant);
    c.model.dropout = 0.5;
    c.model.batchnorm = true;
    c.model.layers = 3;
    c.epochs = 24;
    c.checkpoint = dir + "/straight-" + variant + ".h5";
    c.checkpoint_every = 5;
    const auto straight = adgnn::train_run(g, c, 0);
    // Interrupted after 12 epochs (a checkpoint at 10 and the last one at 12), then resumed.
    c.checkpoint = dir + "/split-" + variant + ".h5";
    c.epochs = 12;
    adgnn::train_run(g, c, 0);
    c.epochs = 24;
    c.resume = true;
    const auto resumed = adgnn::train_run(g, c, 0);
    EXPECT_EQ(resumed.best_epoch, straight.best_epoch) << variant;
    EXPECT_EQ(resumed.best_val, straight.best_val) << variant;
    EXPECT_EQ(resumed.test_at_best, straight.test_at_best) << variant;
    std::map<std::string, std::string> a1, a2;
    const auto p1 = adgnn::read_arrays_h5(dir + "/straight-" + std::string(variant) + ".h5", &a1);
    const auto p2 = adgnn::read_arrays_h5(c.checkpoint, &a2);
    EXPECT_EQ(a1.at("epoch"), "24");
    EXPECT_EQ(a2.at("epoch"), "24");
    for (const auto& [name, arr] : p1) {
      if (name.rfind("param/", 0) == 0 || name.rfind("buffer/", 0) == 0 || name.rfind("adam/", 0) == 0) {
        EXPECT_EQ(arr.bytes, p2.at(name).bytes) << variant << " " << name;
      }
    }
  }
  // A checkpoint of another configuration is refused.
  auto c = base();
  c.model.variant = adgnn::Variant::Ad;
  c.model.layers = 3;
  c.model.hidden = 16;
  c.checkpoint = dir + "/split-ad.h5";
  c.resume = true;
  EXPECT_THROW(adgnn::train_run(g, c, 0), adgnn::InputError);
}

TEST(Training, MetricsPredictionsAndSplits) {
  const auto g = heterophilic(6);
  const std::string dir = scratch("outputs");
  auto c = base();
  c.model.variant = adgnn::Variant::AdFast;
  c.epochs = 5;
  c.metrics = dir + "/m.jsonl";
  c.predictions = dir + "/p.h5";
  const auto r = adgnn::train_run(g, c, 0);
  std::ifstream in(c.metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_NE(line.find("\"edges_processed\""), std::string::npos);
    const auto j = nlohmann::json::parse(line);
    // The host's share of the step: positive, and never past the step itself.
    EXPECT_GT(j.at("train_issue_ms").get<double>(), 0.0);
    EXPECT_LE(j.at("train_issue_ms").get<double>(), j.at("train_step_ms").get<double>());
    // The step's phases (one process: the slowest rank is the fastest), each within the step,
    // together no longer than it.
    const auto& phases = j.at("train_phase_ms");
    double sum = 0;
    for (const char* name : {"forward", "backward", "allreduce", "optimizer"}) {
      ASSERT_TRUE(phases.contains(name)) << name;
      const double lo = phases.at(name).at("min").get<double>(), hi = phases.at(name).at("max").get<double>();
      EXPECT_EQ(lo, hi) << name;
      EXPECT_GE(lo, 0.0) << name;
      sum += hi;
    }
    EXPECT_GT(phases.at("forward").at("max").get<double>(), 0.0);
    EXPECT_LE(sum, j.at("train_step_ms").get<double>() + 1e-6);
  }
  EXPECT_EQ(lines, 5);
  const auto p = adgnn::read_arrays_h5(c.predictions, nullptr);
  EXPECT_EQ(p.at("logits").shape, (std::vector<int64_t>{1200, 4}));
  EXPECT_EQ(p.at("depth").shape, (std::vector<int64_t>{1200}));
  EXPECT_EQ(r.depth_histogram.size(), 3u);
  c.splits = "geom-gcn";
  EXPECT_THROW(adgnn::train_run(g, c, 0), adgnn::InputError);
}

// Concurrent runs (--run-workers) compute what sequential one-thread runs compute, in run order.
TEST(Training, ConcurrentRunsEqualSequentialRuns) {
  const auto g = heterophilic(4);
  auto c = base();
  c.epochs = 15;
  c.runs = 4;
  c.model.variant = adgnn::Variant::AdFast;
  c.model.lambda = 0.1;
  const adgnn::TrainSummary seq = adgnn::train(g, c);
  c.run_workers = 3;
  c.threads = 0;
  const adgnn::TrainSummary par = adgnn::train(g, c);
  ASSERT_EQ(par.runs.size(), seq.runs.size());
  for (size_t r = 0; r < seq.runs.size(); ++r) {
    EXPECT_EQ(par.runs[r].run, int64_t(r));
    EXPECT_EQ(par.runs[r].best_epoch, seq.runs[r].best_epoch) << "run " << r;
    EXPECT_EQ(par.runs[r].best_val, seq.runs[r].best_val) << "run " << r;
    EXPECT_EQ(par.runs[r].test_at_best, seq.runs[r].test_at_best) << "run " << r;
    EXPECT_EQ(par.runs[r].depth_histogram, seq.runs[r].depth_histogram) << "run " << r;
  }
  EXPECT_EQ(par.test_mean, seq.test_mean);
  // A failing run stops the others and its error reaches the caller.
  c.splits = "no-such-family";
  EXPECT_THROW(adgnn::train(g, c), adgnn::InputError);
  c = base();
  c.run_workers = 0;
  EXPECT_THROW(adgnn::validate_train_config(c), adgnn::InputError);
}

// Every shipped config (configs/<dataset>.yaml, configs/<dataset>/<backbone>[.plain|.log].yaml)
// loads, passes validation, builds its model, and names the dataset of its folder.
TEST(Config, EveryShippedConfigLoads) {
  namespace fs = std::filesystem;
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(ADGNN_CONFIGS_DIR)) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    adgnn::TrainConfig c;
    ASSERT_NO_THROW(adgnn::load_train_config(e.path().string(), c));
    ASSERT_NO_THROW(adgnn::validate_train_config(c));
    const std::string folder = e.path().parent_path().filename().string();
    const std::string stem = e.path().stem().string();
    // configs/demo.yaml is the README's job on the generated graph.
    EXPECT_EQ(c.dataset, folder != "configs" ? folder : stem == "demo" ? "csbm:demo" : stem);
    adgnn::ModelConfig m = c.model;
    m.in_dim = 5;
    m.out_dim = 3;
    EXPECT_NO_THROW(adgnn::Model{m});
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(Config, YamlAndErrors) {
  const std::string dir = scratch("config");
  {
    std::ofstream f(dir + "/ok.yaml");
    f << "model: sage\nvariant: ad_fast\nhidden: 16\nlayers: 3\nlambda: 0.1\nepochs: 7\nlr: 0.005\n";
  }
  adgnn::TrainConfig c;
  adgnn::load_train_config(dir + "/ok.yaml", c);
  EXPECT_EQ(c.model.backbone, adgnn::Backbone::Sage);
  EXPECT_EQ(c.model.variant, adgnn::Variant::AdFast);
  EXPECT_EQ(c.model.layers, 3);
  EXPECT_EQ(c.epochs, 7);
  auto expect_bad = [&](const std::string& text, const std::string& fragment) {
    std::ofstream(dir + "/bad.yaml") << text;
    adgnn::TrainConfig x;
    try {
      adgnn::load_train_config(dir + "/bad.yaml", x);
      FAIL() << "accepted: " << text;
    } catch (const adgnn::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
    }
  };
  expect_bad("model: gcn\nhiden: 3\n", "unknown key 'hiden'");
  expect_bad("epochs: many\n", "'epochs'");
  expect_bad("model: [gcn\n", "invalid YAML");
  expect_bad("- 1\n- 2\n", "mapping");
  auto t = base();
  t.epochs = 0;
  EXPECT_THROW(adgnn::validate_train_config(t), adgnn::InputError);
  t = base();
  t.resume = true;
  EXPECT_THROW(adgnn::validate_train_config(t), adgnn::InputError);
}

}  // namespace

namespace {

TEST(Sweep, GridBestByValidationAndResume) {
  const std::string dir = scratch("sweep");
  {
    std::ofstream f(dir + "/grid.yaml");
    f << "lambda: [0.0, 0.8]\nlr: [0.01, 0.02]\n";
  }
  adgnn::CsbmParams p;
  p.nodes = 300;
  p.classes = 3;
  p.homophily = 0.1;
  p.separation = 3;
  p.features = 8;
  const auto g = adgnn::generate_csbm(p);
  auto c = base();
  c.model.variant = adgnn::Variant::AdFast;
  c.epochs = 15;
  adgnn::SweepOptions opt;
  opt.grid = dir + "/grid.yaml";
  opt.out = dir + "/results.jsonl";
  opt.progress = false;
  EXPECT_EQ(adgnn::expand_grid(c, opt.grid).size(), 4u);
  EXPECT_EQ(adgnn::expand_grid(c, "paper").size(), 1944u);
  const auto r1 = adgnn::sweep(g, c, opt);
  ASSERT_EQ(r1.points.size(), 4u);
  for (const auto& pt : r1.points) EXPECT_LE(pt.val_mean, r1.points[r1.best].val_mean);
  // Interrupted sweep: drop the last finished line and tear the one before, then rerun.
  std::vector<std::string> lines;
  {
    std::ifstream in(opt.out);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 4u);
  {
    std::ofstream out(opt.out, std::ios::trunc);
    out << lines[0] << '\n' << lines[1] << '\n' << lines[2].substr(0, 20);
  }
  const auto r2 = adgnn::sweep(g, c, opt);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r2.points[i].val_mean, r1.points[i].val_mean) << i;
  EXPECT_EQ(r2.best, r1.best);
  std::ofstream(dir + "/bad.yaml") << "lamda: [0.1]\n";
  opt.grid = dir + "/bad.yaml";
  EXPECT_THROW(adgnn::sweep(g, c, opt), adgnn::InputError);
}

}  // namespace

// Unlabelled nodes (ogbn-papers100M's kind) are in no set of the seeded random split: with a
// third of the nodes unlabelled, training runs (an unlabelled node in the training set would
// index the loss with label -1 and fail) and learns from the labelled ones.
TEST(Training, RandomSplitLeavesUnlabelledNodesOut) {
  adgnn::Graph g = heterophilic(4);
  g.splits.clear();
  for (int64_t v = 0; v < g.num_nodes; v += 3) g.labels[size_t(v)] = adgnn::kUnlabelled;
  g.validate("test");
  auto c = base();
  c.epochs = 20;
  c.splits = "random";
  const adgnn::RunResult r = adgnn::train_run(g, c, 0);
  EXPECT_GT(r.test_at_best, 0.3);  // 4 classes: chance is 0.25
}

// The configuration line (checkpoint fingerprint, sweep key) carries every setting that changes
// the numbers: another f_delta precision is another line, so a resume that mixes them is refused.
// Settings at their defaults add nothing (lines of earlier runs stay valid).
TEST(Describe, NamesTheFdeltaPrecisionWhenSet) {
  adgnn::TrainConfig a, b;
  b.model.fdelta_precision = "bf16";
  EXPECT_EQ(adgnn::describe(a).find("fdelta_precision"), std::string::npos);
  EXPECT_NE(adgnn::describe(b).find(" fdelta_precision=bf16"), std::string::npos);
  EXPECT_NE(adgnn::describe(a), adgnn::describe(b));
}
