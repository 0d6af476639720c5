// `gpt-vk devices`: one line per Vulkan device: index, name, type, memory.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "engine/plan.hpp"
#include "engine/vk/context.hpp"
#include "engine/vk/pipeline.hpp"

namespace gptvk::cli {

Action add_devices(CLI::App& app, Common& common) {
  auto* cmd = app.add_subcommand("devices", "list Vulkan devices: index, name, type, memory");
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("-v,--verbose", *verbose, "also print the chosen device's capabilities and execution plan");
  return [&common, verbose] {
    // A device chosen (-v, --device), checked (--validation) or set up from the environment
    // (GPTVK_DEVICE, GPTVK_VALIDATION[_GPU], GPTVK_FORCE) is opened before anything is printed, so
    // that a bad index or setting is a usage error with no output, as in every other command.
    // Only -v adds lines: a script's `devices --device N` reads one line a device.
    const bool from_env = std::getenv("GPTVK_DEVICE") || std::getenv("GPTVK_VALIDATION") ||
                          std::getenv("GPTVK_VALIDATION_GPU") || std::getenv("GPTVK_FORCE");
    std::unique_ptr<vk::Context> ctx;
    if (*verbose || common.device >= 0 || common.validation || from_env) {
      vk::ContextOptions o;
      o.device_index = common.device;
      o.validation = common.validation;
      ctx = std::make_unique<vk::Context>(o);
    }
    auto devices = vk::Context::list_devices();
    if (devices.empty()) {
      std::fprintf(stderr, "gpt-vk: no Vulkan device found (install mesa-vulkan-drivers for lavapipe)\n");
      return 1;
    }
    for (const auto& d : devices)
      print_stdout("%u: %s (%s, %llu MiB)\n", d.index, d.name.c_str(), d.type_name().c_str(),
                  static_cast<unsigned long long>(d.device_local_bytes >> 20));
    if (*verbose) {
      print_stdout("chosen: %u: %s\n", ctx->info().index, ctx->summary().c_str());
      const std::string& cache = ctx->pipelines().path();
      print_stdout("pipeline cache: %s\n", cache.empty() ? "none" : cache.c_str());
      print_stdout("validation: %s\n", ctx->validation_mode());
      // What a GPT-2-shaped model with f16 weights runs on it (engine/plan.hpp).
      const PlanModel gpt2{.pre_norm = true, .n_layers = 12, .norms_foldable = true, .max_chunk = 256,
                           .attention = {12, 64, 1024}, .f16_products = true};
      print_stdout("%s", describe_plan(*ctx, gpt2).c_str());
    }
    return 0;
  };
}

}  // namespace gptvk::cli
