// `gpt-vk bench --batch B[,B...]`: B sequences decoding together (models/decode_batch.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "cli/model_session.hpp"

namespace gptvk::cli {

struct BatchBenchFlags {
  uint32_t prompt_tokens = 128, gen_tokens = 64, repeats = 5;
  std::vector<uint32_t> batches;  // batch sizes, measured in turn within each repeat
  bool exact_rows = true;         // DecodeBatch's exact rows (each row bit-identical to decoding alone)
  bool profile = false;           // per-op times of the last B's last decode step
};

// Each repeat prefills B random prompts and then decodes --gen-tokens tokens of all B
// together, for every B in turn (B = 1: the one-sequence decode step, as plain `bench`);
// the first repeat warms up. Prints one line per B on stderr (aggregate and per-sequence
// decode tok/s) and, last on stdout, prefill_tok_s and decode_tok_s of the last B listed
// (decode: the aggregate).
int run_batch_bench(ModelSession& s, const BatchBenchFlags& f);

// The median of a run's rates (NaN when there are none); plain `bench` shares it.
double median(std::vector<double> v);

}  // namespace gptvk::cli
