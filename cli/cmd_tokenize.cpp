// `gpt-vk tokenize`: placeholder until its issue lands; says so and fails.
#include <cstdio>

#include "cli/commands.hpp"

namespace gptvk::cli {

Action add_tokenize(CLI::App& app, Common&) {
  app.add_subcommand("tokenize", "(not built yet)");
  return [] {
    std::fprintf(stderr, "gpt-vk: 'tokenize' is not built yet\n");
    return 2;
  };
}

}  // namespace gptvk::cli
