// The GPT-2 tokenizer against two reference encoders (fixtures made by
// tools/make_tokenizer_fixtures.js with the npm gpt-3-encoder and OpenAI's encoder.py on
// Python `regex`): every id must be equal, and decoding must give back the exact bytes,
// also on seeded random Unicode and on bytes that are not UTF-8. Exact equality throughout:
// tokenization has no tolerance.
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

#include "tests/test_tokenizer_util.hpp"

using namespace gptvk;
using gptvk::test::gpt2_tokenizer;

namespace {

nlohmann::json load_json(const std::string& rel) {
  return nlohmann::json::parse(test::read_text_file(test::source_path(rel)));
}

// The long text, rebuilt exactly as tools/make_tokenizer_fixtures.js's longText() does.
std::string rebuild_long_text(const nlohmann::json& cases, uint32_t seed, size_t min_bytes) {
  static const char* kSeparators[] = {" ", " ", " ", " ", "  ", "\n", "\n\n", "\t", ", ", ". ", "   \n"};
  std::vector<std::string> pieces;
  for (const auto& c : cases) {
    std::string name = c["name"];
    if (name.starts_with("long_") || c["reference"] != "gpt-3-encoder and python-regex") continue;
    std::string text = c["text"];
    size_t start = 0;
    for (;;) {
      size_t sp = text.find(' ', start);
      std::string p = text.substr(start, sp == std::string::npos ? std::string::npos : sp - start);
      if (!p.empty()) pieces.push_back(p);
      if (sp == std::string::npos) break;
      start = sp + 1;
    }
  }
  uint32_t x = seed;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  };
  std::string out;
  while (out.size() < min_bytes) {
    // Two calls in this order, as in the JS expression pieces[next()] + separators[next()].
    const std::string& p = pieces[next() % pieces.size()];
    out += p;
    out += kSeparators[next() % std::size(kSeparators)];
  }
  return out;
}

std::string fnv1a64_hex(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::vector<uint8_t> base64_decode(const std::string& s) {
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = (c >= 'A' && c <= 'Z') ? c - 'A' : (c >= 'a' && c <= 'z') ? c - 'a' + 26
          : (c >= '0' && c <= '9') ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
    if (v < 0) continue;  // '=' padding
    acc = acc << 6 | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
    }
  }
  return out;
}

// Feeds ids one at a time; checks that no chunk ends inside a character when the whole
// text is valid UTF-8, and returns the concatenation of the chunks and the final flush.
std::string stream_decode(const Tokenizer& tok, const std::vector<uint32_t>& ids, bool text_is_valid) {
  StreamDecoder dec(tok);
  std::string all;
  for (uint32_t id : ids) {
    std::string chunk = dec.feed(id);
    if (text_is_valid) BOOST_TEST_REQUIRE(test::is_valid_utf8(chunk));
    all += chunk;
  }
  std::string rest = dec.flush();
  if (text_is_valid) BOOST_TEST(rest.empty());
  return all + rest;
}

}  // namespace

BOOST_AUTO_TEST_CASE(vocabulary_facts) {
  const Tokenizer& tok = gpt2_tokenizer();
  BOOST_TEST(tok.vocab_size() == 50257u);
  BOOST_REQUIRE(tok.eot_id().has_value());
  BOOST_TEST(*tok.eot_id() == 50256u);
  BOOST_TEST(tok.decode(std::vector<uint32_t>{50256}) == "<|endoftext|>");
}

