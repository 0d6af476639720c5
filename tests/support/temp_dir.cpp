#include "tests/support/temp_dir.hpp"

#include <unistd.h>

#include <fstream>
#include <stdexcept>
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

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "gptvk-test-XXXXXX").string();
  if (!mkdtemp(templ.data())) throw std::runtime_error("cannot create a temporary directory");
  path = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = (path / name).string();
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

}  // namespace gptvk::test
