// runtime/text_stream: stop strings found wherever they fall in the token stream (across
// tokens, inside multi-byte characters), nothing after them released, and the pieces
// released before a stop never include a character's partial bytes or a prefix that later
// turns into the stop string; and the character offsets the server's text_offset gives for
// text with invalid or cut UTF-8. No device needed.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/tokenizer/utf8.hpp"
#include "runtime/text_stream.hpp"

using gptvk::TextStream;

namespace {

struct Run {
  std::vector<std::string> pieces;  // what each feed() returned
  std::string text;                 // everything released, flush included
  bool stopped = false;
};

Run run(const std::vector<std::string>& tokens, const std::vector<std::string>& stops,
        bool drop_leading_space = false) {
  TextStream s(stops, drop_leading_space);
  Run r;
  for (const auto& t : tokens) {
    r.pieces.push_back(s.feed(t));
    r.text += r.pieces.back();
  }
  r.text += s.flush();
  r.stopped = s.stopped();
  BOOST_TEST(r.text == s.released());
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_stop_strings_pass_everything_through) {
  Run r = run({"Hello", ",", " world"}, {});
  BOOST_TEST(r.text == "Hello, world");
  BOOST_TEST(r.pieces[0] == "Hello");  // nothing held without stop strings
  BOOST_TEST(!r.stopped);
}

BOOST_AUTO_TEST_CASE(stop_inside_one_token) {
  Run r = run({"Hello", " wor", "ld and", " more"}, {"and"});
  BOOST_TEST(r.text == "Hello world ");
  BOOST_TEST(r.stopped);
  BOOST_TEST(r.pieces[3].empty());  // nothing after the stop
}

BOOST_AUTO_TEST_CASE(stop_spanning_tokens_is_never_partly_released) {
  // "\n\n" split over two tokens: the first newline is held until the second decides.
  Run r = run({"line", "\n", "\n", "next"}, {"\n\n"});
  BOOST_TEST(r.text == "line");
  BOOST_TEST(r.pieces[1].empty());
  BOOST_TEST(r.stopped);
}

BOOST_AUTO_TEST_CASE(held_prefix_is_released_when_it_turns_out_not_to_be_a_stop) {
  Run r = run({"a", "\n", "b"}, {"\n\n"});
  BOOST_TEST(r.pieces[1].empty());
  BOOST_TEST(r.pieces[2] == "\nb");
  BOOST_TEST(r.text == "a\nb");
  BOOST_TEST(!r.stopped);
}

BOOST_AUTO_TEST_CASE(stop_inside_a_multibyte_character) {
  // "é" = C3 A9 split over two tokens; the stop is the character itself.
  Run r = run({"caf", "\xC3", "\xA9", "!"}, {"\xC3\xA9"});
  BOOST_TEST(r.text == "caf");
  BOOST_TEST(r.stopped);
  // A stop that ends inside a character: "f" + the first byte of "é".
  Run r2 = run({"caf", "\xC3", "\xA9"}, {"f\xC3"});
  BOOST_TEST(r2.text == "ca");
  BOOST_TEST(r2.stopped);
}

BOOST_AUTO_TEST_CASE(partial_characters_are_held_without_stop_strings_too) {
  // "€" = E2 82 AC over three tokens: released whole, once.
  Run r = run({"x", "\xE2", "\x82", "\xAC"}, {"zz"});
  BOOST_TEST(r.pieces[1].empty());
  BOOST_TEST(r.pieces[2].empty());
  BOOST_TEST(r.pieces[3] == "\xE2\x82\xAC");
  BOOST_TEST(r.text == "x\xE2\x82\xAC");
}

BOOST_AUTO_TEST_CASE(first_of_several_stops_wins) {
  Run r = run({"one two three"}, {"three", "two"});
  BOOST_TEST(r.text == "one ");
}

BOOST_AUTO_TEST_CASE(unfinished_character_is_flushed_at_the_end) {
  Run r = run({"ok", "\xE2\x82"}, {});
  BOOST_TEST(r.text == "ok\xE2\x82");
}

// A chat reply: the space after "Assistant:" is not the reply's, so a stop string cannot
// match it (" she" stopped the reply "she had ..." at once, empty), while one later in the
// text still does. Only the first space of the first bytes fed goes.
BOOST_AUTO_TEST_CASE(a_dropped_leading_space_is_out_of_the_text_and_the_stops) {
  Run r = run({" she", " had", " she", " said"}, {" she"}, true);
  BOOST_TEST(r.text == "she had");
  BOOST_TEST(r.stopped);
  Run twice = run({"", "  two", " spaces"}, {}, true);
  BOOST_TEST(twice.text == " two spaces");
  BOOST_TEST(run({"no", " space"}, {}, true).text == "no space");
  BOOST_TEST(run({" kept"}, {}, false).text == " kept");
}

// Characters of valid UTF-8 text: the bytes that do not continue one.
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// utf8_char_offsets against what a JSON reader sees of nlohmann's dump with invalid bytes
// replaced (what the server sends): at every ASCII byte, which begins a character however
// the bytes before it decode, the offset is the number of characters of the prefix's dump.
// Random bytes drawn mostly from lead and continuation bytes, so invalid and cut
// sequences of every length turn up.
BOOST_AUTO_TEST_CASE(char_offsets_count_what_a_json_reader_sees) {
  using gptvk::tokenizer::utf8_char_offsets;
  const unsigned char kBytes[] = {'a', ' ', 0x80, 0x9C, 0xBF, 0xA0, 0xC3, 0xC0, 0xE2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF};
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    for (int i = std::uniform_int_distribution<int>(0, 12)(rng); i > 0; --i)
      s += static_cast<char>(kBytes[std::uniform_int_distribution<size_t>(0, std::size(kBytes) - 1)(rng)]);
    s += 'a';
    std::vector<size_t> ends;
    for (size_t e = 0; e < s.size(); ++e)
      if (static_cast<unsigned char>(s[e]) < 0x80) ends.push_back(e);
    const std::vector<size_t> got = utf8_char_offsets(s, ends);
    for (size_t i = 0; i < ends.size(); ++i) {
      const nlohmann::json prefix = s.substr(0, ends[i]);
      const std::string seen = nlohmann::json::parse(prefix.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      BOOST_TEST(got[i] == code_points(seen), "bytes of round " << round << " up to " << ends[i]);
    }
  }
  // An offset inside a character counts only the characters before it.
  const std::string quote = "a\xE2\x80\x9C" "b";
  BOOST_TEST(utf8_char_offsets(quote, std::vector<size_t>{0, 1, 2, 3, 4, 5}) == std::vector<size_t>({0, 1, 1, 1, 2, 3}));
}
