// The per-step state buffer (engine/ops/step.hpp): include with STEP_BINDING defined.
layout(std430, binding = STEP_BINDING) buffer StepBuf {
  uint step_pos;       // position of the first token of this step
  uint step_rng;       // sampling counter
  uint step_reserved0;
  uint step_reserved1;
};
