// `gpt-vk bench --batch B[,B...]`: B sequences decoding together (models/decode_batch.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "cli/bench_report.hpp"
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
// the first repeat warms up. Prints a line per B on stderr (aggregate and per-sequence
// decode tok/s) and, with f.profile, the last B's last step's per-op table; returns each
// B's rates (decode: the aggregate).
std::vector<BenchRates> run_batch_bench(ModelSession& s, const BatchBenchFlags& f, const BenchSetup& setup);

}  // namespace gptvk::cli
