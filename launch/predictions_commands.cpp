// `adgnn predictions gather`: one file of every row in node order from the per-rank files of a
// distributed run's --predictions.
#include <cstdio>
#include <memory>

#include "CLI/CLI.hpp"
#include "adgnn/trainer.h"
#include "commands.h"

namespace adgnn::cli {

void add_predictions_commands(CLI::App& app, std::function<int()>& run) {
  auto* top = app.add_subcommand("predictions", "Work with --predictions files");
  top->require_subcommand(1);
  auto* cmd = top->add_subcommand(
      "gather", "Assemble a distributed run's per-rank prediction files into one file in node order");
  auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  cmd->add_option("input", *in, "The --predictions file of the run (an index of per-rank files, or one file)")
      ->required();
  cmd->add_option("--out,-o", *out, "HDF5 file of every row in node order (written atomically)")->required();
  cmd->callback([&run, in, out] {
    run = [in, out] {
      std::map<std::string, std::string> attrs;
      const std::map<std::string, H5Array> arrays = read_predictions(*in, &attrs);
      write_arrays_h5(*out, arrays, attrs);
      const auto it = arrays.find("prediction");
      std::printf("%s: %lld nodes, %zu arrays\n", out->c_str(),
                  it == arrays.end() ? 0LL : static_cast<long long>(it->second.shape.at(0)), arrays.size());
      return 0;
    };
  });
}

}  // namespace adgnn::cli
