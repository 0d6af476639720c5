// Error types that reach the user as one line and an exit code (CONTRACT: 1 bad input, 2 bad usage).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

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

// Input quoted in an error: its start when it is long, so that one bad item of a 200 MB
// list is not a 200 MB line.
inline std::string excerpt(std::string_view text, size_t shown = 64) {
  if (text.size() <= shown) return std::string(text);
  return std::string(text.substr(0, shown)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace gptvk
