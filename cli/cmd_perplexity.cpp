// `gpt-vk perplexity`: placeholder until its issue lands; says so and fails.
#include <cstdio>

#include "cli/commands.hpp"

namespace gptvk::cli {

Action add_perplexity(CLI::App& app, Common&) {
  app.add_subcommand("perplexity", "(not built yet)");
  return [] {
    std::fprintf(stderr, "gpt-vk: 'perplexity' is not built yet\n");
    return 2;
  };
}

}  // namespace gptvk::cli
