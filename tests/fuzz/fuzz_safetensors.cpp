// libFuzzer target: SafetensorsFile::open (models/safetensors.cpp): header length, JSON header, offsets, dtypes.
// The checks live in targets.hpp so the corpus replay test runs the same ones.
#include "tests/fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gptvk::fuzz::check_safetensors({data, size});
  return 0;
}
