// Limits on the shape of JSON read from users (prompt files, snapshot folders, requests),
// checked in one streaming pass before nlohmann::json builds the document.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace gptvk {

struct JsonLimits {
  // No file or request this engine reads nests deeper. nlohmann::json parses without
  // recursion but copies, compares and prints a document recursively: a megabyte holds a few
  // hundred thousand "[", deep enough to overflow a thread's stack.
  static constexpr size_t kMaxDepth = 100;
  size_t max_depth = kMaxDepth;
  // An insertion-ordered object looks each new key up among those before it, so building an
  // object costs the square of its keys: a request caps them, a vocabulary file cannot.
  size_t max_object_keys = std::numeric_limits<size_t>::max();
};

// What in `text` breaks `limits` ("nests deeper than 100 levels", "has an object of more
// than 1024 keys"), or nothing. Malformed JSON is not reported here: the parse that follows
// words it with its position.
std::optional<std::string> json_limit_breach(std::string_view text, const JsonLimits& limits = {});

// A JSON file of at most `max_bytes` (a regular file), within the default limits; InputError
// "PATH: cause" for an unreadable, too deep or malformed one.
nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes);

}  // namespace gptvk
