// The per-step state buffer. A recorded graph never changes, so what changes between
// decode steps lives in this small device buffer: shaders read the position from it, and
// the sampler writes the next token id into the ids buffer and advances the position, so
// a decode step needs nothing from the host but a submit, and returns 4 bytes.
#pragma once
#include <cstdint>

namespace gptvk {

// Layout of the step buffer (uint32 words), shared with shaders/common/step.glsl.
struct StepState {
  uint32_t pos;       // position of the first token of this step in the sequence
  uint32_t rng_step;  // sampling counter: advanced by the sampler, seeds the RNG stream
  uint32_t reserved[2];
};

}  // namespace gptvk
