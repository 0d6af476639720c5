// Error types that reach the user as one line and an exit code (CONTRACT: 1 bad input, 2 bad usage).
#pragma once
#include <stdexcept>
#include <string>

namespace gptvk {

// The base of the three: what() is a C string, which ends at the first NUL byte that text
// quoted from a file may hold; message() keeps every byte (the CLI escapes it when printing).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message), message_(message) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// Bad input: a file, config, tensor or id that is wrong. Exit code 1.
struct InputError : Error {
  using Error::Error;
};

// Bad usage: a flag or argument combination that makes no sense. Exit code 2.
struct UsageError : Error {
  using Error::Error;
};

// The Vulkan device failed or lacks something we need (out of memory, device lost, ...). Exit code 1.
struct DeviceError : Error {
  using Error::Error;
};

}  // namespace gptvk
