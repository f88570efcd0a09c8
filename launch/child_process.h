// Running another `adgnn` command as a child process: a probe that may run out of memory
// without taking the caller down (bench --max-graph).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace adgnn::cli {

struct ChildResult {
  int exit_code = -1;    // the child's exit status; -1 when a signal ended it
  int signal = 0;        // the signal that ended it (SIGKILL: the kernel's out-of-memory killer)
  int64_t peak_rss_bytes = 0;  // the child's own peak resident memory (wait4's ru_maxrss)
  std::string stderr_tail;     // the last lines it wrote to stderr
};

// The path of the running executable (/proc/self/exe).
std::string self_executable();

// A new empty file <$TMPDIR, else /tmp>/<stem>XXXXXX, open: its descriptor, and its path in
// `path`. InputError naming `what`, the path and $TMPDIR when it cannot be made.
int temporary_file(const std::string& what, const std::string& stem, std::string& path);

// Runs `argv` (argv[0]: the program's path) with stdout discarded and stderr captured, and waits
// for it. Throws std::runtime_error when it cannot be started.
ChildResult run_child(const std::vector<std::string>& argv);

// A child's output file, removed when this goes out of scope; while it is alive, SIGINT and
// SIGTERM first kill the child that run_child is waiting for and remove the file, then end this
// process as the signal would: a search stopped by its user leaves no probe running and no file
// behind. One at a time.
class TemporaryOutput {
 public:
  explicit TemporaryOutput(std::string path);
  ~TemporaryOutput();
  TemporaryOutput(const TemporaryOutput&) = delete;
  TemporaryOutput& operator=(const TemporaryOutput&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace adgnn::cli
