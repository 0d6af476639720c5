// `gpt-vk devices`: one line per Vulkan device: index, name, type, memory.
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "engine/vk/context.hpp"
#include "engine/vk/pipeline.hpp"

namespace gptvk::cli {

Action add_devices(CLI::App& app, Common& common) {
  auto* cmd = app.add_subcommand("devices", "list Vulkan devices: index, name, type, memory");
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("-v,--verbose", *verbose, "also print the chosen device's capabilities");
  return [&common, verbose] {
    auto devices = vk::Context::list_devices();
    if (devices.empty()) {
      std::fprintf(stderr, "gpt-vk: no Vulkan device found (install mesa-vulkan-drivers for lavapipe)\n");
      return 1;
    }
    for (const auto& d : devices)
      print_stdout("%u: %s (%s, %llu MiB)\n", d.index, d.name.c_str(), d.type_name().c_str(),
                  static_cast<unsigned long long>(d.device_local_bytes >> 20));
    if (*verbose || common.device >= 0) {
      vk::ContextOptions o;
      o.device_index = common.device;
      o.validation = common.validation;
      vk::Context ctx(o);
      print_stdout("chosen: %u: %s\n", ctx.info().index, ctx.summary().c_str());
      const std::string& cache = ctx.pipelines().path();
      print_stdout("pipeline cache: %s\n", cache.empty() ? "none" : cache.c_str());
    }
    return 0;
  };
}

}  // namespace gptvk::cli
