// Validators for numeric flags whose errors name the rule and the value given (CLI11's own
// say "Value abc not in range 1 to 1073741824", or print a bound of 309 digits).
#pragma once
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gptvk::cli {

// A whole number in [lo, hi], in decimal digits; `s` becomes its plain decimal form. CLI11
// reads integers in C's base 0 ("010" is 8, "0x10" 16); here "010" is 10, as --seed and
// --device read it, and "0x10" no number.
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
  const auto window_number = [](const std::string& range) {
    return CLI::Validator(
        [range](std::string& s) -> std::string {
          const std::string given = s;
          if (whole_number_in(0, UINT32_MAX)(s).empty()) return {};
          return "expected a whole number in " + range + ", got '" + given + "'";
        },
        "");
  };
  cmd->add_option("-c,--context", context, "window length in tokens (default: the model's context)")
      ->transform(window_number("[2, the model's context]"))
      ->option_text("INT in [2, the model's context]");
  cmd->add_option("--stride", stride, "window step in tokens (default: half the window)")
      ->transform(window_number("[1, --context]"))
      ->option_text("INT in [1, --context]");
}

// A flag's float as written in decimal ("0.5", "+2", "1e-3"): the whole text, finite and
// within a float's range, since the value is stored as a float. Hex, padding and a value
// that would round to 0 or infinity are refused rather than read as some other number
// (`out_of_range` says which of these it was).
inline std::optional<float> parse_float(std::string_view s, bool* out_of_range = nullptr) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) return std::nullopt;
  }
  float v = 0;
  const char* end = s.data() + s.size();
  const auto [stop, ec] = std::from_chars(s.data(), end, v, std::chars_format::general);
  if (out_of_range) *out_of_range = ec == std::errc::result_out_of_range && stop == end;
  if (ec != std::errc() || stop != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A float flag passing `ok` (which `rule` describes); `s` becomes the float's shortest form.
template <class Ok>
CLI::Validator float_flag(Ok ok, const std::string& rule) {
  return CLI::Validator(
      [ok, rule](std::string& s) -> std::string {
        bool out_of_range = false;
        const std::optional<float> v = parse_float(s, &out_of_range);
        if (!v)
          return "expected a decimal number " + rule + (out_of_range ? " within a 32-bit float's range" : "") +
                 ", got '" + s + "'";
        if (!ok(*v)) return "must be a number " + rule + ", got " + s;
        char out[32];
        s.assign(out, std::to_chars(out, out + sizeof out, *v).ptr);
        return {};
      },
      "FLOAT " + rule);
}

// A number >= lo (and, when `strict`, > lo).
inline CLI::Validator number_at_least(float lo, bool strict = false) {
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", lo);
  return float_flag([lo, strict](float v) { return strict ? v > lo : v >= lo; },
                    std::string(strict ? "> " : ">= ") + bound);
}

// A number in [lo, hi].
inline CLI::Validator number_in(float lo, float hi) {
  char range[64];
  std::snprintf(range, sizeof range, "in [%g, %g]", lo, hi);
  return float_flag([lo, hi](float v) { return v >= lo && v <= hi; }, range);
}

// For --top-p: a probability mass that keeps at least one token, so 0 is out.
inline CLI::Validator probability_above_zero() {
  return float_flag([](float p) { return p > 0.0f && p <= 1.0f; }, "in (0, 1]");
}

}  // namespace gptvk::cli
