// The text side of generation: turns generated tokens' bytes into text released piece by
// piece, stopping at the first stop string. A piece never ends inside a UTF-8 character
// or inside text that could still become a stop string (it is held back until the next
// bytes decide), so a stop string is caught wherever it falls: across tokens, or starting
// or ending inside a multi-byte character.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gptvk {

class TextStream {
 public:
  // Empty stop strings are ignored. With `drop_leading_space`, a space that begins the text
  // is not part of it (nor of any stop string's match): a chat reply's first space belongs to
  // the transcript's "Assistant:", not to the reply the client sees.
  explicit TextStream(std::vector<std::string> stop_strings = {}, bool drop_leading_space = false);

  // Appends a token's bytes; returns the text that is final now (maybe nothing). After a
  // stop string is found, returns the text before it and ignores anything fed later.
  std::string feed(std::string_view bytes);
  // The held-back text when generation ends for another reason (an unfinished character
  // is passed through as it is, as StreamDecoder::flush does); empty after a stop.
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& released() const { return released_; }    // everything returned so far

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of a stop string.
  size_t stop_prefix_tail() const;
  std::string release(size_t n);

  std::vector<std::string> stops_;
  std::string pending_;   // fed, not yet released
  std::string released_;
  bool stopped_ = false;
  bool drop_leading_space_ = false;  // until the first bytes are fed
};

}  // namespace gptvk
