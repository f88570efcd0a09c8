#include "child_process.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adgnn/loaders.h"
#include "fmt/format.h"

extern char** environ;

namespace adgnn::cli {

std::string self_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error(std::string("/proc/self/exe: ") + std::strerror(errno));
  return std::string(buf, size_t(n));
}

int temporary_file(const std::string& what, const std::string& stem, std::string& path) {
  const char* tmpdir = std::getenv("TMPDIR");
  path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/" + stem + "XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0)
    throw InputError(fmt::format("{}: cannot create a temporary file {} ($TMPDIR): {}", what, path, std::strerror(errno)));
  return fd;
}

namespace {
// What the signal handler cleans up: async-signal-safe state (a pid, a fixed buffer).
volatile sig_atomic_t running_child = 0;
char cleanup_path[4096];
struct sigaction previous_int, previous_term;

void clean_up_and_die(int sig) {
  if (running_child > 0) kill(pid_t(running_child), SIGKILL);
  if (cleanup_path[0]) unlink(cleanup_path);
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

TemporaryOutput::TemporaryOutput(std::string path) : path_(std::move(path)) {
  if (path_.size() >= sizeof cleanup_path) {
    std::remove(path_.c_str());
    throw std::runtime_error(path_ + ": path too long");
  }
  std::memcpy(cleanup_path, path_.c_str(), path_.size() + 1);
  struct sigaction sa {};
  sa.sa_handler = clean_up_and_die;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &previous_int);
  sigaction(SIGTERM, &sa, &previous_term);
}

TemporaryOutput::~TemporaryOutput() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  cleanup_path[0] = '\0';
  std::remove(path_.c_str());
}

ChildResult run_child(const std::vector<std::string>& argv) {
  // stderr goes to an unlinked temporary file, read back after the child ends.
  std::string path;
  const int err_fd = temporary_file(argv.at(0), "adgnn-child-", path);
  unlink(path.c_str());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv.at(0).c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    close(err_fd);
    throw std::runtime_error(argv[0] + ": cannot start (" + std::strerror(rc) + ")");
  }
  running_child = pid;
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      running_child = 0;
      close(err_fd);
      throw std::runtime_error(std::string("waiting for ") + argv[0] + ": " + std::strerror(errno));
    }
  }
  running_child = 0;
  ChildResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.peak_rss_bytes = int64_t(usage.ru_maxrss) * 1024;  // KiB on Linux
  std::string text;
  if (lseek(err_fd, 0, SEEK_SET) == 0) {
    char buf[8192];
    ssize_t n;
    while ((n = read(err_fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  }
  close(err_fd);
  if (text.size() > 4000) text = text.substr(text.size() - 4000);
  r.stderr_tail = text;
  return r;
}

}  // namespace adgnn::cli
