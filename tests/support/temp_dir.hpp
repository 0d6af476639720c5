// A scratch directory for tests that write files: one per test process, created on first
// use and removed when the process exits.
#pragma once
#include <filesystem>
#include <string>

namespace gptvk::test {

const std::filesystem::path& temp_dir();
// Writes `content` (binary) to temp_dir()/name and returns that path.
std::string write_temp_file(const std::string& name, const std::string& content);

// A fresh directory of its own (mkdtemp), removed with the object: for tests whose rows
// must not see each other's files.
struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
  // Writes `content` (binary) to path/name and returns that path.
  std::string write(const std::string& name, const std::string& content) const;
};

}  // namespace gptvk::test
