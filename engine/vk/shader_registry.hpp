// Lookup of the SPIR-V modules that the build embedded (see cmake/Shaders.cmake).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>

namespace gptvk::vk {

// Generated at build time: every embedded module by name ("<shader>" or "<shader>.<variant>").
const std::map<std::string, std::span<const uint32_t>>& shader_table();

// The module called `name`; throws std::logic_error if the build did not embed it.
std::span<const uint32_t> shader_spirv(const std::string& name);

}  // namespace gptvk::vk
