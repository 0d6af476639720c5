// Error types that reach the user as one line and an exit code (CONTRACT: 1 bad input, 2 bad usage).
#pragma once
#include <stdexcept>
#include <string>

namespace gptvk {

// Bad input: a file, config, tensor or id that is wrong. Exit code 1.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bad usage: a flag or argument combination that makes no sense. Exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The Vulkan device failed or lacks something we need (out of memory, device lost, ...). Exit code 1.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace gptvk
