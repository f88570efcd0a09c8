// Subcommand registration for the `adgnn` binary.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}
namespace adgnn::cli {

// Adds `data stats|convert|generate|bench` under `app`; the chosen subcommand's action is stored
// in `run` and executed by main after parsing.
void add_data_commands(CLI::App& app, std::function<int()>& run);
// `adgnn train`'s exit code after SIGTERM / SIGUSR1 stopped it between epochs, its checkpoint
// written: not finished, to be resumed (EX_TEMPFAIL of sysexits.h: "try again later").
constexpr int kInterruptedExit = 75;
// Adds `train`.
void add_train_commands(CLI::App& app, std::function<int()>& run);
// Adds `sweep`.
void add_sweep_commands(CLI::App& app, std::function<int()>& run);
// Adds `partition` (launch/partition_commands.cpp).
void add_partition_commands(CLI::App& app, std::function<int()>& run);
// Adds `predictions gather` (launch/predictions_commands.cpp).
void add_predictions_commands(CLI::App& app, std::function<int()>& run);
// Adds `predict` (launch/predict_commands.cpp).
void add_predict_commands(CLI::App& app, std::function<int()>& run);
void add_export_commands(CLI::App& app, std::function<int()>& run);
// Adds `bench` (launch/bench_commands.cpp).
void add_bench_commands(CLI::App& app, std::function<int()>& run);

}  // namespace adgnn::cli
