#include "cli/bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/output.hpp"

namespace gptvk::cli {

namespace {

using json = nlohmann::ordered_json;

// A rate as JSON: null for NaN (no decode measured), which JSON cannot hold.
json rate(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json rate_summary(const std::vector<double>& runs) {
  if (runs.empty()) return nullptr;
  const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
  return {{"median", median(runs)}, {"min", *lo}, {"max", *hi}, {"runs", runs}};
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_bench_lines(const BenchSetup& setup, const std::vector<BenchRates>& rows, bool batched) {
  for (const BenchRates& r : rows) {
    const double prefill = median(r.prefill), decode = median(r.decode);
    const auto [plo, phi] = std::minmax_element(r.prefill.begin(), r.prefill.end());
    if (!batched)
      std::fprintf(stderr, "prefill %u tokens: median %.1f tok/s (min %.1f, max %.1f) over %u runs\n",
                   setup.prompt_tokens, prefill, *plo, *phi, setup.repeats);
    if (r.decode.empty()) {
      if (batched)
        std::fprintf(stderr, "batch %u: prefill %.1f tok/s; decode not measured (--gen-tokens 0)\n", r.batch, prefill);
      else
        std::fprintf(stderr, "decode: not measured (--gen-tokens 0)\n");
      continue;
    }
    const auto [lo, hi] = std::minmax_element(r.decode.begin(), r.decode.end());
    if (batched)
      std::fprintf(stderr,
                   "batch %u: decode %u tokens each at depth %u: aggregate median %.2f tok/s (min %.2f, max %.2f), "
                   "per sequence %.2f tok/s; prefill %.1f tok/s\n",
                   r.batch, setup.gen_tokens, setup.prompt_tokens, decode, *lo, *hi, decode / r.batch, prefill);
    else
      std::fprintf(stderr, "decode %u tokens at depth %u: median %.2f tok/s (min %.2f, max %.2f)\n", setup.gen_tokens,
                   setup.prompt_tokens, decode, *lo, *hi);
  }
}

void print_bench_result(const BenchSetup& setup, const std::vector<BenchRates>& rows, bool json_out) {
  const BenchRates& last = rows.back();
  if (!json_out) {
    print_stdout("prefill_tok_s=%.3f decode_tok_s=%.3f\n", median(last.prefill), median(last.decode));
    return;
  }
  json batches = json::array();
  for (const BenchRates& r : rows)
    batches.push_back({{"batch", r.batch},
                       {"prefill_tok_s", rate_summary(r.prefill)},
                       {"decode_tok_s", rate_summary(r.decode)},
                       {"decode_tok_s_per_sequence", rate(median(r.decode) / r.batch)}});
  const json out = {{"model", setup.model},
                    {"device", setup.device},
                    {"dtype", setup.dtype},
                    {"kv_cache", setup.kv_f16 ? "f16" : "f32"},
                    {"batch_kernels", setup.batch_kernels.empty() ? json(nullptr) : json(setup.batch_kernels)},
                    {"random_weights", setup.random_weights},
                    {"load_s", setup.load_seconds},
                    {"prompt_tokens", setup.prompt_tokens},
                    {"gen_tokens", setup.gen_tokens},
                    {"repeats", setup.repeats},
                    {"batches", batches},
                    {"prefill_tok_s", rate(median(last.prefill))},
                    {"decode_tok_s", rate(median(last.decode))}};
  write_stdout(out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace gptvk::cli
