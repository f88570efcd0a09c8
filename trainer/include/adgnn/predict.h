// adgnn/predict: a trained model (a checkpoint of `adgnn train`) applied to a graph: the training
// graph, or an updated one (new nodes, edges or features of the same width), one process or the
// ranks of a partition folder.
#pragma once

#include <cstdint>
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

struct PredictOptions {
  std::string checkpoint;
  std::string out;     // HDF5: prediction, probabilities, depth, logits (write_predictions' layout)
  std::string csv;     // optional: node, prediction, depth, p_0..p_{C-1}; empty: none
  std::string device = "cpu";
};

struct PredictSummary {
  StoredModel model;
  int64_t nodes = 0;   // over every rank
  std::vector<int64_t> depth_histogram;  // nodes with T(v) = 0..L
};

// Every rank calls it with its part (part.parts == comm's size; comm null: one process). The
// graph must have the model's feature width and, where it has labels, its class count.
PredictSummary predict(const GraphPart& part, const PredictOptions& opt, Communicator* comm = nullptr);

}  // namespace adgnn
