// `gpt-vk tokenize` and `gpt-vk detokenize` as a user runs them (CONTRACT): ids on one
// line separated by single spaces, text back byte-exact without an added newline, and
// errors as one line on stderr with exit code 1 (bad input) or 2 (bad usage).
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fcntl.h>
#include <filesystem>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/temp_dir.hpp"
#include "tests/test_tokenizer_util.hpp"

extern char** environ;

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

struct Result {
  int code = -1;
  std::string out, err;
};

// Runs gpt-vk with these arguments (no shell, so any bytes pass unchanged), stdin from
// `stdin_path` when one is given.
Result run(const TempDir& dir, std::vector<std::string> args, const std::string& stdin_path = "") {
  args.insert(args.begin(), GPTVK_BINARY);
  std::string out = (dir.path / "stdout").string(), err = (dir.path / "stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!stdin_path.empty()) posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  Result r;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = test::read_text_file(out);
  r.err = test::read_text_file(err);
  return r;
}

std::string config_toml(const std::string& vocab, const std::string& merges, bool with_tokenizer = true) {
  std::string toml =
      "[model]\nname = \"tokenizer-test\"\nvocab_size = 50257\ncontext_length = 1024\nemb_dim = 64\n"
      "n_heads = 4\nn_layers = 1\n\n[weights]\nfile = \"absent.safetensors\"\nlayout = \"hf-gpt2\"\n"
      "dtype = \"f32\"\n";
  if (with_tokenizer) toml += "\n[tokenizer]\nvocab = \"" + vocab + "\"\nmerges = \"" + merges + "\"\n";
  return toml;
}

std::string join(const std::vector<uint32_t>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

// One line on stderr, starting with "gpt-vk: ".
bool one_error_line(const std::string& err) {
  return err.starts_with("gpt-vk: ") && err.size() > 9 && err.find('\n') == err.size() - 1;
}

struct Fixture {
  TempDir dir;
  std::string config = dir.write("gpt2.toml", config_toml(test::source_path("models/gpt2-tokenizer/encoder.json"),
                                                          test::source_path("models/gpt2-tokenizer/vocab.bpe")));
  const Tokenizer& tok = test::gpt2_tokenizer();
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(tokenizer_cli, Fixture)

BOOST_AUTO_TEST_CASE(tokenize_prints_ids_on_one_line) {
  auto cases = nlohmann::json::parse(test::read_text_file(test::source_path("tests/fixtures/tokenizer/cases.json")));
  for (const auto& c : cases["cases"]) {
    std::string text = c["text"];
    if (text.find('\0') != std::string::npos) continue;  // argv cannot carry NUL; --file can
    std::vector<uint32_t> ids = c["ids"];
    Result r = run(dir, {"tokenize", "--config", config, "--text", text});
    BOOST_TEST_CONTEXT("case " << c["name"] << ", stderr: " << r.err) {
      BOOST_TEST(r.code == 0);
      BOOST_TEST(r.out == join(ids, " ") + "\n");
      BOOST_TEST(r.err.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(file_round_trips_byte_exact_through_detokenize) {
  // Text with NUL, CR LF, invalid UTF-8, no final newline; and a longer random text whose
  // ids still fit one argument (Linux limits one argv string to 128 KiB).
  static const char raw[] = "line one\r\nNUL\0here \xff\xfe bad \xe2\x82 cut\n\n  end";
  std::string text(raw, sizeof raw - 1);  // the NUL inside is part of the text
  std::mt19937 rng(5);
  std::string long_text = test::random_utf8(rng, 4000);
  for (const std::string& t : {text, long_text}) {
    std::string file = dir.write("input.bin", t);
    Result enc = run(dir, {"tokenize", "--config", config, "--file", file});
    BOOST_TEST_REQUIRE(enc.code == 0, enc.err);
    BOOST_TEST((enc.out == join(tok.encode(t), " ") + "\n"));
    // The space-separated output is accepted by --ids as is; commas are the usual form.
    std::string ids = enc.out.substr(0, enc.out.size() - 1);
    Result dec = run(dir, {"detokenize", "--config", config, "--ids", ids});
    BOOST_TEST_REQUIRE(dec.code == 0, dec.err);
    BOOST_TEST((dec.out == t));
    std::replace(ids.begin(), ids.end(), ' ', ',');
    dec = run(dir, {"detokenize", "--config", config, "--ids", ids});
    BOOST_TEST((dec.out == t));
  }
}

// `--ids -` reads tokenize's output from stdin, where no argument limit applies: a text of
// some 100,000 ids (over 128 KiB, more than one argument may hold) round-trips.
BOOST_AUTO_TEST_CASE(detokenize_reads_ids_from_stdin) {
  std::mt19937 rng(7);
  const std::string text = test::random_utf8(rng, 60000);
  Result enc = run(dir, {"tokenize", "--config", config, "--file", dir.write("long.txt", text)});
  BOOST_TEST_REQUIRE(enc.code == 0, enc.err);
  BOOST_TEST(enc.out.size() > (128u << 10));
  Result dec = run(dir, {"detokenize", "--config", config, "--ids", "-"}, dir.write("ids.txt", enc.out));
  BOOST_TEST_REQUIRE(dec.code == 0, dec.err);
  BOOST_TEST((dec.out == text));
  dec = run(dir, {"detokenize", "--config", config, "--ids", "-"}, dir.write("bad.txt", "464 x\n"));
  BOOST_TEST(dec.code == 1);
  BOOST_TEST(dec.err == "gpt-vk: stdin: 'x' is not a token id\n");
  // One endless bad item is quoted by its start, not echoed whole.
  dec = run(dir, {"detokenize", "--config", config, "--ids", "-"}, dir.write("endless.txt", std::string(1 << 20, '7')));
  BOOST_TEST(dec.code == 1);
  BOOST_TEST(dec.err == "gpt-vk: stdin: '" + std::string(64, '7') + "... (1048576 bytes)' is not a token id\n");
}

BOOST_AUTO_TEST_CASE(detokenize_prints_text_without_newline) {
  Result r = run(dir, {"detokenize", "--config", config, "--ids", "464,2068"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out == tok.decode(std::vector<uint32_t>{464, 2068}));
  BOOST_TEST(r.out == "The quick");
  r = run(dir, {"detokenize", "--config", config, "--ids", "50256"});
  BOOST_TEST(r.out == "<|endoftext|>");
}

BOOST_AUTO_TEST_CASE(special_flag_makes_endoftext_the_special_token) {
  std::string text = "one<|endoftext|>two";
  Result plain = run(dir, {"tokenize", "--config", config, "--text", text});
  Result special = run(dir, {"tokenize", "--config", config, "--text", text, "--special"});
  BOOST_TEST(plain.out == join(tok.encode(text), " ") + "\n");
  BOOST_TEST(special.out == join(tok.encode(text, true), " ") + "\n");
  BOOST_TEST(plain.out.find("50256") == std::string::npos);
  BOOST_TEST(special.out.find(" 50256 ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_input_exits_1_with_one_line) {
  std::string bad_vocab = dir.write("bad_vocab.json", "{\"a\": 0,\n\"b\" 1}");
  std::string bad_config = dir.write("bad.toml", config_toml(bad_vocab, test::source_path("models/gpt2-tokenizer/vocab.bpe")));
  std::string no_tok_config = dir.write("no_tok.toml", config_toml("", "", false));
  struct Case {
    std::vector<std::string> args;
    std::string mentions;
  };
  std::vector<Case> cases = {
      {{"detokenize", "--config", config, "--ids", "464,50257"}, "50257"},
      {{"detokenize", "--config", config, "--ids", "464,abc"}, "abc"},
      {{"detokenize", "--config", config, "--ids", "-1"}, "-1"},
      {{"tokenize", "--config", config, "--file", (dir.path / "missing.txt").string()}, "missing.txt"},
      {{"tokenize", "--config", config, "--file", dir.path.string()}, "a directory, not a regular file"},
      {{"tokenize", "--config", bad_config, "--text", "x"}, bad_vocab + ":2:5:"},
      {{"tokenize", "--config", no_tok_config, "--text", "x"}, "[tokenizer]"},
      {{"detokenize", "--config", (dir.path / "missing.toml").string(), "--ids", "1"}, "missing.toml"},
  };
  for (const auto& c : cases) {
    Result r = run(dir, c.args);
    BOOST_TEST_CONTEXT(c.args[0] << " " << c.args.back() << ": stderr " << r.err) {
      BOOST_TEST(r.code == 1);
      BOOST_TEST(r.out.empty());
      BOOST_TEST(one_error_line(r.err));
      BOOST_TEST(r.err.find(c.mentions) != std::string::npos);
    }
  }
}

// (Without --config, tokenize and detokenize use the bundled model's tokenizer:
// tests/test_cli_small_errors.cpp.)
BOOST_AUTO_TEST_CASE(bad_usage_exits_2_with_one_line) {
  std::vector<std::vector<std::string>> cases = {
      {"tokenize", "--config", config},
      {"tokenize", "--config", config, "--text", "a", "--file", "b"},
      {"tokenize", "--config", config, "--text", "a", "--bogus"},
      {"detokenize", "--config", config},
      // GPT-1's vocabulary has no <|endoftext|> for --special to read: refused, not ignored.
      {"tokenize", "--model", test::source_path("tests/fixtures/formats/gpt1_snapshot"), "--text", "a", "--special"},
  };
  for (const auto& args : cases) {
    Result r = run(dir, args);
    BOOST_TEST_CONTEXT(args.size() << " args ending " << args.back() << ": stderr " << r.err) {
      BOOST_TEST(r.code == 2);
      BOOST_TEST(r.out.empty());
      BOOST_TEST(one_error_line(r.err));
    }
  }
}

BOOST_AUTO_TEST_CASE(help_says_how_invalid_utf8_is_handled) {
  Result r = run(dir, {"tokenize", "--help"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find("not valid UTF-8 is encoded losslessly") != std::string::npos);
  BOOST_TEST(r.out.find("--special") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
