// GPT-1's tokenizer (Hugging Face's "openai-gpt": lowercased, accents stripped, BERT's
// word split, BPE whose word-final symbols end in "</w>") against the ids that Hugging
// Face's own JavaScript tokenizers and a Python transcription of the Rust crate give, on
// a GPT-1-style vocabulary (tools/make_gpt1_tokenizer_fixtures.js): 25 chosen texts and
// 300 random ones. Also: its tokens decode with "</w>" as a space; a character outside a
// vocabulary without "<unk>" is an error naming it; its files' errors name file and line;
// and GPT-2's vocabularies are not taken for GPT-1's.
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "models/tokenizer/bert_words.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/test_tokenizer_util.hpp"

using namespace gptvk;

namespace {

const std::string kDir = test::source_path("tests/fixtures/tokenizer/gpt1/");

const Tokenizer& gpt1() {
  static Tokenizer tok = Tokenizer::load(kDir + "vocab.json", kDir + "merges.txt");
  return tok;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ids_match_the_references) {
  auto doc = nlohmann::json::parse(test::read_text_file(kDir + "cases.json"));
  BOOST_TEST_REQUIRE(doc["cases"].size() == 325u);
  size_t nonempty = 0, with_unk = 0;
  for (const auto& c : doc["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<uint32_t>>();
    BOOST_TEST((gpt1().encode(text) == want), "case " << c["name"].get<std::string>());
    nonempty += !want.empty();
    with_unk += std::find(want.begin(), want.end(), 399u) != want.end();
  }
  // The cases reach what they are for: most give ids, many meet characters outside the
  // vocabulary ("<unk>" is id 399).
  BOOST_TEST(nonempty >= 300u);
  BOOST_TEST(with_unk >= 100u);
}

BOOST_AUTO_TEST_CASE(words_are_normalized_and_split_as_bert_does) {
  using V = std::vector<std::string>;
  BOOST_TEST((tokenizer::bert_words("Hello, WORLD!") == V{"hello", ",", "world", "!"}));
  BOOST_TEST((tokenizer::bert_words("Caf\xC3\xA9 na\xC3\xAFve") == V{"cafe", "naive"}));  // accents go
  BOOST_TEST((tokenizer::bert_words("\xE6\xBC\xA2\xE5\xAD\x97ok") == V{"\xE6\xBC\xA2", "\xE5\xAD\x97", "ok"}));
  BOOST_TEST((tokenizer::bert_words("a\tb\xC2\xA0" "c\x01" "d\xE2\x80\x8B" "e") == V{"a", "b", "cde"}));
  BOOST_TEST((tokenizer::bert_words("x\xFFy \xC3") == V{"xy"}));  // invalid bytes dropped
  BOOST_TEST((tokenizer::bert_words("$5+3=8") == V{"$", "5", "+", "3", "=", "8"}));
  BOOST_TEST((tokenizer::bert_words("\xCE\xA3") == V{"\xCF\x83"}));  // Σ -> σ, never final ς
  BOOST_TEST(tokenizer::bert_words(" \n\r\t ").empty());
  // Text past 64 KiB is taken in pieces cut at whitespace: the same words.
  std::string many;
  V want;
  for (int i = 0; i < 30000; ++i) {
    if (i % 7) {
      many += "Ab, ";
      want.insert(want.end(), {"ab", ","});
    } else {
      many += "Caf\xC3\xA9\n";
      want.push_back("cafe");
    }
  }
  BOOST_TEST_REQUIRE(many.size() > 100000u);
  BOOST_TEST((tokenizer::bert_words(many) == want));
  const std::string long_word(100000, 'A');
  BOOST_TEST((tokenizer::bert_words(long_word + " b") == V{std::string(100000, 'a'), "b"}));
}

BOOST_AUTO_TEST_CASE(tokens_decode_with_word_ends_as_spaces) {
  const Tokenizer& tok = gpt1();
  auto ids = tok.encode("The truth, it is.");
  BOOST_TEST(tok.decode(ids) == "the truth , it is . ");
  BOOST_TEST(tok.vocab_size() == 400u);
  BOOST_TEST(!tok.eot_id().has_value());  // GPT-1 has no end-of-text token
  BOOST_TEST(tok.token_bytes(399) == "<unk>");
  // "<unk>" in the text is text, as "<|endoftext|>" is for GPT-2 (allowed or not).
  BOOST_TEST((tok.encode("<unk>", true) == tok.encode("<unk>")));
  BOOST_TEST(tok.encode("<unk>").size() > 1u);
  StreamDecoder stream(tok);
  std::string streamed;
  for (uint32_t id : ids) streamed += stream.feed(id);
  BOOST_TEST(streamed + stream.flush() == tok.decode(ids));
}

// Stop strings are matched in the text GPT-1 generates, which is normalized: they are
// normalized the same way, or "The End" could never stop a run.
BOOST_AUTO_TEST_CASE(stop_strings_are_normalized_as_the_text_is) {
  BOOST_TEST(gpt1().stop_text("The End!") == "the end !");
  BOOST_TEST(gpt1().stop_text("\nUser:") == "user :");
  BOOST_TEST(gpt1().stop_text(" \n").empty());  // no words: GPT-1 never writes a newline
  BOOST_TEST(test::gpt2_tokenizer().stop_text("\nUser:") == "\nUser:");
}

BOOST_AUTO_TEST_CASE(a_vocabulary_without_unk_names_the_character) {
  test::TempDir dir;
  const std::string v = dir.write("vocab.json", R"({"a": 0, "b": 1, "a</w>": 2, "b</w>": 3, "ab</w>": 4})");
  const std::string m = dir.write("merges.txt", "#version: 0.2\na b</w>\n");
  Tokenizer tok = Tokenizer::load(v, m);
  BOOST_TEST((tok.encode("AB a") == std::vector<uint32_t>{4, 2}));
  try {
    tok.encode("abc");
    BOOST_FAIL("no error");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "character U+0063 ('c') is not in the vocabulary " + v + ", which has no <unk> token to stand for it");
  }
}

BOOST_AUTO_TEST_CASE(malformed_files_are_errors_naming_file_and_line) {
  test::TempDir dir;
  const std::string v = dir.write("vocab.json", "{\"a\": 0, \"b</w>\": 1,\n \"ab</w>\": 2, \"\xC3\xA9\": 3}");
  const std::string good = dir.write("good.txt", "#version: 0.2\na b</w>\n");
  BOOST_TEST(test::tokenizer_load_error(v, good) == "");
  // GPT-2's byte-alphabet rule does not apply: "é" is a character, not byte 0xE9.
  BOOST_TEST(Tokenizer::load(v, good).token_bytes(3) == "\xC3\xA9");
  std::string m = dir.write("unknown.txt", "#version: 0.2\na b</w>\nb a\n");
  BOOST_TEST(test::tokenizer_load_error(v, m).starts_with(m + ":3:1: the left half is not a token of the vocabulary"));
  m = dir.write("bad_utf8.txt", "#version: 0.2\na\xff b\n");
  BOOST_TEST(test::tokenizer_load_error(v, m).starts_with(m + ":2:2: invalid UTF-8"));
  const std::string gap = dir.write("gap.json", "{\"a</w>\": 0, \"b\": 2}");
  BOOST_TEST(test::tokenizer_load_error(gap, good).starts_with(gap + ": no token has id 1"));
}

// A byte-level vocabulary that also has a token ending in "</w>" stays GPT-2's.
BOOST_AUTO_TEST_CASE(gpt2_vocabularies_stay_byte_level) {
  test::TempDir dir;
  const std::string gpt2 = test::source_path("models/gpt2-tokenizer/");
  nlohmann::ordered_json j = nlohmann::json::parse(test::read_text_file(gpt2 + "encoder.json"));
  BOOST_TEST_REQUIRE(j.contains("</"));
  j["</w>"] = j.size();
  const std::string v = dir.write("vocab.json", j.dump());
  const std::string m = dir.write("merges.txt", test::read_text_file(gpt2 + "vocab.bpe"));
  Tokenizer tok = Tokenizer::load(v, m);
  BOOST_TEST((tok.encode("Hello world") == std::vector<uint32_t>{15496, 995}));
  BOOST_TEST(tok.eot_id().has_value());
}
