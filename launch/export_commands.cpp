// `adgnn export`: a trained model (a checkpoint of `adgnn train`) as a file that PyTorch's
// torch.load reads; python/adgnn_torch rebuilds the model from it.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "CLI/CLI.hpp"
#include "adgnn/predict.h"
#include "commands.h"
#include "nlohmann/json.hpp"

namespace adgnn::cli {

namespace {

struct ExportArgs {
  std::string checkpoint, out;
  bool json = false;
};

}  // namespace

void add_export_commands(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("export", "A trained model as a PyTorch file (torch.load): parameters by name and settings");
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("--checkpoint", a->checkpoint, "A checkpoint of adgnn train (--checkpoint)")->required();
  cmd->add_option("--out,-o", a->out, "The file to write (e.g. model.pt; written atomically)")->required();
  cmd->add_flag("--json", a->json, "Print the summary as JSON");
  cmd->footer("The file is a dict: format, epoch, config (the model's settings), train_config (YAML), state_dict "
              "(tensors by name) and, for AD under linear/log, benefit_range. python/adgnn_torch rebuilds the "
              "model: PyG layers for the plain backbones, a reference module for the AD variants.");
  cmd->callback([&run, a] {
    run = [a] {
      const std::filesystem::path dir = std::filesystem::absolute(a->out).parent_path();
      if (!std::filesystem::is_directory(dir))
        throw InputError("--out " + a->out + ": folder " + dir.string() + " does not exist");
      const ExportSummary s = export_model(a->checkpoint, a->out);
      const ModelConfig& mc = s.model.config.model;
      const std::string model = model_name(mc.backbone, mc.variant);
      if (a->json) {
        nlohmann::ordered_json j{{"model", model},         {"checkpoint", a->checkpoint}, {"epoch", s.model.epoch},
                                 {"out", a->out},          {"tensors", s.tensors},        {"parameters", s.parameters}};
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        std::printf("%s (epoch %lld of %s) -> %s: %lld tensors, %lld parameters\n", model.c_str(),
                    (long long)s.model.epoch, a->checkpoint.c_str(), a->out.c_str(), (long long)s.tensors,
                    (long long)s.parameters);
      }
      return 0;
    };
  });
}

}  // namespace adgnn::cli
