// Validators for numeric flags whose errors name the rule and the value given (CLI11's own
// say "Value abc not in range 1 to 1073741824", or print a bound of 309 digits).
#pragma once
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace gptvk::cli {

// A whole number in [lo, hi], in decimal digits; `s` becomes its plain decimal form. CLI11
// reads integers in C's base 0 ("010" is 8, "0x10" 16), which the flags then took in place
// of what was written: "010" is 10 here, as --seed and --device read it, and "0x10" no
// number.
inline CLI::Validator whole_number_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        int64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [stop, ec] = std::from_chars(s.data(), end, v, 10);
        if (s.empty() || ec != std::errc() || stop != end) return "expected a whole number, got '" + s + "'";
        if (v < lo || v > hi)
          return "value " + s + " not in range " + std::to_string(lo) + " to " + std::to_string(hi);
        s = std::to_string(v);
        return {};
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// perplexity's and score's --context and --stride. Their true ranges depend on the model,
// so they are checked once it is read (models/perplexity.cpp), as the help says.
inline void add_window_flags(CLI::App* cmd, std::optional<uint32_t>& context, std::optional<uint32_t>& stride) {
  cmd->add_option("--context", context, "window length in tokens (default: the model's context)")
      ->transform(whole_number_in(0, UINT32_MAX))
      ->option_text("INT in [2, the model's context]");
  cmd->add_option("--stride", stride, "window step in tokens (default: half the window)")
      ->transform(whole_number_in(0, UINT32_MAX))
      ->option_text("INT in [1, --context]");
}

// A finite number >= lo (and, when `strict`, > lo).
inline CLI::Validator number_at_least(double lo, bool strict = false) {
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", lo);
  const std::string rule = std::string(strict ? "> " : ">= ") + bound;
  return CLI::Validator(
      [lo, strict, rule](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v) || !std::isfinite(v)) return "expected a number, got '" + s + "'";
        if (strict ? !(v > lo) : !(v >= lo)) return "must be a number " + rule + ", got " + s;
        return {};
      },
      "FLOAT " + rule);
}

// A finite number in [lo, hi].
inline CLI::Validator number_in(double lo, double hi) {
  char range[64];
  std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
  const std::string rule = range;
  return CLI::Validator(
      [lo, hi, rule](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v) || !std::isfinite(v)) return "expected a number, got '" + s + "'";
        if (!(v >= lo && v <= hi)) return "must be a number in " + rule + ", got " + s;
        return {};
      },
      "FLOAT in " + rule);
}

}  // namespace gptvk::cli
