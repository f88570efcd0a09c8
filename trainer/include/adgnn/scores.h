// adgnn/scores: how a model's predictions on a split are scored (--metric), exactly and over the
// ranks of a distributed run: every rank holds the rows it owns and gets the score of the whole
// split, equal to what one process computes on every row.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "adgnn/comm.h"

namespace adgnn {

enum class Metric {
  Accuracy,  // share of rows whose highest logit is their label
  RocAuc,    // area under the ROC curve (binary: of logit_1 - logit_0; else one-vs-rest, macro)
  MacroF1,   // F1 per class, averaged over the classes that occur among labels or predictions
};

std::string to_string(Metric m);  // "accuracy", "roc_auc", "macro_f1"
std::string metric_title(Metric m);  // "acc", "ROC AUC", "macro F1": table headers
// A metric named where it enters (`flag` names the flag or key in the error); "auto" is not a
// metric: resolve_metric() says what it stands for on a graph.
Metric parse_metric(const std::string& name, const std::string& flag);
// What a --metric setting ("auto" or a metric's name) means on a graph with `num_classes` classes:
// auto is ROC AUC for a binary graph that carries Platonov et al.'s splits (minesweeper, tolokers,
// questions: their field scores them so), accuracy otherwise.
Metric resolve_metric(const std::string& setting, int64_t num_classes, bool has_platonov_splits);

// ROC AUC of one class against the rest, exactly: the share of (positive, negative) pairs where
// the positive scores higher, a tie counting one half (the Mann-Whitney U statistic over
// n_pos * n_neg, which is what the rank formula and scikit-learn's roc_auc_score compute).
// `positive` and `negative` are this rank's scores; comm (null: one process) joins the ranks,
// and every rank must call. Over the ranks, the scores of the smaller class are gathered (at most
// half of the split on every rank) and each rank counts its rows of the larger one against them.
struct RocAuc {
  double auc = 0;  // NaN when either class is empty over the ranks, or a score is NaN
  int64_t positives = 0, negatives = 0;  // over the ranks
};
RocAuc roc_auc(const std::vector<double>& positive, const std::vector<double>& negative, Communicator* comm);

// The metric on each split of this rank's owned rows (logits [rows, classes], labels [rows],
// masks: bool [rows] each), over every rank's rows; every rank calls and gets the same scores.
//   accuracy: hits over rows.
//   roc_auc: two classes: ROC AUC of logit_1 - logit_0 for class 1; more: the mean over the
//     classes of class c's ROC AUC against the rest by its softmax probability, over the classes
//     that have rows in the split (scikit-learn's multi_class="ovr", average="macro", when every
//     class has some).
//   macro_f1: 2 tp / (2 tp + fp + fn) per class, from the confusion counts summed over the
//     ranks, averaged over the classes present among the split's labels or predictions
//     (scikit-learn's f1_score(average="macro")).
// A split without rows scores 0.
std::vector<double> score_splits(Metric m, const at::Tensor& logits, const at::Tensor& labels,
                                 const std::vector<at::Tensor>& masks, Communicator* comm);

}  // namespace adgnn
