// `adgnn export`: a checkpoint's model as a torch.load-able dict (adgnn/predict.h).
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include <map>

#include "adgnn/loaders.h"
#include "adgnn/predict.h"
#include "checkpoint_arrays.h"

namespace adgnn {

namespace {

// torch.save's zip layout, written the way torch::pickle_save writes it, but with containers
// pickled untagged: torch.load's weights_only unpickler refuses TorchScript's type tags
// (torch.jit._pickle.restore_type_tag), and plain dicts, lists and tensors need none.
std::string torch_save_bytes(const c10::IValue& value) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler([&](const char* p, size_t n) { pickled.insert(pickled.end(), p, p + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
    out.append(static_cast<const char*>(p), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return out;
}

}  // namespace

ExportSummary export_model(const std::string& checkpoint, const std::string& out) {
  std::map<std::string, H5Array> arrays;
  ExportSummary s;
  s.model = read_stored_model(checkpoint, arrays);
  const ModelConfig mc = stored_model_config(s.model, arrays, checkpoint, "cpu");
  Model model(mc);
  detail::load_model_state(checkpoint, arrays, model);

  c10::impl::GenericDict config(c10::StringType::get(), c10::AnyType::get());
  config.insert("backbone", std::string(to_string(mc.backbone)));
  config.insert("variant", std::string(to_string(mc.variant)));
  config.insert("in_dim", mc.in_dim);
  config.insert("hidden", mc.hidden);
  config.insert("out_dim", mc.out_dim);
  config.insert("layers", mc.layers);
  config.insert("t_max", mc.t_max > 0 ? mc.t_max : mc.layers);
  config.insert("heads", mc.heads);
  config.insert("batchnorm", mc.batchnorm);
  config.insert("dropout", mc.dropout);
  config.insert("lambda", mc.lambda);
  config.insert("kappa", mc.kappa);
  config.insert("normalisation", mc.normalisation);
  config.insert("heuristic", mc.same_label_heuristic);
  config.insert("degree_threshold", mc.degree_threshold);
  config.insert("dirgnn_alpha", mc.dirgnn_alpha);
  config.insert("float64", mc.float64);

  c10::Dict<std::string, at::Tensor> state;
  for (const auto& [name, p] : model.named_parameters()) {
    state.insert(name, p.detach().cpu().clone());
    s.parameters += p.numel();
  }
  for (const auto& [name, b] : model.named_buffers()) state.insert(name, b.detach().cpu().clone());
  s.tensors = int64_t(state.size());

  c10::impl::GenericDict file(c10::StringType::get(), c10::AnyType::get());
  file.insert("format", std::string("adgnn-export"));
  file.insert("epoch", s.model.epoch);
  file.insert("config", config);
  file.insert("train_config", to_yaml(s.model.config));
  file.insert("state_dict", state);
  if (mc.benefit_range)
    file.insert("benefit_range",
                torch::tensor({mc.benefit_range->first, mc.benefit_range->second}, torch::kFloat64));
  write_file_atomic(out, torch_save_bytes(c10::IValue(file)));
  return s;
}

}  // namespace adgnn
