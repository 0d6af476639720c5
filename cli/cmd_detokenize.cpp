// `gpt-vk detokenize`: placeholder until its issue lands; says so and fails.
#include <cstdio>

#include "cli/commands.hpp"

namespace gptvk::cli {

Action add_detokenize(CLI::App& app, Common&) {
  app.add_subcommand("detokenize", "(not built yet)");
  return [] {
    std::fprintf(stderr, "gpt-vk: 'detokenize' is not built yet\n");
    return 2;
  };
}

}  // namespace gptvk::cli
