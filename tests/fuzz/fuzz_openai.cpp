// libFuzzer target: OpenAI request bodies (server/openai_request.cpp) for /v1/completions and
// /v1/chat/completions: JSON shapes, types, ranges, prompts, messages, logit_bias, stop.
// The checks live in targets.hpp so the corpus replay test runs the same ones.
#include "tests/fuzz/targets.hpp"

// Loads GPT-2's vocabulary and merges once, before libFuzzer's per-input timeout starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gptvk::fuzz::gpt2_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gptvk::fuzz::check_openai_request({data, size});
  return 0;
}
