// Lookup of the SPIR-V modules that the build embedded (see cmake/Shaders.cmake), and
// what each one's interface is, read back from its SPIR-V.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace gptvk::vk {

// Generated at build time: every embedded module by name ("<shader>" or "<shader>.<variant>").
const std::map<std::string, std::span<const uint32_t>>& shader_table();

// Adds modules built outside the library (the tests' own shaders, tests/shaders/), looked
// up after the embedded ones. Call before the first lookup; a name already known is an error.
void add_shader_table(const std::map<std::string, std::span<const uint32_t>>& table);

// The module called `name`; throws std::logic_error if the build did not embed it.
std::span<const uint32_t> shader_spirv(const std::string& name);

// A module's resource interface, as its SPIR-V declares it (the compiler keeps every
// declared binding, push-constant member and specialization constant, used or not).
struct ShaderInterface {
  std::vector<uint32_t> bindings;  // descriptor set 0's binding numbers, ascending
  uint32_t push_bytes = 0;         // end of the push-constant block's last member; 0: none
  std::vector<uint32_t> spec_ids;  // constant_id of every specialization constant, ascending
};

// Reflects a SPIR-V module; throws std::logic_error on words that are not one.
ShaderInterface reflect_spirv(std::span<const uint32_t> words);

// The interface of the embedded module `name` (reflected once, then cached).
const ShaderInterface& shader_interface(const std::string& name);

}  // namespace gptvk::vk
