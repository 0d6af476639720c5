// libFuzzer target: GgufFile::parse (models/gguf_file.cpp): header, metadata, tensor
// directory, offsets and alignment; the gpt2 config and dequantization of what it accepts.
// The checks live in targets.hpp so the corpus replay test runs the same ones.
#include "tests/fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gptvk::fuzz::check_gguf({data, size});
  return 0;
}
