// What the model's two halves share when they record dispatches: models/gpt_model.cpp (set-up,
// the folded LayerNorms) and models/gpt_graph.cpp (the transformer's graph).
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"

namespace gptvk {

// "L7." for layer 7's ops (built by appending: GCC 12 misreports "L" + std::string as an
// overlapping copy, -Wrestrict). --profile groups dispatches by the name after it.
inline std::string layer_prefix(uint32_t l) { return std::string("L").append(std::to_string(l)).append("."); }

// An optional tensor (a bias the config leaves out) as a view: empty when it is absent.
inline View view_or_none(const vk::Buffer& b) { return b.empty() ? View{} : whole(b); }

}  // namespace gptvk
