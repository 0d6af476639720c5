// Validators and parsers for flags whose CLI11 defaults are too lenient or word their
// errors with a 309-digit bound ("not in range 0 to 1.8e308").
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/strict_number.hpp"

namespace gptvk::cli {

// A device index from `gpt-vk devices` (--device).
inline CLI::Validator device_index() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        if (!parse_decimal_u64(s, v) || v > 1u << 20) return "must be a device index (0, 1, ...), got '" + s + "'";
        return {};
      },
      "INDEX");
}

// A random seed: a whole number from 0 to 2^64-1 (--seed).
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        if (!parse_decimal_u64(s, v))
          return "must be a whole number from 0 to 18446744073709551615, got '" + s + "'";
        return {};
      },
      "0..2^64-1");
}

// Adds --seed (-s, as llama.cpp's); `seed` stays empty when the flag is absent (then the
// seed is random).
inline CLI::Option* add_seed_option(CLI::App* cmd, std::optional<uint64_t>& seed, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          "-s,--seed",
          [&seed](const std::string& s) {
            uint64_t v = 0;
            parse_decimal_u64(s, v);  // seed_value() has accepted it
            seed = v;
          },
          help)
      ->check(seed_value());
}

}  // namespace gptvk::cli
