#include "tests/support/cli_run.hpp"

#include "tests/support/time_limits.hpp"

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace gptvk::test {

namespace {

// The caller's environment (sanitizer options, GPTVK_FORCE for the forced-limits run,
// GPTVK_VALIDATION_GPU for a run with the shaders checked)
// without other GPTVK_* settings, validation on, then the row's own settings, which
// replace inherited ones (getenv takes the first match).
std::vector<std::string> child_environment(const std::vector<std::string>& env, const CliOptions& options) {
  auto overridden = [&](const char* var) {
    for (const auto& e : env)
      if (std::strncmp(var, e.c_str(), e.find('=') + 1) == 0) return true;
    for (const auto& name : options.unset_env)
      if (std::strncmp(var, name.c_str(), name.size()) == 0 && var[name.size()] == '=') return true;
    return false;
  };
  std::vector<std::string> env_strings;
  if (!overridden("GPTVK_VALIDATION=1")) env_strings.push_back("GPTVK_VALIDATION=1");
  for (char** e = environ; *e; ++e) {
    bool ours = std::strncmp(*e, "GPTVK_", 6) == 0;
    bool kept = std::strncmp(*e, "GPTVK_FORCE=", 12) == 0 || std::strncmp(*e, "GPTVK_CACHE_DIR=", 16) == 0 ||
                std::strncmp(*e, "GPTVK_VALIDATION_GPU=", 21) == 0;
    if ((!ours || kept) && !overridden(*e)) env_strings.push_back(*e);
  }
  for (const auto& e : env) env_strings.push_back(e);
  return env_strings;
}

// The descriptor the child writes its standard output to: the capture pipe's writing end,
// or one that fails or blocks every write as options.stdout_to asks (a stalled pipe's
// reading end is left in `stalled[0]`).
int child_stdout_fd(int capture_fd, const CliOptions& options, int (&stalled)[2]) {
  if (options.stdout_to == Stdout::DevFull) {
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    BOOST_REQUIRE(fd >= 0);
    return fd;
  }
  if (options.stdout_to == Stdout::ClosedPipe) {
    int dead[2];
    BOOST_REQUIRE(pipe2(dead, O_CLOEXEC) == 0);
    close(dead[0]);
    return dead[1];
  }
  if (options.stdout_to == Stdout::Stalled) {
    BOOST_REQUIRE(pipe2(stalled, O_CLOEXEC) == 0);
    fcntl(stalled[1], F_SETPIPE_SZ, 4096);
    return stalled[1];
  }
  return capture_fd;
}

// In the forked child: limits, descriptors, then exec; never returns. It allocates nothing
// (the parent may have other threads holding malloc's locks).
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int stdout_fd, int stderr_fd,
                             const CliOptions& options) {
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // As from a terminal: a test run started in the background (SIGINT ignored, which gpt-vk
  // keeps) would otherwise make the Ctrl-C rows fail.
  signal(SIGINT, options.sigint_ignored ? SIG_IGN : SIG_DFL);
  if (options.file_size_limit >= 0) {
    rlimit fsize{static_cast<rlim_t>(options.file_size_limit), static_cast<rlim_t>(options.file_size_limit)};
    setrlimit(RLIMIT_FSIZE, &fsize);
  }
  if (options.address_space_limit >= 0) {
    rlimit as{static_cast<rlim_t>(options.address_space_limit), static_cast<rlim_t>(options.address_space_limit)};
    setrlimit(RLIMIT_AS, &as);
  }
  dup2(stdout_fd, STDOUT_FILENO);
  dup2(stderr_fd, STDERR_FILENO);
  if (options.stdin_closed) {
    close(STDIN_FILENO);
  } else {
    int in = open(options.stdin_from.empty() ? "/dev/null" : options.stdin_from.c_str(), O_RDONLY);
    dup2(in, STDIN_FILENO);
  }
  execve(GPTVK_BINARY, argv, envp);
  _exit(127);
}

// The SIGINTs a row sends: once the output holds a text, or while stdout is a full pipe.
struct Interrupts {
  std::string on_output;
  int stalled_fd = -1;  // the reading end of a Stdout::Stalled pipe, never read
  int when_stalled = 0;
  std::chrono::steady_clock::time_point last_sent{};

  void send_if_stalled(pid_t pid) {
    int queued = 0;
    const auto now = std::chrono::steady_clock::now();
    if (when_stalled == 0 || now - last_sent < std::chrono::milliseconds(200)) return;
    if (ioctl(stalled_fd, FIONREAD, &queued) != 0 || queued < fcntl(stalled_fd, F_GETPIPE_SZ)) return;
    if (kill(pid, SIGINT) == 0) --when_stalled;
    last_sent = now;
  }
};

// Reads both pipes into r.out and r.err until the child closes them or the time is up
// (then the child is killed and r.timed_out set); closes the pipes.
void read_until_closed(int out_fd, int err_fd, pid_t pid, double timeout_s,
                       const std::chrono::steady_clock::time_point& start, Interrupts& sigint, CliResult& r) {
  const std::string& sigint_on = sigint.on_output;
  bool sigint_sent = false;
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    sigint.send_if_stalled(pid);
    const int wait_ms = sigint.when_stalled > 0 ? 50 : static_cast<int>(left * 1000) + 1;
    if (poll(fds, 2, wait_ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
        if (!sigint_on.empty() && !sigint_sent && sinks[i]->find(sigint_on) != std::string::npos)
          sigint_sent = kill(pid, SIGINT) == 0;
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
}

}  // namespace

CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env, double timeout_s,
                  const CliOptions& options) {
  CliResult r;
  r.command = GPTVK_BINARY;
  for (const auto& a : args) r.command += " '" + a + "'";
  int out_pipe[2], err_pipe[2];
  BOOST_REQUIRE(pipe2(out_pipe, O_CLOEXEC) == 0 && pipe2(err_pipe, O_CLOEXEC) == 0);
  std::vector<std::string> child_args = args, env_strings = child_environment(env, options);
  std::vector<char*> argv{const_cast<char*>(GPTVK_BINARY)}, envp;
  for (auto& a : child_args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int stalled[2] = {-1, -1};
  int child_stdout = child_stdout_fd(out_pipe[1], options, stalled);
  int child_stderr = options.stderr_dev_full ? open("/dev/full", O_WRONLY | O_CLOEXEC) : err_pipe[1];
  BOOST_REQUIRE(child_stderr >= 0);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) exec_child(argv.data(), envp.data(), child_stdout, child_stderr, options);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (child_stdout != out_pipe[1]) close(child_stdout);
  if (child_stderr != err_pipe[1]) close(child_stderr);
  Interrupts sigint{options.sigint_on_output, stalled[0], options.sigints_when_stalled};
  read_until_closed(out_pipe[0], err_pipe[0], pid, time_limit(timeout_s), start, sigint, r);
  if (stalled[0] >= 0) close(stalled[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    r.signaled = !r.timed_out;
    r.signal = WTERMSIG(status);
    r.core_dumped = WCOREDUMP(status);
  }
  return r;
}

}  // namespace gptvk::test
