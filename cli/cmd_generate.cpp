// `gpt-vk generate`: placeholder until its issue lands; says so and fails.
#include <cstdio>

#include "cli/commands.hpp"

namespace gptvk::cli {

Action add_generate(CLI::App& app, Common&) {
  app.add_subcommand("generate", "(not built yet)");
  return [] {
    std::fprintf(stderr, "gpt-vk: 'generate' is not built yet\n");
    return 2;
  };
}

}  // namespace gptvk::cli
