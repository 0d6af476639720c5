// engine/files: atomic output files (what `forward --out` and the pipeline cache write)
// keep the previous file on any failure and leave no temporary behind; inputs that are not
// regular files, or too large, are refused by name without being read.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "tests/support/temp_dir.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// The InputError `f` throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// RLIMIT_FSIZE lowered for one scope: writes past `bytes` fail with EFBIG (a full disk).
struct FileSizeLimit {
  rlimit saved{};
  explicit FileSizeLimit(rlim_t bytes) {
    std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &saved);
    rlimit lower{bytes, saved.rlim_max};
    BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &lower) == 0);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(write_atomic_replaces_the_file) {
  test::TempDir dir;
  std::string path = dir.write("cache.bin", "old");
  files::write_atomic(path, {"new ", "contents"}, "cannot write: ");
  BOOST_TEST(read_text(path) == "new contents");
  BOOST_TEST(entries(dir.path) == 1u);
  // The temporary file beside it fits in NAME_MAX too when the name itself nearly fills it.
  const std::string longest = (dir.path / std::string(255, 'n')).string();
  files::write_atomic(longest, {"long"}, "cannot write: ");
  BOOST_TEST(read_text(longest) == "long");
  BOOST_TEST(entries(dir.path) == 2u);
}

// The pipeline cache and `forward --out` on a full disk: the valid old file stays.
BOOST_AUTO_TEST_CASE(failed_write_keeps_the_old_file) {
  test::TempDir dir;
  std::string path = dir.write("cache.bin", "the valid cache");
  std::string big(64 << 10, 'x');
  std::string err;
  {
    FileSizeLimit limit(4096);
    err = error_of([&] { files::write_atomic(path, {big}, "cannot write " + path + ": "); });
  }
  BOOST_TEST(err == "cannot write " + path + ": File too large");
  BOOST_TEST(read_text(path) == "the valid cache");
  BOOST_TEST(entries(dir.path) == 1u, "a temporary file was left behind");
}

// A symlink planted at the target is replaced, not followed: what it points at is untouched.
BOOST_AUTO_TEST_CASE(symlink_at_target_is_not_followed) {
  test::TempDir dir;
  std::string victim = dir.write("victim", "precious");
  fs::create_symlink(victim, dir / "cache.bin");
  files::write_atomic((dir / "cache.bin").string(), {"cache"}, "");
  BOOST_TEST(read_text(victim) == "precious");
  BOOST_TEST(!fs::is_symlink(dir / "cache.bin"));
  BOOST_TEST(read_text(dir / "cache.bin") == "cache");
}

// A user's output through a symlink reaches the file behind it, still atomically; a name
// for an open descriptor (`--out /dev/stdout` with stdout redirected by `>` or `>>`) is
// written to that descriptor at its offset. Replacing the link would lose the output (and,
// for /dev/stdout, put a regular file in /dev).
BOOST_AUTO_TEST_CASE(write_output_writes_through_symlinks) {
  test::TempDir dir;
  std::string real = dir.write("real.npy", "old and longer");
  fs::create_symlink(real, dir / "link.npy");
  files::write_output((dir / "link.npy").string(), {"new"}, "");
  BOOST_TEST(fs::is_symlink(dir / "link.npy"));
  BOOST_TEST(read_text(real) == "new");
  {
    FileSizeLimit limit(4096);  // a failed write through the link keeps the target whole
    BOOST_TEST(!error_of([&] { files::write_output((dir / "link.npy").string(), {std::string(64 << 10, 'x')}, ""); })
                    .empty());
  }
  BOOST_TEST(read_text(real) == "new");

  fs::create_symlink(dir / "created.npy", dir / "dangling.npy");
  files::write_output((dir / "dangling.npy").string(), {"made"}, "");
  BOOST_TEST(fs::is_symlink(dir / "dangling.npy"));
  BOOST_TEST(read_text(dir / "created.npy") == "made");

  std::string appended = dir.write("stdout.npy", "earlier output\n");  // `>> stdout.npy`
  int fd = ::open(appended.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  files::check_output("/proc/self/fd/" + std::to_string(fd), "");
  files::write_output("/proc/self/fd/" + std::to_string(fd), {"through ", "the descriptor"}, "");
  ::close(fd);
  BOOST_TEST(read_text(appended) == "earlier output\nthrough the descriptor");
  BOOST_TEST(entries(dir.path) == 5u, "a temporary file was left behind");
  BOOST_TEST(error_of([] { files::check_output("/dev/fd/987", "p: "); }) == "p: Bad file descriptor");
}

BOOST_AUTO_TEST_CASE(special_target_is_written_in_place) {
  BOOST_TEST(error_of([] { files::write_atomic("/dev/full", {"x"}, "cannot write /dev/full: "); }) ==
             "cannot write /dev/full: No space left on device");
  struct stat st {};
  BOOST_TEST((stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)), "/dev/full was replaced");
  test::TempDir dir;
  BOOST_TEST(error_of([&] { files::write_atomic(dir.path.string(), {"x"}, "p: "); }) == "p: a directory, not a file");
}

BOOST_AUTO_TEST_CASE(read_regular_refuses_what_never_ends) {
  test::TempDir dir;
  BOOST_TEST(error_of([] { files::read_regular("/dev/zero", "z: ", 1 << 20); }) ==
             "z: a character device, not a regular file");
  BOOST_TEST(error_of([&] { files::read_regular(dir.path.string(), "d: ", 1 << 20); }) ==
             "d: a directory, not a regular file");
  std::string fifo = (dir / "fifo").string();
  BOOST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  BOOST_TEST(error_of([&] { files::read_regular(fifo, "f: ", 1 << 20); }) == "f: a FIFO, not a regular file");
  std::string big = dir.write("big", std::string(3 << 20, 'b'));
  BOOST_TEST(error_of([&] { files::read_regular(big, "b: ", 1 << 20); }) ==
             "b: 3145728 bytes, more than the 1 MiB such a file may have");
  BOOST_TEST(files::read_regular(dir.write("small", "abc"), "", 1 << 20) == "abc");
}

// /proc and /sys files report a size of 0 and hold text: read to the end, not to st_size.
BOOST_AUTO_TEST_CASE(read_regular_reads_files_that_report_no_size) {
  std::string version = files::read_regular("/proc/self/status", "", 1 << 20);
  BOOST_TEST(version.find("Name:") == 0u, "read " << version.size() << " bytes of /proc/self/status");
  BOOST_TEST(version.back() == '\n');
  BOOST_TEST(error_of([] { files::read_regular("/proc/self/status", "s: ", 16); }) ==
             "s: more than the 16 bytes such a file may have");
}

BOOST_AUTO_TEST_CASE(exists_names_the_reason) {
  test::TempDir dir;
  BOOST_TEST(!files::exists((dir / "absent").string(), ""));
  fs::create_symlink(dir / "loop", dir / "loop");
  BOOST_TEST(error_of([&] { files::exists((dir / "loop").string(), "l: "); }) ==
             "l: Too many levels of symbolic links");
}
