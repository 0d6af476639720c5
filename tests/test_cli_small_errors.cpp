// Smaller command-line rules for the generation commands, each checked by exit code and
// message: tokenize/detokenize on the bundled tokenizer without --config, tokenize
// --pieces, device flags refused where no device is used, bench --gen-tokens 0 (nan) and
// bench --json, forward --out -, and a prompt past the context exiting 1 in both generate
// (one of several --prompt flags, or a JSON-lines file's prompt or max_tokens) and bench;
// an unreadable stdin, and serve's empty --api-key.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/config.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/temp_dir.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

const std::string kConfig = (fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml").string();

void expect(const test::CliResult& r, int code, const std::string& message) {
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST(r.exit_code == code);
  BOOST_TEST(r.err.find("gpt-vk: " + message) == 0u, "stderr: " << r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, "stderr: " << r.err);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tokenize_and_detokenize_default_to_the_bundled_tokenizer) {
  const std::string text = "Hello world, caf\xC3\xA9!";
  auto bundled = test::run_cli({"tokenize", "--text", text});
  auto named = test::run_cli({"tokenize", "--config", kConfig, "--text", text});
  BOOST_TEST(bundled.exit_code == 0);
  BOOST_TEST(bundled.out == named.out);
  BOOST_TEST(bundled.out == "15496 995 11 40304 0\n");
  auto back = test::run_cli({"detokenize", "--ids", "15496,995,11,40304,0"});
  BOOST_TEST(back.exit_code == 0);
  BOOST_TEST(back.out == text);
}

// --pieces: one line per token, id TAB its text as a JSON string, the ids those of the plain output.
BOOST_AUTO_TEST_CASE(tokenize_pieces_show_each_tokens_text) {
  const std::string text = "Hello world\n\tok";
  auto plain = test::run_cli({"tokenize", "--text", text});
  auto pieces = test::run_cli({"tokenize", "--text", text, "--pieces"});
  BOOST_TEST(pieces.exit_code == 0);
  ModelConfig cfg = load_config(kConfig);
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  std::istringstream lines(pieces.out), ids(plain.out);
  std::string line, joined;
  size_t n = 0;
  while (std::getline(lines, line)) {
    auto tab = line.find('\t');
    BOOST_REQUIRE(tab != std::string::npos);
    uint32_t id = 0;
    BOOST_REQUIRE(ids >> id);
    BOOST_TEST(std::stoul(line.substr(0, tab)) == id);
    BOOST_TEST(nlohmann::json::parse(line.substr(tab + 1)).get<std::string>() == tok.token_bytes(id));
    joined += tok.token_bytes(id);
    ++n;
  }
  BOOST_TEST(n == tok.encode(text).size());
  BOOST_TEST(joined == text);
}

// The contract: every command takes --device N. tokenize and detokenize use no device, so
// the flags leave their output as it is.
BOOST_AUTO_TEST_CASE(commands_without_a_device_take_device_flags_and_ignore_them) {
  const test::CliResult plain = test::run_cli({"tokenize", "--text", "hi"});
  const test::CliResult with = test::run_cli({"tokenize", "--text", "hi", "--device", "9", "--validation"});
  BOOST_TEST(plain.exit_code == 0);
  BOOST_TEST(with.exit_code == 0);
  BOOST_TEST(with.out == plain.out);
  BOOST_TEST(with.out == "5303\n");
  const test::CliResult text = test::run_cli({"detokenize", "--ids", "5303", "--device", "0", "--validation"});
  BOOST_TEST(text.exit_code == 0);
  BOOST_TEST(text.out == "hi");
  BOOST_TEST(test::run_cli({"tokenize", "--text", "hi", "--device", "-1"}).exit_code == 2);  // still an index
}

// --gen-tokens 0 measures prefill only: the decode rate is nan, not 0 tok/s.
BOOST_AUTO_TEST_CASE(bench_without_decode_says_so) {
  auto r = test::run_cli({"bench", "--config", kConfig, "--prompt-tokens", "8", "--gen-tokens", "0", "--repeats", "1"},
                         {}, 120.0);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find("decode: not measured (--gen-tokens 0)") != std::string::npos);
  BOOST_TEST(r.out.find("decode_tok_s=nan\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("prefill_tok_s=") == 0u, r.out);
}

// --json: one line on stdout holding every batch size's repeats; each summary agrees with
// its runs, and the top-level rates are the last batch size's medians (null, not nan, with
// no decode measured).
BOOST_AUTO_TEST_CASE(bench_json_reports_every_repeat) {
  auto r = test::run_cli({"bench", "--config", kConfig, "--prompt-tokens", "4", "--gen-tokens", "2", "--repeats", "3",
                          "--batch", "1,2", "--json"},
                         {}, 120.0);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_REQUIRE(r.exit_code == 0);
  BOOST_REQUIRE(r.out.ends_with("\n"));
  BOOST_TEST(r.out.find('\n') == r.out.size() - 1, r.out);
  const auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["model"] == "austen-gpt2-6x128");
  BOOST_TEST(j["prompt_tokens"] == 4);
  BOOST_TEST(j["gen_tokens"] == 2);
  BOOST_TEST(j["repeats"] == 3);
  BOOST_TEST(j["random_weights"] == false);
  BOOST_TEST(j["batch_kernels"] == "exact");
  BOOST_REQUIRE(j["batches"].size() == 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& b = j["batches"][i];
    BOOST_TEST(b["batch"] == i + 1);
    for (const char* key : {"prefill_tok_s", "decode_tok_s"}) {
      BOOST_TEST_CONTEXT(key << " of batch " << i + 1) {
        std::vector<double> runs = b[key]["runs"].get<std::vector<double>>();
        BOOST_REQUIRE(runs.size() == 3u);
        std::sort(runs.begin(), runs.end());
        BOOST_TEST(runs.front() > 0);
        BOOST_TEST(b[key]["min"].get<double>() == runs.front());
        BOOST_TEST(b[key]["median"].get<double>() == runs[1]);
        BOOST_TEST(b[key]["max"].get<double>() == runs.back());
      }
    }
    BOOST_TEST(b["decode_tok_s_per_sequence"].get<double>() ==
               b["decode_tok_s"]["median"].get<double>() / double(i + 1));
  }
  BOOST_TEST(j["decode_tok_s"] == j["batches"][1]["decode_tok_s"]["median"]);
  BOOST_TEST(j["prefill_tok_s"] == j["batches"][1]["prefill_tok_s"]["median"]);
  r = test::run_cli(
      {"bench", "--config", kConfig, "--prompt-tokens", "4", "--gen-tokens", "0", "--repeats", "1", "--json"}, {}, 120.0);
  BOOST_REQUIRE(r.exit_code == 0);
  const auto p = nlohmann::json::parse(r.out);
  BOOST_TEST(p["decode_tok_s"].is_null());
  BOOST_TEST(p["batch_kernels"].is_null());  // a lone sequence's own step
  BOOST_TEST(p["batches"][0]["decode_tok_s"].is_null());
  BOOST_TEST(p["prefill_tok_s"].get<double>() == p["batches"][0]["prefill_tok_s"]["median"].get<double>());
}

BOOST_AUTO_TEST_CASE(forward_refuses_stdout) {
  expect(test::run_cli({"forward", "--config", kConfig, "--ids", "1", "--out", "-"}), 2,
         "--out -: forward writes a .npy file");
}

// --out naming one of the model's files would replace it with logits.
BOOST_AUTO_TEST_CASE(forward_does_not_overwrite_its_inputs) {
  const test::TempDir dir;
  const fs::path weights = dir / "weights.safetensors";
  fs::copy_file(fs::path(GPTVK_SOURCE_DIR) / "models/default/model.safetensors", weights);
  const auto size = fs::file_size(weights);
  expect(test::run_cli({"forward", "--config", kConfig, "--weights", weights.string(), "--ids", "1", "--out",
                        (dir.path / "." / "weights.safetensors").string()}),
         1, "--out " + (dir.path / "." / "weights.safetensors").string() + " is the model's weights file");
  BOOST_TEST(fs::file_size(weights) == size);
  // A copy of the bundled config (its weights named by their absolute path): a broken
  // guard must not replace the checkout's own.
  std::stringstream bundled;
  bundled << std::ifstream(kConfig).rdbuf();
  std::string text = bundled.str();
  const std::string relative = "file = \"model.safetensors\"";
  BOOST_REQUIRE(text.find(relative) != std::string::npos);
  text.replace(text.find(relative), relative.size(), "file = \"" + weights.string() + "\"");
  const std::string config = dir.write("config.toml", text);
  expect(test::run_cli({"forward", "--config", config, "--ids", "1", "--out", config}), 1,
         "--out " + config + " is the model's config file: refusing to overwrite it");
  // A snapshot folder's weights are files of the folder, not the path its config names.
  const fs::path snapshot = fs::path(GPTVK_SOURCE_DIR) / "tests/fixtures/formats/gpt1_snapshot";
  for (const auto& entry : fs::directory_iterator(snapshot)) fs::copy(entry.path(), dir / entry.path().filename());
  const std::string copied = (dir / "model.safetensors").string();
  const auto before = fs::file_size(copied);
  expect(test::run_cli({"forward", "-m", dir.path.string(), "--ids", "1", "--out", copied}), 1,
         "--out " + copied + " is a file of the model's folder: refusing to overwrite it");
  BOOST_TEST(fs::file_size(copied) == before);
}

// Whole-number flags read decimal digits only: CLI11 read "010" as 8 and "0x10" as 16, and
// bench --batch checked one reading and ran another (0x10: "internal error", exit 3).
BOOST_AUTO_TEST_CASE(whole_numbers_are_decimal) {
  const auto r = test::run_cli(
      {"generate", "--max-tokens", "010", "--prompt", "It was", "--logit-bias", "50256=-100", "--json"}, {}, 60.0);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(nlohmann::json::parse(r.out.substr(0, r.out.find('\n')))["tokens"].size() == 10u, r.out);
  expect(test::run_cli({"generate", "--max-tokens", "0x10", "--prompt", "hi"}), 2,
         "--max-tokens: expected a whole number, got '0x10'");
  expect(test::run_cli({"bench", "--batch", "1,0x2"}), 2, "--batch 1,0x2: expected a whole number, got '0x2'");
  expect(test::run_cli({"score", "--context", "0b11", "--text", "hi"}), 2,
         "--context: expected a whole number in [2, the model's context], got '0b11'");
}

// Input that must be neither taken silently nor blamed on flags never given: an empty --out
// (a usage error, not "cannot write : ..."), a length that fills bench's context alone (named
// itself, not the other length's default), one scored token's standard error (nan, not 0), a
// kernel choice for batched steps in a bench that runs none.
BOOST_AUTO_TEST_CASE(lengths_paths_and_errors_as_given) {
  expect(test::run_cli({"forward", "--ids", "1", "--out", ""}), 2, "--out: an empty path");
  expect(test::run_cli({"bench", "--gen-tokens", "256"}, {}, 60.0), 1,
         "--gen-tokens 256 leaves no room for a prompt in the model's context of 256 tokens");
  expect(test::run_cli({"bench", "--prompt-tokens", "256"}, {}, 60.0), 1,
         "--prompt-tokens 256 leaves no room for a generated token in the model's context of 256 tokens");
  expect(test::run_cli({"bench", "--batch-kernels", "gemm"}), 2,
         "--batch-kernels applies to batched steps: give --batch 2 or more (a list such as 1,8)");
  const test::TempDir dir;
  const auto r = test::run_cli({"perplexity", "--file", dir.write("two.txt", "Hello world")}, {}, 60.0);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("tokens=1 ") != std::string::npos, r.out);
  BOOST_TEST(r.out.ends_with(" ppl_se=nan\n"), r.out);
}

