// Activation functions the ops can apply (alone or fused into a linear layer's epilogue).
#pragma once

namespace gptvk {

// Values match the ACT specialization constant in shaders/common/activation.glsl.
enum class Activation : unsigned { None = 0, GeluTanh = 1, GeluErf = 2, Relu = 3 };

}  // namespace gptvk
