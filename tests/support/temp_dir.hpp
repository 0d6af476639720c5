// A scratch directory for tests that write files: one per test process, created on first
// use and removed when the process exits.
#pragma once
#include <filesystem>

namespace gptvk::test {

const std::filesystem::path& temp_dir();

}  // namespace gptvk::test
