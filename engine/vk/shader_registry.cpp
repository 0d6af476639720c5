#include "engine/vk/shader_registry.hpp"

#include <stdexcept>

namespace gptvk::vk {

std::span<const uint32_t> shader_spirv(const std::string& name) {
  const auto& table = shader_table();
  auto it = table.find(name);
  if (it == table.end()) throw std::logic_error("no embedded shader named '" + name + "'");
  return it->second;
}

}  // namespace gptvk::vk
