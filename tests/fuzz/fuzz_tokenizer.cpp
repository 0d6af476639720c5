// libFuzzer target: Tokenizer encode + decode (models/tokenizer/): GPT-2's byte-exact round trip of
// any bytes, GPT-1's round trip of their normalized words.
// The checks live in targets.hpp so the corpus replay test runs the same ones.
#include "tests/fuzz/targets.hpp"

// Loads the vocabularies and merges once, before libFuzzer's per-input timeout starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gptvk::fuzz::gpt2_tokenizer();
  gptvk::fuzz::gpt1_tokenizer();
  gptvk::fuzz::gpt2_tokenizer_with_added();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gptvk::fuzz::check_tokenizer({data, size});
  return 0;
}
