// `gpt-vk bench`: placeholder until its issue lands; says so and fails.
#include <cstdio>

#include "cli/commands.hpp"

namespace gptvk::cli {

Action add_bench(CLI::App& app, Common&) {
  app.add_subcommand("bench", "(not built yet)");
  return [] {
    std::fprintf(stderr, "gpt-vk: 'bench' is not built yet\n");
    return 2;
  };
}

}  // namespace gptvk::cli
