#include "tests/support/temp_dir.hpp"

#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace gptvk::test {

namespace {
std::string write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    path = std::filesystem::temp_directory_path() / ("gptvk_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
    path = std::filesystem::canonical(path);  // the real path, as configs resolve theirs
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

std::string write_temp_file(const std::string& name, const std::string& content) {
  return write_file(temp_dir() / name, content);
}

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "gptvk-test-XXXXXX").string();
  if (!mkdtemp(templ.data())) throw std::runtime_error("cannot create a temporary directory");
  path = std::filesystem::canonical(templ);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  return write_file(path / name, content);
}

}  // namespace gptvk::test
