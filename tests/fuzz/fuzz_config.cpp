// libFuzzer target: load_config (models/config.cpp): TOML syntax, keys, types, values, [weights.names].
// The checks live in targets.hpp so the corpus replay test runs the same ones.
#include "tests/fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gptvk::fuzz::check_config({data, size});
  return 0;
}
