// Elementwise add of two float vectors (tests/shaders/add.comp): the tests drive the graph with it.
#pragma once
#include <cstdint>
#include <string>

#include "engine/graph.hpp"

namespace gptvk::ops {

// y[i] = a[i] + b[i] for i < n. y may alias a or b.
void add(Graph& g, View a, View b, View y, uint32_t n, const std::string& name = "add");

}  // namespace gptvk::ops
