// Scores (adgnn/scores.h) against scikit-learn on the fixtures tests/trainer/sklearn_reference.py
// writes (skipped when they are absent: no python with scikit-learn), and their edge cases.
// Tolerance: ROC AUC and macro F1 are ratios of exact counts, so 1e-12 (the last bits of the
// final division, computed in another order) is all that separates them from scikit-learn.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "adgnn/loaders.h"
#include "adgnn/scores.h"
#include "nlohmann/json.hpp"

namespace {

using adgnn::Metric;

at::Tensor matrix(const nlohmann::json& rows) {
  const int64_t n = int64_t(rows.size()), c = int64_t(rows[0].size());
  at::Tensor t = torch::empty({n, c}, torch::kFloat64);
  auto a = t.accessor<double, 2>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) a[i][j] = rows[size_t(i)][size_t(j)].get<double>();
  return t;
}

TEST(Scores, MatchScikitLearn) {
  const std::string path = std::string(ADGNN_SKLEARN_REF_DIR) + "/scores.json";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent (ctest -R sklearn_reference writes it; needs python with scikit-learn)";
  std::ifstream in(path);
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const at::Tensor logits = matrix(c["logits"]);
    const at::Tensor labels = torch::tensor(c["labels"].get<std::vector<int64_t>>(), torch::kInt64);
    const at::Tensor mask = torch::tensor(c["mask"].get<std::vector<int64_t>>(), torch::kInt64).to(torch::kBool);
    const Metric m = adgnn::parse_metric(c["metric"].get<std::string>(), "fixture");
    // The same rows as one split and, with an empty split beside it, as the middle one.
    const auto got = adgnn::score_splits(m, logits, labels, {torch::zeros_like(mask), mask, mask}, nullptr);
    const double want = c["expected"].get<double>();
    EXPECT_NEAR(got[1], want, 1e-12) << c["name"] << " " << c["metric"];
    EXPECT_EQ(got[1], got[2]) << c["name"];
    EXPECT_EQ(got[0], 0.0) << c["name"] << ": a split without rows scores 0";
  }
}

TEST(Scores, RocAucCountsTiesAsHalf) {
  // Pairs (p, n): (3,1) above, (3,3) tie, (1,1) tie, (1,3) below: (1 + 0.5 + 0.5) / 4.
  const auto r = adgnn::roc_auc({3.0, 1.0}, {1.0, 3.0}, nullptr);
  EXPECT_DOUBLE_EQ(r.auc, 0.5);
  EXPECT_EQ(r.positives, 2);
  EXPECT_EQ(r.negatives, 2);
  EXPECT_DOUBLE_EQ(adgnn::roc_auc({2.0, 5.0}, {1.0, 0.0, -4.0}, nullptr).auc, 1.0);
  EXPECT_DOUBLE_EQ(adgnn::roc_auc({-2.0}, {1.0, 0.0, -1.0}, nullptr).auc, 0.0);
  // More positives than negatives: the negatives are the ones gathered; the same value.
  EXPECT_DOUBLE_EQ(adgnn::roc_auc({1.0, 3.0, 2.0, 2.0}, {2.0}, nullptr).auc, (1.0 + 0.5 * 2) / 4);
}

TEST(Scores, RocAucIsNanWithoutBothClassesOrWithNanScores) {
  EXPECT_TRUE(std::isnan(adgnn::roc_auc({1.0}, {}, nullptr).auc));
  EXPECT_TRUE(std::isnan(adgnn::roc_auc({}, {}, nullptr).auc));
  EXPECT_TRUE(std::isnan(adgnn::roc_auc({1.0, std::nan("")}, {0.0}, nullptr).auc));
}

TEST(Scores, AutoIsRocAucForBinaryPlatonovGraphsOnly) {
  EXPECT_EQ(adgnn::resolve_metric("auto", 2, true), Metric::RocAuc);
  EXPECT_EQ(adgnn::resolve_metric("auto", 2, false), Metric::Accuracy);
  EXPECT_EQ(adgnn::resolve_metric("auto", 5, true), Metric::Accuracy);  // chameleon, squirrel
  EXPECT_EQ(adgnn::resolve_metric("macro_f1", 2, true), Metric::MacroF1);
  EXPECT_EQ(adgnn::resolve_metric("accuracy", 2, true), Metric::Accuracy);
  for (Metric m : {Metric::Accuracy, Metric::RocAuc, Metric::MacroF1})
    EXPECT_EQ(adgnn::parse_metric(adgnn::to_string(m), "--metric"), m);
  try {
    adgnn::parse_metric("f1", "--metric");
    FAIL() << "f1 was accepted";
  } catch (const adgnn::InputError& e) {
    EXPECT_STREQ(e.what(), "--metric f1: expected auto, accuracy, roc_auc or macro_f1");
  }
}

TEST(Scores, MulticlassRocAucSkipsClassesAbsentFromTheSplit) {
  // Class 2 has no row in the split: the mean is over classes 0 and 1, each separated perfectly.
  const at::Tensor logits = torch::tensor({{3.0, 0.0, 0.0}, {2.5, 0.0, 0.0}, {0.0, 3.0, 0.0}, {0.0, 2.0, 0.1}},
                                          torch::kFloat64);
  const at::Tensor labels = torch::tensor({0, 0, 1, 1}, torch::kInt64);
  const at::Tensor all = torch::ones({4}, torch::kBool);
  EXPECT_DOUBLE_EQ(adgnn::score_splits(Metric::RocAuc, logits, labels, {all}, nullptr)[0], 1.0);
}

}  // namespace
