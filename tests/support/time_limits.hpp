// The limits the tests put on a gpt-vk process's time catch a hang or a run that went on
// past where it should have stopped. GPU-assisted validation (GPTVK_VALIDATION_GPU=1, which
// the tests pass on to the processes they start) slows lavapipe 3-15x (tests/README, "Shader
// bounds checks"), so there the limits stretch by the upper end of that.
#pragma once
#include "engine/env_switch.hpp"

namespace gptvk::test {

inline double time_limit(double seconds) {
  static const double factor = env_switch("GPTVK_VALIDATION_GPU", false) ? 15.0 : 1.0;
  return seconds * factor;
}

}  // namespace gptvk::test
