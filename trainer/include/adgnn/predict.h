// adgnn/predict: a trained model (a checkpoint of `adgnn train`) applied to a graph: the training
// graph, or an updated one (new nodes, edges or features of the same width), one process or the
// ranks of a partition folder.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "adgnn/comm.h"
#include "adgnn/partition.h"
#include "adgnn/trainer.h"

namespace adgnn {

// What a checkpoint says about its model, read without the training graph.
struct StoredModel {
  TrainConfig config;         // the settings it was trained with (config.model: in_dim, out_dim set)
  std::string fingerprint;    // its configuration line (describe(), the run and the graph's hash)
  int64_t epoch = 0;          // the epoch its parameters are from
  bool has_benefit_range = false;
};
// InputError naming the file for one that is not an adgnn checkpoint, or one written before
// checkpoints carried their settings.
StoredModel read_stored_model(const std::string& checkpoint);
// The same, and the checkpoint's arrays (parameters "param/<name>", buffers "buffer/<name>",
// "benefit_range", ...).
StoredModel read_stored_model(const std::string& checkpoint, std::map<std::string, H5Array>& arrays);
// The configuration that rebuilds the stored model on `device`: its settings, with the training
// graph's depth-benefit range where the checkpoint has one (path: for the errors).
ModelConfig stored_model_config(const StoredModel& model, const std::map<std::string, H5Array>& arrays,
                                const std::string& path, const std::string& device);

struct PredictOptions {
  std::string checkpoint;
  std::string out;     // HDF5: prediction, probabilities, depth, logits (write_predictions' layout)
  std::string csv;     // optional: node, prediction, depth, p_0..p_{C-1}; empty: none
  std::string device = "cpu";
  std::string precision;  // the activations' storage (ModelConfig::precision); empty: the trained model's
};

struct PredictSummary {
  StoredModel model;
  int64_t nodes = 0;   // over every rank
  std::vector<int64_t> depth_histogram;  // nodes with T(v) = 0..L
};

// Every rank calls it with its part (part.parts == comm's size; comm null: one process). The
// graph must have the model's feature width and, where it has labels, its class count.
PredictSummary predict(const GraphPart& part, const PredictOptions& opt, Communicator* comm = nullptr);

// `adgnn export`: the checkpoint's model as a file that Python's torch.load reads (weights_only
// is enough), a dict:
//   "format": "adgnn-export", "epoch": the parameters' epoch,
//   "config": the model's settings (backbone, variant, in_dim, hidden, out_dim, layers, t_max,
//             heads, batchnorm, dropout, lambda, kappa, normalisation, heuristic,
//             degree_threshold, dirgnn_alpha, float64),
//   "train_config": every setting of the run, as YAML,
//   "state_dict": the parameters and buffers by name, CPU tensors of the model's dtype,
//   "benefit_range": float64 [min, max] of log eps_hat over the training graph (AD under
//                    linear / log).
// python/adgnn_torch rebuilds the model from it. Written atomically; returns what it wrote.
struct ExportSummary {
  StoredModel model;
  int64_t tensors = 0, parameters = 0;  // state_dict entries; learned scalars among them
};
ExportSummary export_model(const std::string& checkpoint, const std::string& out);

}  // namespace adgnn
