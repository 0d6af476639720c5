#include "engine/files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "engine/error.hpp"

namespace gptvk::files {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

std::string file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    default: return "not a regular file";
  }
}

namespace {

// A size limit as the flags and docs state it: "1 MiB", else its exact bytes.
std::string limit_text(uint64_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

}  // namespace

namespace {

// Opens `path` read-only, non-blocking (opening a FIFO for reading would otherwise wait for
// a writer forever), and requires a regular file of at most `max_bytes`, or, with
// `pipes_too`, a pipe; `size` receives a regular file's size. A regular file's fd is left
// blocking (it never blocks); a pipe's is left non-blocking for the caller to decide.
Fd open_input(const std::string& path, const std::string& prefix, uint64_t max_bytes, bool pipes_too,
              uint64_t& size, bool& pipe) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) throw InputError(prefix + std::strerror(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) throw InputError(prefix + std::strerror(errno));
  pipe = pipes_too && S_ISFIFO(st.st_mode);
  size = 0;
  if (pipe) return fd;
  if (!S_ISREG(st.st_mode)) throw InputError(prefix + file_kind(st.st_mode) + ", not a regular file");
  size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw InputError(prefix + std::to_string(size) + " bytes, more than the " + limit_text(max_bytes) + " such a file may have");
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

Fd open_regular(const std::string& path, const std::string& prefix, uint64_t max_bytes, uint64_t& size) {
  bool pipe = false;
  return open_input(path, prefix, max_bytes, false, size, pipe);
}

MappedFile map_regular(const std::string& path) {
  uint64_t size = 0;
  Fd fd = open_regular(path, path + ": cannot open: ", UINT64_MAX, size);
  if (size == 0) throw InputError(path + ": empty file");
  return map_fd(fd, size, path + ": cannot map: ");
}

MappedFile map_fd(const Fd& fd, uint64_t size, const std::string& prefix) {
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) throw InputError(prefix + std::strerror(errno));
  return {std::shared_ptr<const void>(p, [size](const void* q) { munmap(const_cast<void*>(q), size); }),
          {static_cast<const std::byte*>(p), size}};
}

namespace {

// Reads `fd` to its end into room for `size` + 1 bytes first (which finds the end of an
// ordinary file without growing the buffer), then in steps, never past max_bytes; a
// non-blocking fd ends where it would block.
std::string read_to_end(int fd, uint64_t size, const std::string& prefix, uint64_t max_bytes) {
  const uint64_t most = max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1;  // one more: "too large"
  std::string data(std::min(size + 1, most), '\0');
  uint64_t got = 0;
  for (;;) {
    if (got == data.size()) {
      if (got == most) throw InputError(prefix + "more than the " + limit_text(max_bytes) + " such a file may have");
      data.resize(std::min<uint64_t>(most, got + (64u << 10)));
    }
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) throw InputError(prefix + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  data.resize(got);
  return data;
}

}  // namespace

namespace {

// How long a named FIFO may wait for its writer. `producer > fifo & gpt-vk --file fifo`
// starts both at once, and a FIFO with no writer reads as empty, so reading at once could
// run on nothing; waiting for ever would hang on a FIFO nobody will write to.
constexpr int kFifoWriterWaitMs = 2000;

// Waits until a named FIFO (not an anonymous pipe, whose writer has come and gone if it
// reads as ended) has a writer, or holds bytes a writer left; the bytes read while
// looking come back. A non-blocking read of a FIFO says which: 0 with no writer, EAGAIN
// with one that has not written yet.
std::string await_fifo_writer(int fd, const std::string& prefix) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) == 0 && fs.f_type == PIPEFS_MAGIC) return {};
  for (int waited_ms = 0;; waited_ms += 10) {
    char first = 0;
    const ssize_t n = ::read(fd, &first, 1);
    if (n == 1) return std::string(1, first);
    if (n < 0 && errno == EAGAIN) return {};
    if (n < 0 && errno != EINTR) throw InputError(prefix + std::strerror(errno));
    if (waited_ms >= kFifoWriterWaitMs)
      throw InputError(prefix + "a FIFO that no process opened for writing within " +
                       std::to_string(kFifoWriterWaitMs / 1000) + " s (start its writer first)");
    ::usleep(10000);
  }
}

std::string read_input(const std::string& path, const std::string& prefix, uint64_t max_bytes, bool pipes_too) {
  uint64_t size = 0;
  bool pipe = false;
  Fd fd = open_input(path, prefix, max_bytes, pipes_too, size, pipe);
  // A pipe: blocking reads until every writer has closed it, as from stdin. A regular file:
  // fstat's size is a hint, as /proc and /sys files say 0 and hold text, and a file may grow
  // or shrink meanwhile, so it reads to the end; a size-0 one without blocking, so that a
  // pseudo-file that never ends (/proc/kmsg) reads as what it holds now.
  const std::string first = pipe ? await_fifo_writer(fd.get(), prefix) : std::string();
  const bool block = pipe || size > 0;
  const int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, block ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
  std::string data = first + read_to_end(fd.get(), size, prefix, max_bytes);
  if (data.size() > max_bytes)
    throw InputError(prefix + "more than the " + limit_text(max_bytes) + " such a file may have");
  return data;
}

}  // namespace