// A document starts and ends at <|endoftext|> unless the model file names its own ids:
// its start id replaces it, its end ids join it (once each), a start id outside the
// vocabulary is left out.
BOOST_AUTO_TEST_CASE(document_ids_from_the_model_file) {
  Tokenizer tok = Tokenizer::load(GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/encoder.json",
                                  GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/vocab.bpe");
  BOOST_TEST((tok.start_id() == std::optional<uint32_t>(50256)));
  BOOST_TEST(std::vector<uint32_t>(tok.end_ids().begin(), tok.end_ids().end()) == std::vector<uint32_t>{50256},
             boost::test_tools::per_element());
  const std::vector<uint32_t> ends = {13, 50256, 198, 13};
  tok.set_document_ids(464, ends);
  BOOST_TEST((tok.start_id() == std::optional<uint32_t>(464)));
  BOOST_TEST(std::vector<uint32_t>(tok.end_ids().begin(), tok.end_ids().end()) == (std::vector<uint32_t>{50256, 13, 198}),
             boost::test_tools::per_element());
  BOOST_TEST(*tok.eot_id() == 50256u);  // --special still reads the text <|endoftext|> as 50256
  tok.set_document_ids(50257, {});  // outside the vocabulary: left out
  BOOST_TEST((tok.start_id() == std::optional<uint32_t>(464)));
}

// Added tokens are matched whole before the BPE, leftmost first and the longest there
// (transformers' rule), a special one only with allow_special; the text between them is
// encoded as it would be alone.
BOOST_AUTO_TEST_CASE(added_tokens_split_the_text_first) {
  const std::string dir = GPTVK_SOURCE_DIR "/models/gpt2-tokenizer/";
  const Tokenizer plain = Tokenizer::load(dir + "encoder.json", dir + "vocab.bpe");
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::vector<AddedToken> added = {{262, false}, {612, false}, {11, true}};  // " the", " there", ","
  const Tokenizer tok = Tokenizer::from_text("encoder.json", read(dir + "encoder.json"), "vocab.bpe",
                                             read(dir + "vocab.bpe"), added);
  auto ids = [](std::initializer_list<std::vector<uint32_t>> parts) {
    std::vector<uint32_t> all;
    for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  // " there" before " the" (longer first), then the rest; "," is special: text by default.
  BOOST_TEST(tok.encode(" theremin, the") == ids({{612}, plain.encode("min,"), {262}}), boost::test_tools::per_element());
  BOOST_TEST(tok.encode(" theremin, the<|endoftext|>", true) == ids({{612}, plain.encode("min"), {11, 262, 50256}}),
             boost::test_tools::per_element());
  BOOST_TEST(tok.decode(tok.encode(" theremin, the", true)) == " theremin, the");
  // " the" starts before "heres", which overlaps it: the leftmost wins, though shorter.
  const std::vector<AddedToken> overlapping = {{262, false}, {19079, false}};  // " the", "heres"
  const Tokenizer tok2 = Tokenizer::from_text("encoder.json", read(dir + "encoder.json"), "vocab.bpe",
                                              read(dir + "vocab.bpe"), overlapping);
  BOOST_TEST(tok2.encode(" theres") == ids({{262}, plain.encode("res")}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(fixture_cases_match_reference_ids) {
  const Tokenizer& tok = gpt2_tokenizer();
  auto fixture = load_json("tests/fixtures/tokenizer/cases.json");
  BOOST_TEST_REQUIRE(fixture["cases"].size() >= 30u);
  for (const auto& c : fixture["cases"]) {
    std::string name = c["name"], text = c["text"];
    std::vector<uint32_t> want = c["ids"];
    BOOST_TEST_CONTEXT("case " << name) {
      std::vector<uint32_t> got = tok.encode(text);
      BOOST_TEST(got == want, boost::test_tools::per_element());
      BOOST_TEST((tok.decode(got) == text));
      BOOST_TEST((stream_decode(tok, got, true) == text));
    }
  }
}

BOOST_AUTO_TEST_CASE(long_text_matches_reference_ids) {
  const Tokenizer& tok = gpt2_tokenizer();
  auto cases = load_json("tests/fixtures/tokenizer/cases.json")["cases"];
  auto fixture = load_json("tests/fixtures/tokenizer/long_text.json");
  std::string text = rebuild_long_text(cases, fixture["seed"], fixture["min_bytes"]);
  BOOST_TEST_REQUIRE(text.size() == fixture["bytes"].get<size_t>());
  BOOST_TEST_REQUIRE(fnv1a64_hex(text) == fixture["fnv1a64"].get<std::string>());
  BOOST_TEST(text.size() > 100u * 1024);

  std::vector<uint8_t> raw = base64_decode(fixture["ids_u16le_base64"]);
  std::vector<uint32_t> want(raw.size() / 2);
  for (size_t i = 0; i < want.size(); ++i) want[i] = raw[2 * i] | uint32_t(raw[2 * i + 1]) << 8;
  BOOST_TEST_REQUIRE(want.size() == fixture["n_ids"].get<size_t>());

  std::vector<uint32_t> got = tok.encode(text);
  BOOST_TEST_REQUIRE(got.size() == want.size());
  size_t first_diff = std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
  BOOST_TEST(first_diff == got.size(), "first different id at index " << first_diff);
  BOOST_TEST((tok.decode(got) == text));
  // Again, now that every piece is in the cache.
  BOOST_TEST((tok.encode(text) == want));
}

BOOST_AUTO_TEST_CASE(random_unicode_round_trips) {
  const Tokenizer& tok = gpt2_tokenizer();
  std::mt19937 rng(1234);
  std::string all;
  for (int i = 0; i < 3000; ++i) {
    std::string text = test::random_utf8(rng, 1 + rng() % 64);
    std::vector<uint32_t> ids = tok.encode(text);
    BOOST_TEST_REQUIRE((tok.decode(ids) == text), "round trip failed on random text #" << i);
    BOOST_TEST_REQUIRE((stream_decode(tok, ids, true) == text));
    all += text;
  }
  // One long text: pieces longer than the cache's limit take the uncached merge path.
  all += test::random_utf8(rng, 5000);
  BOOST_TEST((tok.decode(tok.encode(all)) == all));
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_encoded_byte_wise_and_round_trips) {
  const Tokenizer& tok = gpt2_tokenizer();
  // Bytes that are not UTF-8 become single-byte tokens; the valid text around them is
  // cut and merged as if they were not there.
  for (std::string bad : {std::string("\xff"), std::string("\xc3"), std::string("\xed\xa0\x80"),
                          std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80"), std::string("\x80")}) {
    std::vector<uint32_t> want = tok.encode("Hello world");
    const size_t first_bad = want.size();
    for (unsigned char b : bad) want.push_back(tok.encode(std::string(1, char(b)))[0]);
    for (uint32_t id : tok.encode(" again")) want.push_back(id);
    std::vector<uint32_t> got = tok.encode("Hello world" + bad + " again");
    BOOST_TEST(got == want, boost::test_tools::per_element());
    for (size_t k = 0; k < bad.size(); ++k)
      BOOST_TEST((tok.token_bytes(want[first_bad + k]) == std::string(1, bad[k])));
  }
  // Random bytes, and valid text with random bytes spliced in.
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    if (i % 2) {
      text = test::random_utf8(rng, 1 + rng() % 40);
      for (int k = rng() % 4; k >= 0; --k) text.insert(rng() % (text.size() + 1), 1, char(rng() % 256));
    } else {
      for (size_t k = 1 + rng() % 40; k > 0; --k) text += char(rng() % 256);
    }
    std::vector<uint32_t> ids = tok.encode(text);
    BOOST_TEST_REQUIRE((tok.decode(ids) == text), "round trip failed on random bytes #" << i);
    BOOST_TEST_REQUIRE((stream_decode(tok, ids, test::is_valid_utf8(text)) == text));
  }
}

// Every GPT-2 token's JSON text (logprobs' keys, tokens lists) is distinct from every other's,
// and whole UTF-8 tokens are their own text.
BOOST_AUTO_TEST_CASE(token_json_texts_are_distinct) {
  const Tokenizer& tok = gpt2_tokenizer();
  std::set<std::string> seen;
  size_t as_bytes = 0;
  for (uint32_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string bytes = tok.token_bytes(id), text = tokenizer::token_json_text(bytes);
    BOOST_TEST_REQUIRE(seen.insert(text).second, "token " << id << " shares the JSON text " << text);
    if (test::is_valid_utf8(bytes)) BOOST_TEST_REQUIRE(text == bytes);
    else as_bytes += text.starts_with("bytes:\\x");
  }
  BOOST_TEST(tokenizer::token_json_text("\xe6\x97") == "bytes:\\xe6\\x97");
  BOOST_TEST(as_bytes > 100u);  // the lone bytes 0x80-0xFF and GPT-2's partial characters
}

BOOST_AUTO_TEST_CASE(endoftext_is_text_by_default_and_special_on_request) {
  const Tokenizer& tok = gpt2_tokenizer();
  const uint32_t eot = *tok.eot_id();
  std::string text = "first<|endoftext|>second <|endoftext|><|endoftext|>";
  std::vector<uint32_t> plain = tok.encode(text);
  BOOST_TEST(std::count(plain.begin(), plain.end(), eot) == 0);
  BOOST_TEST((tok.decode(plain) == text));

  std::vector<uint32_t> want = tok.encode("first");
  want.push_back(eot);
  for (uint32_t id : tok.encode("second ")) want.push_back(id);
  want.push_back(eot);
  want.push_back(eot);
  std::vector<uint32_t> special = tok.encode(text, /*allow_special=*/true);
  BOOST_TEST(special == want, boost::test_tools::per_element());
  BOOST_TEST((tok.decode(special) == text));
  BOOST_TEST((tok.encode("no special here", true) == tok.encode("no special here")));
}

BOOST_AUTO_TEST_CASE(decode_rejects_ids_outside_the_vocabulary) {
  const Tokenizer& tok = gpt2_tokenizer();
  try {
    tok.decode(std::vector<uint32_t>{464, 50257});
    BOOST_FAIL("no error for id 50257");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("50257") != std::string::npos);
  }
  StreamDecoder dec(tok);
  BOOST_CHECK_THROW(dec.feed(1u << 30), InputError);
}

BOOST_AUTO_TEST_CASE(stream_decoder_holds_back_split_characters) {
  const Tokenizer& tok = gpt2_tokenizer();
  // The byte tokens of "€" (E2 82 AC) fed one at a time: nothing comes out until the
  // character is whole.
  std::vector<uint32_t> ids;
  for (unsigned char b : std::string("\xe2\x82\xac")) ids.push_back(tok.encode(std::string(1, char(b)))[0]);
  StreamDecoder dec(tok);
  BOOST_TEST(dec.feed(ids[0]).empty());
  BOOST_TEST(dec.feed(ids[1]).empty());
  BOOST_TEST(dec.feed(ids[2]) == "\xe2\x82\xac");
  // An unfinished character at the end comes out on flush.
  BOOST_TEST(dec.feed(ids[0]).empty());
  BOOST_TEST(dec.flush() == "\xe2");
  // Bytes that can never complete a character are not held: a lone continuation byte,
  // and E0 followed by 80 (an overlong form).
  BOOST_TEST(dec.feed(ids[1]) == "\x82");
  uint32_t e0 = tok.encode("\xe0")[0], b80 = tok.encode("\x80")[0];
  BOOST_TEST(dec.feed(e0).empty());
  BOOST_TEST(dec.feed(b80) == "\xe0\x80");
}

BOOST_AUTO_TEST_CASE(utf8_helpers_on_every_code_point) {
  using namespace gptvk::tokenizer;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    std::string s;
    append_utf8(s, cp);
    BOOST_TEST_REQUIRE(utf8_char_length(s, 0) == s.size());
    BOOST_TEST_REQUIRE(utf8_valid_until(s, 0) == s.size());
    BOOST_TEST_REQUIRE(utf8_incomplete_tail(s) == 0u);
    // Every proper prefix is an unfinished character: held back whole, not valid yet.
    for (size_t k = 1; k < s.size(); ++k) {
      std::string prefix = "x" + s.substr(0, k);
      BOOST_TEST_REQUIRE(utf8_incomplete_tail(prefix) == k);
      BOOST_TEST_REQUIRE(utf8_valid_until(prefix, 0) == 1u);
    }
  }
  // What strict UTF-8 rejects: surrogates, overlong forms, past U+10FFFF, stray or bad bytes.
  for (std::string bad : {"\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf",
                          "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\x80", "\xbf"}) {
    BOOST_TEST(utf8_char_length(bad, 0) == 0u);
    BOOST_TEST(utf8_valid_until("ok" + bad, 0) == 2u);
    // Nothing that cannot become valid is held back by the stream decoder.
    BOOST_TEST(utf8_incomplete_tail(bad.substr(0, 2)) == 0u);
  }
}
