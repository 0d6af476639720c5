// How the sampler-family shaders (sample, sample_controls; the tests' argmax) are shaped on
// a device: workgroup size, reduction slots and the subgroup or shared-memory variant.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"
#include "engine/vk/context.hpp"

namespace gptvk::ops {

struct SamplerShape {
  uint32_t local = 1;
  uint32_t slots = 1;  // partials per reduction (SLOTS in the shaders)
  bool subgroup = false;
  std::string variant(const std::string& family) const { return family + (subgroup ? ".subgroup" : ".shared"); }
};

// The shape for `n` elements; DeviceError when the device cannot hold it.
SamplerShape sampler_shape(const vk::Context& ctx, uint32_t n);

// std::logic_error naming dispatch `name` and view `what` when `v` holds fewer than `bytes`.
void require_bytes(const View& v, uint64_t bytes, const char* what, const std::string& name);

}  // namespace gptvk::ops
