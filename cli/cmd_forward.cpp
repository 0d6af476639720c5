// `gpt-vk forward`: placeholder until its issue lands; says so and fails.
#include <cstdio>

#include "cli/commands.hpp"

namespace gptvk::cli {

Action add_forward(CLI::App& app, Common&) {
  app.add_subcommand("forward", "(not built yet)");
  return [] {
    std::fprintf(stderr, "gpt-vk: 'forward' is not built yet\n");
    return 2;
  };
}

}  // namespace gptvk::cli
