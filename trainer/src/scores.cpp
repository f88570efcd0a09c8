// Scores of a split (--metric), exact over the ranks of a distributed run.
#include "adgnn/scores.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "adgnn/loaders.h"
#include "adgnn/trainer.h"

namespace adgnn {

namespace {

struct MetricName {
  Metric metric;
  const char* name;   // flags, keys, JSON
  const char* title;  // table headers
};
constexpr MetricName kMetrics[] = {
    {Metric::Accuracy, "accuracy", "acc"}, {Metric::RocAuc, "roc_auc", "ROC AUC"}, {Metric::MacroF1, "macro_f1", "macro F1"}};

const MetricName& entry(Metric m) {
  for (const auto& e : kMetrics)
    if (e.metric == m) return e;
  return kMetrics[0];  // unreachable: every enumerator is in the table
}

}  // namespace

std::string to_string(Metric m) { return entry(m).name; }
std::string metric_title(Metric m) { return entry(m).title; }

Metric parse_metric(const std::string& name, const std::string& flag) {
  for (const auto& e : kMetrics)
    if (name == e.name) return e.metric;
  throw InputError(flag + " " + name + ": expected auto, accuracy, roc_auc or macro_f1");
}

Metric resolve_metric(const std::string& setting, int64_t num_classes, bool has_platonov_splits) {
  if (setting != "auto") return parse_metric(setting, "--metric");
  return num_classes == 2 && has_platonov_splits ? Metric::RocAuc : Metric::Accuracy;
}

namespace {

void sum_over_ranks(Communicator* comm, std::vector<int64_t>& v) {
  if (comm && comm->size() > 1 && !v.empty()) host_allreduce(*comm, v.data(), int64_t(v.size()), DType::I64, ReduceOp::Sum);
}

std::vector<double> host_doubles(const at::Tensor& t) {
  const at::Tensor c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace

RocAuc roc_auc(const std::vector<double>& positive, const std::vector<double>& negative, Communicator* comm) {
  const int P = comm ? comm->size() : 1, me = comm ? comm->rank() : 0;
  // Per rank: positives, negatives; and NaN scores anywhere. Every rank takes every collective.
  std::vector<int64_t> counts(size_t(2 * P + 1), 0);
  counts[size_t(2 * me)] = int64_t(positive.size());
  counts[size_t(2 * me + 1)] = int64_t(negative.size());
  auto is_nan = [](double s) { return std::isnan(s); };
  counts[size_t(2 * P)] = std::count_if(positive.begin(), positive.end(), is_nan) +
                          std::count_if(negative.begin(), negative.end(), is_nan);
  sum_over_ranks(comm, counts);
  RocAuc r;
  int64_t small_offset = 0;
  for (int p = 0; p < P; ++p) {
    r.positives += counts[size_t(2 * p)];
    r.negatives += counts[size_t(2 * p + 1)];
  }
  if (r.positives == 0 || r.negatives == 0 || counts[size_t(2 * P)] > 0) {
    r.auc = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  // The smaller class's scores on every rank: each rank writes its own at its offset into zeros
  // and the ranks sum (x + 0 == x: exact).
  const bool gather_positives = r.positives <= r.negatives;
  for (int p = 0; p < me; ++p) small_offset += counts[size_t(2 * p + (gather_positives ? 0 : 1))];
  const std::vector<double>& mine = gather_positives ? positive : negative;
  const std::vector<double>& larger = gather_positives ? negative : positive;
  std::vector<double> small(size_t(gather_positives ? r.positives : r.negatives), 0.0);
  std::copy(mine.begin(), mine.end(), small.begin() + small_offset);
  if (comm && comm->size() > 1) host_allreduce(*comm, small.data(), int64_t(small.size()), DType::F64, ReduceOp::Sum);
  std::sort(small.begin(), small.end());
  // Pairs (positive, negative) with the positive above, and tied pairs, over this rank's rows of
  // the larger class.
  std::vector<int64_t> pairs{0, 0};
  for (double s : larger) {
    const auto lo = std::lower_bound(small.begin(), small.end(), s);
    const auto hi = std::upper_bound(lo, small.end(), s);
    pairs[0] += gather_positives ? small.end() - hi : lo - small.begin();
    pairs[1] += hi - lo;
  }
  sum_over_ranks(comm, pairs);
  r.auc = (double(pairs[0]) + 0.5 * double(pairs[1])) / (double(r.positives) * double(r.negatives));
  return r;
}

std::vector<double> score_splits(Metric m, const at::Tensor& logits, const at::Tensor& labels,
                                 const std::vector<at::Tensor>& masks, Communicator* comm) {
  torch::NoGradGuard no_grad;
  const int64_t C = logits.size(1), S = int64_t(masks.size());
  std::vector<double> out(size_t(S), 0.0);
  if (m == Metric::Accuracy) {
    // Hits and rows per split, in one transfer and one reduction.
    const at::Tensor hit = logits.argmax(1).eq(labels);
    std::vector<at::Tensor> parts;
    for (const auto& mask : masks) parts.push_back((hit & mask).sum());
    for (const auto& mask : masks) parts.push_back(mask.sum());
    const at::Tensor c = torch::stack(parts).to(torch::kCPU, torch::kInt64).contiguous();
    std::vector<int64_t> v(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
    sum_over_ranks(comm, v);
    for (int64_t k = 0; k < S; ++k) out[size_t(k)] = v[size_t(S + k)] > 0 ? double(v[size_t(k)]) / double(v[size_t(S + k)]) : 0.0;
    return out;
  }
  if (m == Metric::MacroF1) {
    // Per split the confusion matrix [label][prediction], summed over the ranks in one reduction.
    const at::Tensor pred = logits.argmax(1);
    const at::Tensor cell = labels.to(torch::kInt64) * C + pred;
    std::vector<at::Tensor> parts;
    for (const auto& mask : masks) parts.push_back(torch::bincount(cell.masked_select(mask), {}, C * C));
    const at::Tensor c = torch::stack(parts).to(torch::kCPU, torch::kInt64).contiguous();
    std::vector<int64_t> v(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
    sum_over_ranks(comm, v);
    for (int64_t k = 0; k < S; ++k) {
      const int64_t* cm = v.data() + k * C * C;
      double sum = 0;
      int64_t present = 0;
      for (int64_t a = 0; a < C; ++a) {
        int64_t tp = cm[a * C + a], fp = 0, fn = 0;
        for (int64_t b = 0; b < C; ++b)
          if (b != a) fp += cm[b * C + a], fn += cm[a * C + b];
        if (tp + fp + fn == 0) continue;  // neither a label nor a prediction in this split
        sum += 2.0 * double(tp) / double(2 * tp + fp + fn);
        ++present;
      }
      out[size_t(k)] = present > 0 ? sum / double(present) : 0.0;
    }
    return out;
  }
  // ROC AUC: per split and class, the class's rows against the rest.
  if (C < 2) throw InputError("--metric roc_auc: the graph has one class");
  const at::Tensor score = C == 2 ? (logits.select(1, 1) - logits.select(1, 0)).unsqueeze(1) : torch::softmax(logits, 1);
  const int64_t classes = C == 2 ? 1 : C;  // two classes: class 1 against class 0
  for (int64_t k = 0; k < S; ++k) {
    double sum = 0;
    int64_t counted = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t cls = C == 2 ? 1 : c;
      const at::Tensor is_c = labels.eq(cls);
      const at::Tensor s = score.select(1, c);
      const RocAuc r = roc_auc(host_doubles(s.masked_select(masks[size_t(k)] & is_c)),
                               host_doubles(s.masked_select(masks[size_t(k)] & ~is_c)), comm);
      if (r.positives == 0 || r.negatives == 0) continue;  // the class is not in this split (or is all of it)
      sum += r.auc;  // NaN scores make the mean NaN
      ++counted;
    }
    out[size_t(k)] = counted > 0 ? sum / double(counted) : 0.0;
  }
  return out;
}

}  // namespace adgnn