// Too long for the context: bad input (exit 1) in generate and bench alike.
BOOST_AUTO_TEST_CASE(past_the_context_is_exit_1_everywhere) {
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "hi ";
  expect(test::run_cli({"generate", "--config", kConfig, "--prompt", long_prompt}, {}, 60.0), 1,
         "the prompt is 301 tokens; with 1 generated token that exceeds the model's context of 256");
  // Of several --prompt flags, the one that does not fit is named.
  expect(test::run_cli({"generate", "--config", kConfig, "--prompt", "fine", "--prompt", long_prompt}, {}, 60.0), 1,
         "--prompt #2 is 301 tokens; with 1 generated token that exceeds the model's context of 256");
  // A JSON-lines prompt file's line that does not fit names its file and line.
  const fs::path lines = fs::temp_directory_path() / "gptvk_test_long_prompts.jsonl";
  std::ofstream(lines) << "\"fine\"\n" << nlohmann::json({{"prompt", long_prompt}}).dump() << "\n";
  expect(test::run_cli({"generate", "--config", kConfig, "--prompt-file", lines.string()}, {}, 60.0), 1,
         "the prompt at " + lines.string() + ":2 is 301 tokens; with 1 generated token that exceeds");
  std::ofstream(lines) << "{\"prompt\": \"hi\", \"max_tokens\": 257}\n";
  expect(test::run_cli({"generate", "--config", kConfig, "--prompt-file", lines.string()}, {}, 60.0), 1,
         "the prompt at " + lines.string() + ":1: \"max_tokens\" 257 exceeds the model's context of 256 tokens");
  fs::remove(lines);
  expect(test::run_cli({"bench", "--config", kConfig, "--prompt-tokens", "250", "--gen-tokens", "10"}, {}, 60.0), 1,
         "--prompt-tokens 250 is 250 tokens; with 10 generated tokens that exceeds the model's context of 256");
}

// A stdin that cannot be read (a directory, or closed) is an error, not an empty prompt:
// std::cin took the failed read for the end of the input, and generate ran from
// <|endoftext|> with exit 0.
BOOST_AUTO_TEST_CASE(an_unreadable_stdin_is_an_error_not_empty_text) {
  test::CliOptions dir_in, closed_in;
  dir_in.stdin_from = fs::temp_directory_path().string();
  closed_in.stdin_closed = true;
  expect(test::run_cli({"generate", "--prompt", "-", "--max-tokens", "2"}, {}, 60.0, dir_in), 1,
         "cannot read stdin: Is a directory");
  expect(test::run_cli({"tokenize", "--file", "-"}, {}, 60.0, dir_in), 1, "cannot read stdin: Is a directory");
  expect(test::run_cli({"score"}, {}, 60.0, closed_in), 1, "cannot read stdin: Bad file descriptor");
}

// An empty --api-key ("$KEY" with KEY unset) would serve with no key at all.
BOOST_AUTO_TEST_CASE(serve_refuses_an_empty_api_key) {
  expect(test::run_cli({"serve", "--api-key", "", "--port", "0"}, {}, 30.0), 2, "--api-key: needs a non-empty key");
}
