#include "runtime/text_stream.hpp"

#include <algorithm>

#include "models/tokenizer/utf8.hpp"

namespace gptvk {

TextStream::TextStream(std::vector<std::string> stop_strings, bool drop_leading_space)
    : drop_leading_space_(drop_leading_space) {
  for (auto& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

size_t TextStream::stop_prefix_tail() const {
  size_t best = 0;
  for (const auto& s : stops_) {
    size_t longest = std::min(s.size() - 1, pending_.size());
    for (size_t n = longest; n > best; --n)
      if (std::string_view(pending_).substr(pending_.size() - n) == std::string_view(s).substr(0, n)) {
        best = n;
        break;
      }
  }
  return best;
}

std::string TextStream::release(size_t n) {
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  released_ += out;
  return out;
}

std::string TextStream::feed(std::string_view bytes) {
  if (stopped_) return {};
  if (drop_leading_space_ && !bytes.empty()) {
    drop_leading_space_ = false;
    if (bytes[0] == ' ') bytes.remove_prefix(1);
  }
  // A stop string may begin in text held back earlier, so the search covers all of pending_.
  pending_ += bytes;
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = release(first);
    pending_.clear();
    return out;
  }
  size_t keep = std::max(stop_prefix_tail(), tokenizer::utf8_incomplete_tail(pending_));
  return release(pending_.size() - keep);
}

std::string TextStream::flush() {
  if (stopped_) return {};
  return release(pending_.size());
}

}  // namespace gptvk
