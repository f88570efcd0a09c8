// adgnn: one binary, subcommands per area. Bad input exits with code 2 and one line on stderr;
// running out of host or device memory with code 3 (bench --max-graph tells a probe that does
// not fit from one that fails).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <new>
#include <string>

#include <unistd.h>

#include <c10/util/Exception.h>

#include "CLI/CLI.hpp"
#include "adgnn/comm.h"
#include "adgnn/launch.h"
#include "adgnn/loaders.h"
#include "commands.h"
#include "fmt/format.h"

namespace {

constexpr int kOutOfMemoryExit = 3;

// Whether this is one of several ranks started by mpirun / srun (MPI initialised).
bool several_mpi_ranks() { return adgnn::mpi_running() && adgnn::mpi_world_size() > 1; }

// " (rank R on host H)" for an error line of a run of several ranks: MPI's rank, or under
// torchrun (no MPI) the launcher's; empty for one process.
std::string rank_label() {
  if (several_mpi_ranks())
    return fmt::format(" (rank {} on {})", adgnn::mpi_world_rank(), adgnn::mpi_host());
  try {
    const adgnn::LaunchInfo li = adgnn::detect_launch({});
    if (li.source != "torchrun" || li.size < 2) return {};
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return fmt::format(" (rank {} on {})", li.rank, host);
  } catch (const std::exception&) {
    return {};
  }
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Prints "adgnn: <kind><rank>: <message>" and returns `code`. A failure on one of several MPI
// ranks aborts them all: the others may be waiting for it in a collective. (Under torchrun the
// launcher stops the other ranks when one exits with an error.)
int fail(const char* kind, const std::string& message, int code) {
  std::fprintf(stderr, "adgnn: %s%s: %s\n", kind, rank_label().c_str(), message.c_str());
  if (several_mpi_ranks()) adgnn::mpi_abort(code);
  return code;
}

// The one line and exit status of a run that ran out of host or device memory.
int out_of_memory(const char* where, const std::string& detail) {
  return fail("error", fmt::format("out of memory ({}){}{}", where, detail.empty() ? "" : ": ", detail),
              kOutOfMemoryExit);
}

}  // namespace

int main(int argc, char** argv) {
  // A file size limit (ulimit -f) makes a write fail with EFBIG, reported like a full disk,
  // instead of killing the process with SIGXFSZ before it can name the file or clean up.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"adgnn: adaptive-depth graph neural networks at scale"};
  app.set_version_flag("--version", "adgnn 0.1.0");
  app.require_subcommand(1);
  std::function<int()> run;
  adgnn::cli::add_data_commands(app, run);
  adgnn::cli::add_train_commands(app, run);
  adgnn::cli::add_sweep_commands(app, run);
  adgnn::cli::add_partition_commands(app, run);
  adgnn::cli::add_bench_commands(app, run);
  adgnn::cli::add_predictions_commands(app, run);
  adgnn::cli::add_predict_commands(app, run);
  adgnn::cli::add_export_commands(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "adgnn: error: %s (see --help)\n", e.what());
    return 2;
  } catch (const adgnn::InputError& e) {  // raised by option callbacks (e.g. an unknown preset)
    std::fprintf(stderr, "adgnn: error: %s\n", e.what());
    return 2;
  }
  // MPI, where a run of several ranks started it, is finalized here, after every communicator
  // is gone, never in a destructor.
  try {
    const int code = run ? run() : 0;
    // Output written after MPI_Finalize may be lost: mpirun can consider the job done before it
    // has forwarded the rest of a rank's stdout (seen as rank 0's JSON summary missing now and
    // then under load).
    std::cout.flush();
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    const bool out_ok = flushed && std::cout.good() && !std::ferror(stdout);
    const std::string out_error = errno != 0 ? std::strerror(errno) : "I/O error";
    std::fflush(stderr);
    adgnn::mpi_finalize();
    if (!out_ok) {  // a full disk or /dev/full: what the command printed is lost
      std::fprintf(stderr, "adgnn: error: standard output: write failed (%s)\n", out_error.c_str());
      return 2;
    }
    return code;
  } catch (const adgnn::CommError& e) {
    std::fprintf(stderr, "adgnn: error: %s\n", e.what());
    adgnn::mpi_abort(1);
  } catch (const adgnn::InputError& e) {
    return fail("error", e.what(), 2);
  } catch (const std::bad_alloc&) {
    return out_of_memory("host", "");
  } catch (const c10::OutOfMemoryError& e) {
    return out_of_memory("device", first_line(e.what_without_backtrace()));
  } catch (const c10::Error& e) {  // LibTorch's: its message without the C++ backtrace
    const std::string what = first_line(e.what_without_backtrace());
    // LibTorch's CPU allocator reports a failed allocation as a plain c10::Error, and so do
    // cuBLAS / cuSPARSE when their workspace does not fit.
    if (what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos) return out_of_memory("host", what);
    if (what.find("ALLOC_FAILED") != std::string::npos || what.find("CUDA out of memory") != std::string::npos)
      return out_of_memory("device", what);
    return fail("internal error", what, 1);
  } catch (const std::exception& e) {
    return fail("internal error", e.what(), 1);
  }
}
