#include "cli/output.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/error.hpp"

namespace gptvk::cli {

namespace {

bool g_wrote = false;  // anything written to stdout by this process

[[noreturn]] void fail(int err, const char* stream = "standard output") {
  throw InputError(std::string("cannot write to ") + stream + ": " + std::strerror(err));
}

}  // namespace

namespace {

void write_checked(std::FILE* stream, std::string_view bytes, const char* name) {
  errno = 0;
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stream) != bytes.size()) fail(errno ? errno : EIO, name);
  if (std::fflush(stream) != 0) fail(errno ? errno : EIO, name);
}

}  // namespace

void write_stdout(std::string_view bytes) {
  g_wrote = g_wrote || !bytes.empty();
  write_checked(stdout, bytes, "standard output");
}

void check_stdout_reader() {
  // The writing end of a pipe without readers polls as POLLERR (Linux, and the BSDs).
  pollfd out{STDOUT_FILENO, POLLOUT, 0};
  if (::poll(&out, 1, 0) == 1 && (out.revents & POLLERR)) fail(EPIPE);
}

void write_stderr(std::string_view bytes) { write_checked(stderr, bytes, "standard error"); }

void print_stdout(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) fail(EINVAL);
  if (static_cast<size_t>(n) < sizeof buf) return write_stdout({buf, static_cast<size_t>(n)});
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  write_stdout({big.data(), static_cast<size_t>(n)});
}

void close_stdout() {
  errno = 0;
  bool failed = std::ferror(stdout) || std::fflush(stdout) != 0;
  int err = errno;
  // A command that wrote nothing may run with stdout closed (`>&-`): EBADF then is no loss.
  if (std::fclose(stdout) != 0 && !failed && (g_wrote || errno != EBADF)) {
    failed = true;
    err = errno;
  }
  if (failed) fail(err ? err : EIO);
}

}  // namespace gptvk::cli
