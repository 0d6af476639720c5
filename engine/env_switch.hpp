// On/off settings from the environment, read alike everywhere.
#pragma once
#include <cctype>
#include <cstdlib>
#include <string>

#include "engine/error.hpp"

namespace gptvk {

// The switch `name`: 1, true or yes (any case) turn it on, 0, false or no off; `unset` when
// the variable is not set. Any other value is a UsageError, not a guess.
inline bool env_switch(const char* name, bool unset) {
  const char* v = std::getenv(name);
  if (!v) return unset;
  std::string s = v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "1" || s == "true" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "no") return false;
  throw UsageError(std::string(name) + " is 0, 1, true, false, yes or no, not '" + v + "'");
}

}  // namespace gptvk
