#include "tests/support/temp_dir.hpp"

#include <unistd.h>

#include <string>
#include <system_error>

namespace gptvk::test {

namespace {
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    path = std::filesystem::temp_directory_path() / ("gptvk_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

const std::filesystem::path& temp_dir() {
  static ScratchDir dir;
  return dir.path;
}

}  // namespace gptvk::test
