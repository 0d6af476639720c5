// Commands that never open a device (tokenize, detokenize) still get main's --device and
// --validation like every command; they refuse them rather than ignore them silently.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "engine/error.hpp"

namespace gptvk::cli {

inline void reject_device_flags(const CLI::App* cmd) {
  for (const char* flag : {"--device", "--validation"}) {
    const CLI::Option* opt = cmd->get_option_no_throw(flag);
    if (opt && opt->count() > 0)
      throw UsageError(cmd->get_name() + " uses no device: " + flag + " does not apply to it");
  }
}

}  // namespace gptvk::cli
