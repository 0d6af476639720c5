#include "engine/vk/shader_registry.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace gptvk::vk {

namespace {
std::vector<const std::map<std::string, std::span<const uint32_t>>*>& added_tables() {
  static std::vector<const std::map<std::string, std::span<const uint32_t>>*> tables;
  return tables;
}
}  // namespace

void add_shader_table(const std::map<std::string, std::span<const uint32_t>>& table) {
  for (const auto& [name, words] : table)
    if (shader_table().count(name)) throw std::logic_error("shader '" + name + "' is embedded twice");
  if (std::find(added_tables().begin(), added_tables().end(), &table) == added_tables().end())
    added_tables().push_back(&table);
}

std::span<const uint32_t> shader_spirv(const std::string& name) {
  const auto& table = shader_table();
  auto it = table.find(name);
  if (it != table.end()) return it->second;
  for (const auto* added : added_tables())
    if (auto a = added->find(name); a != added->end()) return a->second;
  throw std::logic_error("no embedded shader named '" + name + "'");
}

namespace {

// The SPIR-V opcodes and decorations the reflection reads (SPIR-V spec, section 3).
enum Op : uint32_t {
  kOpTypeInt = 21, kOpTypeFloat = 22, kOpTypeVector = 23, kOpTypeMatrix = 24, kOpTypeArray = 28,
  kOpTypeStruct = 30, kOpTypePointer = 32, kOpConstant = 43, kOpVariable = 59, kOpDecorate = 71,
  kOpMemberDecorate = 72,
};
enum Decoration : uint32_t { kSpecId = 1, kArrayStride = 6, kBinding = 33, kDescriptorSet = 34, kOffset = 35 };
constexpr uint32_t kStoragePushConstant = 9;

// Everything one pass over the module collects, by result id.
struct Module {
  std::unordered_map<uint32_t, uint64_t> scalar_bytes, constants, array_stride;
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> vectors, arrays;  // element type, count / length id
  std::unordered_map<uint32_t, std::vector<uint32_t>> structs;                 // member types
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> member_offsets;            // (struct, member)
  std::unordered_map<uint32_t, uint32_t> pointee, binding, set;
  std::vector<uint32_t> push_vars;                                             // their pointer types
  std::set<uint32_t> spec_ids;
};

Module scan(std::span<const uint32_t> w) {
  if (w.size() < 5 || w[0] != 0x07230203u) throw std::logic_error("not a SPIR-V module");
  Module m;
  for (size_t i = 5; i < w.size();) {
    const uint32_t op = w[i] & 0xffffu, n = w[i] >> 16;
    if (n == 0 || i + n > w.size()) throw std::logic_error("truncated SPIR-V instruction");
    const uint32_t* a = &w[i + 1];  // operands
    switch (op) {
      case kOpTypeInt: case kOpTypeFloat: m.scalar_bytes[a[0]] = a[1] / 8; break;
      case kOpTypeVector: case kOpTypeMatrix: m.vectors[a[0]] = {a[1], a[2]}; break;
      case kOpTypeArray: m.arrays[a[0]] = {a[1], a[2]}; break;
      case kOpTypeStruct: m.structs[a[0]].assign(a + 1, a + n - 1); break;
      case kOpTypePointer: m.pointee[a[0]] = a[2]; break;
      case kOpConstant: m.constants[a[1]] = a[2]; break;
      case kOpVariable:
        if (a[2] == kStoragePushConstant) m.push_vars.push_back(a[0]);
        break;
      case kOpDecorate:
        if (a[1] == kSpecId) m.spec_ids.insert(a[2]);
        if (a[1] == kBinding) m.binding[a[0]] = a[2];
        if (a[1] == kDescriptorSet) m.set[a[0]] = a[2];
        if (a[1] == kArrayStride) m.array_stride[a[0]] = a[2];
        break;
      case kOpMemberDecorate:
        if (a[2] == kOffset) m.member_offsets[{a[0], a[1]}] = a[3];
        break;
      default: break;
    }
    i += n;
  }
  return m;
}

// Bytes a push-constant member of type `t` takes (scalars, vectors, arrays and structs of them).
uint64_t type_bytes(const Module& m, uint32_t t) {
  if (auto s = m.scalar_bytes.find(t); s != m.scalar_bytes.end()) return s->second;
  if (auto v = m.vectors.find(t); v != m.vectors.end()) return type_bytes(m, v->second.first) * v->second.second;
  if (auto a = m.arrays.find(t); a != m.arrays.end()) {
    auto stride = m.array_stride.find(t);
    auto len = m.constants.find(a->second.second);
    if (stride == m.array_stride.end() || len == m.constants.end())
      throw std::logic_error("push-constant array without a stride or a constant length");
    return stride->second * len->second;
  }
  if (auto s = m.structs.find(t); s != m.structs.end()) {
    uint64_t end = 0;
    for (uint32_t i = 0; i < s->second.size(); ++i) {
      auto off = m.member_offsets.find({t, i});
      if (off == m.member_offsets.end()) throw std::logic_error("push-constant member without an offset");
      end = std::max(end, off->second + type_bytes(m, s->second[i]));
    }
    return end;
  }
  throw std::logic_error("push-constant member of a type the reflection does not size");
}

}  // namespace

ShaderInterface reflect_spirv(std::span<const uint32_t> words) {
  const Module m = scan(words);
  ShaderInterface out;
  std::set<uint32_t> bindings;
  for (const auto& [var, b] : m.binding) {
    auto s = m.set.find(var);
    if (s == m.set.end() || s->second == 0) bindings.insert(b);
  }
  out.bindings.assign(bindings.begin(), bindings.end());
  for (uint32_t ptr : m.push_vars) {
    auto block = m.pointee.find(ptr);
    if (block == m.pointee.end()) throw std::logic_error("push-constant variable without a pointer type");
    out.push_bytes = std::max<uint32_t>(out.push_bytes, static_cast<uint32_t>(type_bytes(m, block->second)));
  }
  out.spec_ids.assign(m.spec_ids.begin(), m.spec_ids.end());
  return out;
}

const ShaderInterface& shader_interface(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, ShaderInterface> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, reflect_spirv(shader_spirv(name))).first;
  return it->second;
}

}  // namespace gptvk::vk
