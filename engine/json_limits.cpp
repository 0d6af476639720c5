#include "engine/json_limits.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "engine/error.hpp"
#include "engine/files.hpp"

namespace gptvk {

namespace {

using nlohmann::json;

// A SAX pass, not nlohmann's parser callback: the callback parser rescans each object as it
// closes, quadratic on arrays of objects.
class LimitCheck : public nlohmann::json_sax<json> {
 public:
  explicit LimitCheck(const JsonLimits& limits) : limits_(limits) {}
  std::optional<std::string> breach;

  bool start_object(std::size_t) override {
    keys_.push_back(0);
    return open();
  }
  bool start_array(std::size_t) override {
    keys_.push_back(0);
    return open();
  }
  bool key(string_t&) override {
    if (++keys_.back() <= limits_.max_object_keys) return true;
    breach = "has an object of more than " + std::to_string(limits_.max_object_keys) + " keys";
    return false;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool open() {
    if (keys_.size() <= limits_.max_depth) return true;
    breach = "nests deeper than " + std::to_string(limits_.max_depth) + " levels";
    return false;
  }
  bool close() {
    keys_.pop_back();
    return true;
  }

  const JsonLimits& limits_;
  std::vector<size_t> keys_;  // keys so far in each object or array open, innermost last
};

}  // namespace

std::optional<std::string> json_limit_breach(std::string_view text, const JsonLimits& limits) {
  LimitCheck check(limits);
  json::sax_parse(text, &check, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  return check.breach;
}

json read_json_file(const std::string& path, uint64_t max_bytes) {
  const std::string text = files::read_regular(path, "cannot read " + path + ": ", max_bytes);
  if (auto breach = json_limit_breach(text)) throw InputError(path + ": the JSON " + *breach);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // nlohmann's message ends with the token it last read, which can be the whole file.
    throw InputError(path + ": malformed JSON: " + excerpt(e.what(), 240));
  }
}

}  // namespace gptvk
