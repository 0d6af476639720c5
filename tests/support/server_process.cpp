#include "tests/support/server_process.hpp"

#include <boost/test/unit_test.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "tests/support/time_limits.hpp"

extern char** environ;

namespace gptvk::test {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args, double timeout_s, bool sigint_ignored) {
  int err_pipe[2];
  BOOST_REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  std::vector<std::string> argv_strings = {GPTVK_BINARY, "serve", "--host", "127.0.0.1", "--port", "0"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = {"GPTVK_VALIDATION=1"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "GPTVK_", 6) != 0 || std::strncmp(*e, "GPTVK_FORCE=", 12) == 0 ||
        std::strncmp(*e, "GPTVK_VALIDATION_GPU=", 21) == 0)
      env_strings.push_back(*e);
  std::vector<char*> argv, envp;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = fork();
  BOOST_REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // no server outlives a test that died
    ::signal(SIGINT, sigint_ignored ? SIG_IGN : SIG_DFL);
    dup2(err_pipe[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, STDIN_FILENO);
    dup2(devnull, STDOUT_FILENO);
    execve(GPTVK_BINARY, argv.data(), envp.data());
    _exit(127);
  }
  close(err_pipe[1]);
  err_fd_ = err_pipe[0];
  reader_ = std::thread([this] {
    char buf[4096];
    for (ssize_t n; (n = read(err_fd_, buf, sizeof buf)) > 0;) {
      std::lock_guard lock(mu_);
      err_.append(buf, static_cast<size_t>(n));
    }
  });
  const std::regex listening("gpt-vk: listening on http://127\\.0\\.0\\.1:([0-9]+)\n");
  auto t0 = Clock::now();
  while (since(t0) < time_limit(timeout_s) && port_ == 0) {
    std::smatch m;
    const std::string err = stderr_text();
    if (std::regex_search(err, m, listening)) port_ = std::stoi(m[1]);
    else if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    } else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_REQUIRE_MESSAGE(port_ > 0, "gpt-vk serve did not start listening; stderr: " << stderr_text());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (reader_.joinable()) reader_.join();
  if (err_fd_ >= 0) close(err_fd_);
  // The server runs with the validation layer on: a message from it fails the test, or the
  // test binary where this is a static server destroyed after the framework has finished.
  if (const size_t at = err_.find("gpt-vk: validation:"); at != std::string::npos) {
    const std::string message = err_.substr(at, 2000);
    if (boost::unit_test::framework::test_in_progress()) {
      BOOST_ERROR("gpt-vk serve printed a validation message: " << message);
    } else {
      std::fprintf(stderr, "gpt-vk serve printed a validation message:\n%s\n", message.c_str());
      std::_Exit(1);
    }
  }
}

int ServerProcess::stop(int sig, double timeout_s) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  auto t0 = Clock::now();
  int status = 0;
  while (since(t0) < time_limit(timeout_s)) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

void ServerProcess::signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

bool ServerProcess::running() const {
  if (pid_ <= 0) return false;
  siginfo_t info{};
  // WNOWAIT: looks without reaping, so that stop() still finds the exit status.
  return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

std::string ServerProcess::stderr_text() const {
  std::lock_guard lock(mu_);
  return err_;
}

}  // namespace gptvk::test
