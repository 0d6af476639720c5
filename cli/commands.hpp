// Each `gpt-vk` subcommand registers its flags and its action with CLI11 in its own file.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>

namespace gptvk::cli {

// Flags every command shares (CONTRACT: all commands take --device N).
struct Common {
  int device = -1;
  bool validation = false;
};

using Action = std::function<int()>;

// Each returns the action to run when its subcommand is chosen.
Action add_devices(CLI::App& app, Common& common);
Action add_tokenize(CLI::App& app, Common& common);
Action add_detokenize(CLI::App& app, Common& common);
Action add_forward(CLI::App& app, Common& common);
Action add_generate(CLI::App& app, Common& common);
Action add_perplexity(CLI::App& app, Common& common);
Action add_bench(CLI::App& app, Common& common);
Action add_score(CLI::App& app, Common& common);
Action add_serve(CLI::App& app, Common& common);

}  // namespace gptvk::cli
