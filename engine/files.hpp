// Reading input files and writing output files so that nothing hangs and nothing is lost:
// inputs are opened without blocking and read only when they are regular files of a
// bounded size (a FIFO, a directory or /dev/zero is refused by name); outputs go to a new,
// exclusively created file beside the target that replaces it only once complete.
// Every failure is an InputError (exit 1) that names the path and the system's reason.
#pragma once
#include <cstdint>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace gptvk::files {

// Errors read "<prefix><reason>", e.g. prefix "cannot read /x/vocab.json: " and reason
// "No such file or directory" or "a directory, not a regular file".

// An open file descriptor, closed with the object.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }

 private:
  int fd_;
};

// "a directory", "a FIFO", "a character device", ... for a file that is not regular.
std::string file_kind(unsigned mode);

// Opens `path` read-only (non-blocking, so a FIFO cannot hang the open) and requires a
// regular file of at most `max_bytes`; `size` receives its size.
Fd open_regular(const std::string& path, const std::string& prefix, uint64_t max_bytes, uint64_t& size);

// A read-only mapping of a whole file, unmapped when the last copy of `keep` goes.
struct MappedFile {
  std::shared_ptr<const void> keep;
  std::span<const std::byte> bytes;
};
// Maps a regular, non-empty file; InputError "<path>: <reason>" otherwise.
MappedFile map_regular(const std::string& path);
// Maps the first `size` (> 0) bytes of `fd`, as open_regular returned it; the mapping keeps
// the file open after `fd` closes. InputError "<prefix><reason>" when it cannot.
MappedFile map_fd(const Fd& fd, uint64_t size, const std::string& prefix);

// The whole of a regular file of at most `max_bytes`.
std::string read_regular(const std::string& path, const std::string& prefix, uint64_t max_bytes);

// The same, or all a pipe gives until its writers close it (bash's `<(command)`, a FIFO,
// /dev/stdin on a pipe), for text a user names on the command line.
std::string read_regular_or_pipe(const std::string& path, const std::string& prefix, uint64_t max_bytes);

// Whether `path` exists: false when it (or a directory on the way) does not; a path that
// cannot be looked at (a symlink loop, no permission, a name too long) is an InputError.
bool exists(const std::string& path, const std::string& prefix);
// Whether `path` names something, a dangling symlink or a loop included (opening it then
// says what is wrong); a path that cannot be looked at (no permission on the way, a name
// too long) is an InputError.
bool present(const std::string& path, const std::string& prefix);

// Replaces `path` with the concatenated `parts` atomically: a new file beside it (random name, O_EXCL, no
// symlink followed) is written, flushed and closed, with every step checked, then renamed
// over `path`. On any failure the temporary file is removed, `path` is left as it was and
// an InputError "<prefix><reason>" is thrown. An existing special file (/dev/full, a FIFO)
// is written in place instead, every write checked; a directory is an error. A symlink at
// `path` to a regular file (or to nothing) is replaced, not followed: a link planted in a
// cache folder cannot aim the write.
void write_atomic(const std::string& path, std::initializer_list<std::string_view> parts, const std::string& prefix);

// What a user names as output (`forward --out`): written as write_atomic does, at the end
// of a symlink (a user's link to the real file; a dangling link creates its target). A
// name for an open descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N) is written to that
// descriptor at its own offset, as the shell set it up (`> f`, `>> f`, a pipe).
void write_output(const std::string& path, std::initializer_list<std::string_view> parts, const std::string& prefix);
// Throws the InputError write_output would, where it can be known before the work: a
// folder that cannot be written, a directory, a descriptor open for reading only.
void check_output(const std::string& path, const std::string& prefix);

// Largest inputs of each kind; far above any real file, low enough to fail fast.
constexpr uint64_t kMaxConfigBytes = 1ull << 20;      // a TOML config, a snapshot's JSON files
constexpr uint64_t kMaxTokenizerBytes = 64ull << 20;  // vocab.json / merges.txt (GPT-2: 1 MB, 0.5 MB)
constexpr uint64_t kMaxTextBytes = 1ull << 30;        // a text to tokenize or score

}  // namespace gptvk::files
