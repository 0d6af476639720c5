// The tokenizer's file readers and merge rule: Hugging Face's spelling of the GPT-2 files
// gives the same tokenizer as OpenAI's; malformed files are errors naming file, line and
// column; and on made-up vocabularies with random merge lists the merging agrees exactly
// with a plain transcription of encoder.py's bpe() (the O(n^2) loop over string symbols).
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

#include "models/tokenizer/added_tokens.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/test_tokenizer_util.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

// Bytes -> the vocab files' spelling.
std::string spell(const std::string& bytes) { return tokenizer::byte_alphabet_spelling(bytes); }

// A vocabulary of the 256 bytes (ids 0..255 in byte order) plus `extra` tokens.
std::string vocab_json(const std::vector<std::string>& extra) {
  nlohmann::ordered_json j;
  for (int b = 0; b < 256; ++b) j[spell(std::string(1, char(b)))] = b;
  for (size_t i = 0; i < extra.size(); ++i) j[spell(extra[i])] = 256 + i;
  return j.dump();
}

std::string merges_txt(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::string out = "#version: 0.2\n";
  for (auto& [l, r] : merges) out += spell(l) + " " + spell(r) + "\n";
  return out;
}

// encoder.py's bpe(), transcribed: symbols are strings; repeatedly the lowest-ranked
// adjacent pair is merged everywhere, left to right.
std::vector<std::string> naive_bpe(const std::string& piece, const std::map<std::pair<std::string, std::string>, size_t>& ranks) {
  std::vector<std::string> word;
  for (char c : piece) word.emplace_back(1, c);
  while (word.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<std::string, std::string> bigram;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        bigram = it->first;
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == bigram.first && word[i + 1] == bigram.second) {
        merged.push_back(bigram.first + bigram.second);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = std::move(merged);
  }
  return word;
}


}  // namespace

BOOST_AUTO_TEST_CASE(hugging_face_files_give_the_same_tokenizer) {
  TempDir dir;
  // vocab.json: compact, characters as raw UTF-8 rather than \u escapes; merges.txt:
  // the tokenizers library's header line, CRLF line ends, no final newline.
  auto encoder = nlohmann::ordered_json::parse(test::read_text_file(test::source_path("models/gpt2-tokenizer/encoder.json")));
  std::string bpe = test::read_text_file(test::source_path("models/gpt2-tokenizer/vocab.bpe"));
  std::string merges = "#version: 0.2 - Trained by huggingface/tokenizers\r\n";
  for (size_t start = bpe.find('\n') + 1; start < bpe.size();) {
    size_t end = bpe.find('\n', start);
    merges += bpe.substr(start, end - start);
    start = end + 1;
    if (start < bpe.size()) merges += "\r\n";
  }
  Tokenizer hf = Tokenizer::load(dir.write("vocab.json", encoder.dump()), dir.write("merges.txt", merges));
  const Tokenizer& openai = test::gpt2_tokenizer();
  BOOST_TEST(hf.vocab_size() == openai.vocab_size());
  BOOST_TEST((hf.eot_id() == openai.eot_id()));
  auto cases = nlohmann::json::parse(test::read_text_file(test::source_path("tests/fixtures/tokenizer/cases.json")));
  for (const auto& c : cases["cases"]) {
    std::string text = c["text"];
    BOOST_TEST((hf.encode(text) == openai.encode(text)), "case " << c["name"]);
  }
  for (uint32_t id = 0; id < openai.vocab_size(); ++id) BOOST_TEST_REQUIRE((hf.token_bytes(id) == openai.token_bytes(id)));
}

