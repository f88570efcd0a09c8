// `adgnn predict`: a checkpoint's model rebuilt from the settings it stores, its parameters
// loaded, and one evaluation pass over the graph (or this rank's part of it).
#include "adgnn/predict.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <sstream>

#include "adgnn/loaders.h"
#include "checkpoint_arrays.h"
#include "yaml_config.h"

namespace adgnn {

namespace {

StoredModel stored_model(const std::string& path, std::map<std::string, std::string>& attrs,
                         const std::map<std::string, H5Array>& arrays) {
  if (attrs["format"] != "adgnn-checkpoint") throw InputError(path + ": not an adgnn checkpoint");
  if (attrs.count("train_config") == 0 || attrs.count("in_dim") == 0 || attrs.count("out_dim") == 0)
    throw InputError(path + ": written before checkpoints stored their settings (train it again to predict with it)");
  StoredModel m;
  try {
    apply_yaml(YAML::Load(attrs["train_config"]), m.config, path + " (its settings)");
  } catch (const YAML::Exception& e) {
    throw InputError(path + ": unreadable settings (" + std::string(e.what()) + ")");
  }
  try {
    m.config.model.in_dim = std::stoll(attrs["in_dim"]);
    m.config.model.out_dim = std::stoll(attrs["out_dim"]);
    m.epoch = std::stoll(attrs["epoch"]);
  } catch (const std::exception&) {
    throw InputError(path + ": unreadable widths or epoch");
  }
  m.config.model.float64 = attrs["float64"] == "1";
  m.fingerprint = attrs["config"];
  m.has_benefit_range = arrays.count("benefit_range") > 0;
  return m;
}

}  // namespace

StoredModel read_stored_model(const std::string& checkpoint) {
  std::map<std::string, H5Array> arrays;
  return read_stored_model(checkpoint, arrays);
}

ModelConfig stored_model_config(const StoredModel& m, const std::map<std::string, H5Array>& arrays,
                                const std::string& path, const std::string& device) {
  ModelConfig mc = m.config.model;
  mc.device = device;
  // The training graph's min and max of the depth benefit: a new graph is normalised as the
  // model was trained (a node beyond them is clamped to [0, 1]).
  if (auto it = arrays.find("benefit_range"); it != arrays.end()) {
    at::Tensor r = torch::zeros({2}, torch::kFloat64);
    detail::from_array(it->second, r, path + "[benefit_range]");
    mc.benefit_range = std::make_pair(-r[0].item<double>(), r[1].item<double>());
  }
  return mc;
}

StoredModel read_stored_model(const std::string& checkpoint, std::map<std::string, H5Array>& arrays) {
  std::map<std::string, std::string> attrs;
  arrays = read_arrays_h5(checkpoint, &attrs);
  return stored_model(checkpoint, attrs, arrays);
}

PredictSummary predict(const GraphPart& part, const PredictOptions& opt, Communicator* comm) {
  std::map<std::string, H5Array> stored;
  PredictSummary s;
  s.model = read_stored_model(opt.checkpoint, stored);
  ModelConfig mc = stored_model_config(s.model, stored, opt.checkpoint, opt.device);
  if (!opt.precision.empty()) mc.precision = opt.precision;
  if ((comm ? comm->size() : 1) != part.parts)
    throw InputError("--partition-dir: a part of " + std::to_string(part.parts) + " for a run of " +
                     std::to_string(comm ? comm->size() : 1) + " ranks");
  if (part.features.cols != mc.in_dim)
    throw InputError(fmt::format("{}: {} features per node, but the model of {} takes {}", part.graph_name,
                                 part.features.cols, opt.checkpoint, mc.in_dim));
  if (!part.labels.empty() && part.num_classes != mc.out_dim)
    throw InputError(fmt::format("{}: {} classes, but the model of {} predicts {}", part.graph_name, part.num_classes,
                                 opt.checkpoint, mc.out_dim));
  Model model(mc);
  detail::load_model_state(opt.checkpoint, stored, model);

  const c10::Device device(mc.device);
  const c10::ScalarType dtype = activation_type(mc);
  PartTensors pt = part_tensors(part, device, dtype);
  MessageGraph& mg = pt.graph;
  if (comm) mg.transport = make_rank_transport(*comm, comm->device_memory());
  torch::NoGradGuard no_grad;
  const ForwardOutput ev = model.forward(mg, pt.x, false, s.model.epoch);
  const int64_t n = mg.num_dst;
  std::map<std::string, H5Array> arrays{
      {"prediction", detail::to_array(ev.logits.argmax(1))},
      {"probabilities", detail::to_array(torch::softmax(ev.logits, 1))},
      {"depth", detail::to_array(ev.depth)},
      {"logits", detail::to_array(ev.logits)}};
  if (ev.eps.defined()) arrays["eps"] = detail::to_array(ev.eps.slice(0, 0, n));
  const at::Tensor owned_gid = mg.global_id.to(torch::kCPU).slice(0, 0, n);
  write_predictions(opt.out, std::move(arrays), owned_gid, part, s.model.fingerprint, comm);

  std::vector<int64_t> counts{n};
  const at::Tensor hist = torch::bincount(ev.depth.to(torch::kCPU), {}, mc.layers + 1);
  counts.insert(counts.end(), hist.data_ptr<int64_t>(), hist.data_ptr<int64_t>() + hist.numel());
  if (comm) host_allreduce(*comm, counts.data(), int64_t(counts.size()), DType::I64, ReduceOp::Sum);
  s.nodes = counts[0];
  s.depth_histogram.assign(counts.begin() + 1, counts.end());

  // The CSV: rank 0 reads every row back (the index assembles the parts in node order).
  if (!opt.csv.empty()) {
    if (comm) comm->barrier();
    if (!comm || comm->rank() == 0) {
      const auto all = read_predictions(opt.out, nullptr);
      const H5Array& pred = all.at("prediction");
      const H5Array& depth = all.at("depth");
      const H5Array& prob = all.at("probabilities");
      const auto* pv = reinterpret_cast<const int64_t*>(pred.bytes.data());
      const auto* dv = reinterpret_cast<const int64_t*>(depth.bytes.data());
      const int64_t N = pred.shape[0], C = prob.shape[1];
      std::string csv = "node,prediction,depth";
      for (int64_t c = 0; c < C; ++c) csv += fmt::format(",p_{}", c);
      csv += '\n';
      auto prob_at = [&](int64_t v, int64_t c) {
        return prob.dtype == "f64" ? reinterpret_cast<const double*>(prob.bytes.data())[v * C + c]
                                   : double(reinterpret_cast<const float*>(prob.bytes.data())[v * C + c]);
      };
      for (int64_t v = 0; v < N; ++v) {
        csv += fmt::format("{},{},{}", v, pv[v], dv[v]);
        for (int64_t c = 0; c < C; ++c) csv += fmt::format(",{:.9g}", prob_at(v, c));
        csv += '\n';
      }
      write_file_atomic(opt.csv, csv);
    }
  }
  return s;
}

}  // namespace adgnn