std::string read_regular(const std::string& path, const std::string& prefix, uint64_t max_bytes) {
  return read_input(path, prefix, max_bytes, false);
}

std::string read_regular_or_pipe(const std::string& path, const std::string& prefix, uint64_t max_bytes) {
  return read_input(path, prefix, max_bytes, true);
}

bool exists(const std::string& path, const std::string& prefix) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  throw InputError(prefix + std::strerror(errno));
}

bool present(const std::string& path, const std::string& prefix) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  throw InputError(prefix + std::strerror(errno));
}

namespace {

// "<path>.tmp-<16 random hex digits>" (the name cut to fit): unguessable, so nobody can
// plant a symlink there first (and O_EXCL | O_NOFOLLOW refuse one anyway).
std::string temp_name(const std::string& path) {
  unsigned char r[8] = {};
  if (getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
    uint64_t fallback = static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^ reinterpret_cast<uintptr_t>(&r);
    std::memcpy(r, &fallback, sizeof r);
  }
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", r[i]);
  // Within NAME_MAX (255 bytes) whatever the final name's length: its start, shortened.
  const size_t slash = path.rfind('/'), base = slash == std::string::npos ? 0 : slash + 1;
  const size_t keep = std::min(path.size() - base, size_t(255 - 21));
  return path.substr(0, base + keep) + ".tmp-" + hex;
}

// Writes all of `bytes` to `fd`; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

namespace {

// Writes every part to fd and closes it; 0, or the errno of the first failure. close()
// counts: it reports write-back errors some filesystems (NFS, full disks) give only there.
int write_parts_and_close(int fd, std::initializer_list<std::string_view> parts) {
  bool ok = true;
  for (std::string_view part : parts) ok = ok && write_all(fd, part);
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) err = errno;
  return err;
}

// Writes into an existing special file (/dev/full, a FIFO with a reader) or through a
// dangling symlink (write_output): renaming over either would put a regular file where
// the device or the link was, and the output would not reach its target.
void write_in_place(const std::string& path, std::initializer_list<std::string_view> parts, const std::string& prefix) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw InputError(prefix + std::strerror(errno));
  if (int err = write_parts_and_close(fd, parts)) throw InputError(prefix + std::strerror(err));
}

}  // namespace

void write_atomic(const std::string& path, std::initializer_list<std::string_view> parts, const std::string& prefix) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw InputError(prefix + "a directory, not a file");
    return write_in_place(path, parts, prefix);
  }
  std::string tmp = temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) throw InputError(prefix + std::strerror(errno));
  int err = write_parts_and_close(fd, parts);
  bool ok = err == 0;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw InputError(prefix + std::strerror(err));
  }
}

namespace {

// The descriptor a path names for a shell's redirections (/dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/self/fd/N), or -1.
int named_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string_view dir : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.compare(0, dir.size(), dir) != 0 || path.size() == dir.size()) continue;
    int n = -1;
    const char* end = path.data() + path.size();
    auto [stop, ec] = std::from_chars(path.data() + dir.size(), end, n);
    if (ec == std::errc() && stop == end) return n;
  }
  return -1;
}

// The file a symlink at `path` ends at (a user's link to the real file), or `path` itself:
// no link, or a dangling one (opening it creates its target).
std::string link_target(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string target(real);
  std::free(real);
  return target;
}

}  // namespace

void check_output(const std::string& path, const std::string& prefix) {
  if (int fd = named_descriptor(path); fd >= 0) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) throw InputError(prefix + std::strerror(errno));
    if ((flags & O_ACCMODE) == O_RDONLY) throw InputError(prefix + "open for reading only");
    return;
  }
  const std::string target = link_target(path);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw InputError(prefix + "a directory, not a file");
    if (::access(target.c_str(), W_OK) != 0) throw InputError(prefix + std::strerror(errno));  // written in place
    return;
  }
  // A regular file is replaced by a rename in its folder.
  const size_t slash = target.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  if (::access(folder.c_str(), W_OK) != 0) throw InputError(prefix + std::strerror(errno));
}

void write_output(const std::string& path, std::initializer_list<std::string_view> parts, const std::string& prefix) {
  if (int fd = named_descriptor(path); fd >= 0) {
    // The descriptor the shell opened (`> f`, `>> f`, a pipe, a socket), written at its own
    // offset: reopening /dev/stdout would truncate what `>>` or an earlier command wrote.
    for (std::string_view part : parts)
      if (!write_all(fd, part)) throw InputError(prefix + std::strerror(errno));
    return;
  }
  const std::string target = link_target(path);
  struct stat st {};
  if (target == path && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return write_in_place(path, parts, prefix);  // a dangling link: its target is created
  write_atomic(target, parts, prefix);
}

}  // namespace gptvk::files