BOOST_AUTO_TEST_CASE(merging_matches_encoder_py_on_random_merge_lists) {
  TempDir dir;
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    // Merge lists made like BPE training makes them (each merge after those of its
    // halves), and in rounds 3-5 shuffled, which encoder.py's rule still defines.
    std::vector<std::string> tokens = {"a", "b", "c", "d"};
    std::set<std::string> known(tokens.begin(), tokens.end());
    std::vector<std::string> extra;
    std::vector<std::pair<std::string, std::string>> merges;
    std::set<std::pair<std::string, std::string>> listed;
    while (merges.size() < 120) {
      std::string l = tokens[rng() % tokens.size()];
      std::string r = tokens[rng() % tokens.size()];
      if (l.size() + r.size() > 8 || !listed.insert({l, r}).second) continue;
      merges.push_back({l, r});
      if (known.insert(l + r).second) {
        tokens.push_back(l + r);
        extra.push_back(l + r);
      }
    }
    if (round >= 3) std::shuffle(merges.begin(), merges.end(), rng);
    std::map<std::pair<std::string, std::string>, size_t> ranks;
    for (size_t i = 0; i < merges.size(); ++i) ranks[merges[i]] = i;

    Tokenizer tok = Tokenizer::load(dir.write("v.json", vocab_json(extra)), dir.write("m.txt", merges_txt(merges)));
    for (int i = 0; i < 400; ++i) {
      // One \p{L}+ piece; long ones take the uncached path.
      std::string word;
      for (size_t n = 1 + rng() % (i % 10 == 0 ? 600 : 24); n > 0; --n) word += char('a' + rng() % 4);
      std::vector<uint32_t> want;
      for (const std::string& s : naive_bpe(word, ranks)) {
        auto it = std::find(extra.begin(), extra.end(), s);
        want.push_back(s.size() == 1 ? uint32_t(uint8_t(s[0])) : uint32_t(256 + (it - extra.begin())));
      }
      BOOST_TEST_REQUIRE(tok.encode(word) == want, boost::test_tools::per_element());
      // Twice: the second answer comes from the cache.
      BOOST_TEST_REQUIRE(tok.encode(word) == want, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(malformed_files_are_errors_naming_file_and_line) {
  TempDir dir;
  const std::string good_vocab = dir.write("good.json", vocab_json({"ab"}));
  const std::string good_merges = dir.write("good.txt", merges_txt({{"a", "b"}}));
  BOOST_TEST(test::tokenizer_load_error(good_vocab, good_merges) == "");

  auto starts_with = [](const std::string& msg, const std::string& prefix) {
    BOOST_TEST_CONTEXT("message: " << msg) { BOOST_TEST(msg.starts_with(prefix)); }
  };
  auto contains = [](const std::string& msg, const std::string& part) {
    BOOST_TEST_CONTEXT("message: " << msg) { BOOST_TEST(msg.find(part) != std::string::npos); }
  };
  // Vocabulary problems.
  std::string body = vocab_json({"ab"});
  body.pop_back();  // drop the closing brace
  std::string v = dir.write("syntax.json", body + ",\n\"x\" 300}");
  starts_with(test::tokenizer_load_error(v, good_merges), v + ":2:5: expected ':'");
  v = dir.write("truncated.json", body);
  contains(test::tokenizer_load_error(v, good_merges), "the file ends");
  v = dir.write("space.json", body + ",\n  \"a b\": 300}");
  std::string msg = test::tokenizer_load_error(v, good_merges);
  starts_with(msg, v + ":2:5:");  // the column of the space itself
  contains(msg, "U+0020 is not in GPT-2's byte alphabet");
  v = dir.write("dup_id.json", body + ",\n\"xyz\": 7}");
  starts_with(test::tokenizer_load_error(v, good_merges), v + ":2:8: id 7 given to two tokens, \"\\u0007\" and \"xyz\"");
  v = dir.write("dup_token.json", body + ",\n\"ab\": 300}");
  starts_with(test::tokenizer_load_error(v, good_merges), v + ":2:1: token \"ab\" listed twice");
  v = dir.write("gap.json", body + ",\n\"xyz\": 400}");
  starts_with(test::tokenizer_load_error(v, good_merges), v + ": no token has id 257");
  v = dir.write("negative.json", body + ",\n\"xyz\": -1}");
  starts_with(test::tokenizer_load_error(v, good_merges), v + ":2:8: expected a non-negative integer id");
  nlohmann::ordered_json no_byte;
  for (int b = 1; b < 256; ++b) no_byte[spell(std::string(1, char(b)))] = b - 1;
  v = dir.write("no_byte.json", no_byte.dump());
  starts_with(test::tokenizer_load_error(v, good_merges), v + ": no token for the single byte 0x00");

  // Merge problems.
  std::string m = dir.write("three.txt", "#version: 0.2\na b\nb a c\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":3:5: a merge line must be two tokens");
  m = dir.write("one.txt", "#version: 0.2\nab\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":2:1: a merge line must be two tokens");
  m = dir.write("unknown.txt", "#version: 0.2\na b\nab abc\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":3:4: the right half is not a token of the vocabulary");
  m = dir.write("no_result.txt", "#version: 0.2\na b\nb a\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":3:1: the merged token is not a token of the vocabulary");
  m = dir.write("twice.txt", "#version: 0.2\na b\n\na b\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":4:1: merge already listed on line 2");
  m = dir.write("alphabet.txt", "#version: 0.2\na\xe2\x82\xac b\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":2:2: character U+20AC is not in GPT-2's byte alphabet");
  m = dir.write("bad_utf8.txt", "#version: 0.2\na\xff b\n");
  starts_with(test::tokenizer_load_error(good_vocab, m), m + ":2:2: invalid UTF-8");

  // Files that cannot be read.
  std::string missing = (dir.path / "missing.json").string();
  starts_with(test::tokenizer_load_error(missing, good_merges), "cannot read " + missing);
  starts_with(test::tokenizer_load_error(good_vocab, missing), "cannot read " + missing);
}
