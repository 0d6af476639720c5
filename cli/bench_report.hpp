// What `gpt-vk bench` measured and how it is printed: a line per batch size on stderr, then
// on stdout the contract's `prefill_tok_s=... decode_tok_s=...` line, or with --json one JSON
// object (every repeat's rates, for scripts that compare runs).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gptvk::cli {

// The rates of one batch size, a value per measured repeat (tok/s; decode: every row's
// tokens together).
struct BenchRates {
  uint32_t batch = 1;
  std::vector<double> prefill, decode;
};

// What the JSON object says of the run besides its rates.
struct BenchSetup {
  std::string model, device, dtype;
  std::string batch_kernels;  // with --batch: "exact" or "gemm"; "" for a lone sequence's runs
  bool kv_f16 = false, random_weights = false;
  double load_seconds = 0;
  uint32_t prompt_tokens = 0, gen_tokens = 0, repeats = 0;
};

// The median of a run's rates (NaN when there are none).
double median(std::vector<double> v);

// The stderr lines of each batch size (`batched`: the aggregate and per-sequence form of
// `--batch`, else plain bench's prefill and decode lines).
void print_bench_lines(const BenchSetup& setup, const std::vector<BenchRates>& rows, bool batched);

// stdout: the last batch size's medians as `prefill_tok_s=P decode_tok_s=D` (nan where
// nothing was measured), or with `json` one line holding the setup and every batch size's
// rates (null where nothing was measured).
void print_bench_result(const BenchSetup& setup, const std::vector<BenchRates>& rows, bool json_out);

}  // namespace gptvk::cli
