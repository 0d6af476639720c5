// `gpt-vk score` on the bundled model: its log-probabilities equal the log-softmax of
// `forward`'s logits (and its ranks their order), its mean over the start of the held-out
// text equals `perplexity`'s for the same window and stride, and it counts the same tokens.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/config.hpp"
#include "models/npy.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/utf8.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/temp_dir.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

const fs::path kConfig = fs::path(GPTVK_SOURCE_DIR) / "models/default/config.toml";
const fs::path kHeldout = fs::path(GPTVK_SOURCE_DIR) / "models/default/heldout.txt";

test::CliResult run_ok(const std::vector<std::string>& args) {
  auto r = test::run_cli(args, {}, 300.0);
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find("validation:") == std::string::npos, "the validation layer reported something");
  return r;
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

}  // namespace

// Every token after the first of a short text (one window): logprob within 1e-5 of the
// log-softmax of forward's logits at the position before it (both run the prompt path),
// rank exactly 1 + the count of larger logits, text the token's bytes.
BOOST_AUTO_TEST_CASE(score_equals_log_softmax_of_forward) {
  const std::string text = "The quick brown fox jumps over the lazy dog, and then it sleeps.";
  auto r = run_ok({"score", "--config", kConfig.string(), "--text", text});
  auto lines = json_lines(r.out);
  ModelConfig cfg = load_config(kConfig.string());
  Tokenizer tok = Tokenizer::load(cfg.tokenizer_vocab, cfg.tokenizer_merges);
  auto ids = tok.encode(text);
  BOOST_REQUIRE(lines.size() == ids.size() - 1);
  std::string id_list;
  for (uint32_t id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
  const fs::path npy = fs::temp_directory_path() / "gptvk_test_score.npy";
  run_ok({"forward", "--config", kConfig.string(), "--ids", id_list, "--out", npy.string()});
  NpyArray logits = read_npy(npy.string());
  fs::remove(npy);
  const size_t V = cfg.vocab_size;
  double worst = 0;
  for (size_t t = 1; t < ids.size(); ++t) {
    const auto& o = lines[t - 1];
    const float* row = logits.data.data() + (t - 1) * V;
    double m = *std::max_element(row, row + V), z = 0;
    uint32_t above = 0;
    for (size_t v = 0; v < V; ++v) {
      z += std::exp(double(row[v]) - m);
      above += row[v] > row[ids[t]];
    }
    BOOST_TEST(o["id"] == ids[t]);
    BOOST_TEST(o["text"] == tokenizer::token_json_text(tok.token_bytes(ids[t])));
    BOOST_TEST(o["rank"] == above + 1, "token " << t);
    worst = std::max(worst, std::fabs(o["logprob"].get<double>() - (double(row[ids[t]]) - m - std::log(z))));
  }
  BOOST_TEST(worst <= 1e-5, "largest difference from forward: " << worst);
}

// score agrees with perplexity: on the held-out text, with context 64 and stride 64 (so windows do
// not overlap and the first token of each is skipped), the mean log-probability is
// -ln(perplexity) to the 4 decimals perplexity prints (2e-6 in the log), over the same count.
// Over the text's first 10,000 bytes (about 2,200 tokens, 35 windows): the whole of it is
// four times the work and checks nothing more (test_default_model scores all of it).
BOOST_AUTO_TEST_CASE(mean_equals_perplexity_on_heldout) {
  std::ifstream in_text(kHeldout, std::ios::binary);
  std::string text(10000, '\0');
  text.resize(size_t(in_text.read(text.data(), std::streamsize(text.size())).gcount()));
  BOOST_REQUIRE(text.size() == 10000u);
  const std::string heldout = test::write_temp_file("heldout_start.txt", text);
  auto s = run_ok({"score", "--config", kConfig.string(), "-f", heldout, "--context", "64", "--stride", "64",
                   "--tsv"});
  std::istringstream in(s.out);
  std::string line;
  std::getline(in, line);
  BOOST_TEST(line == "id\ttext\tlogprob\trank");
  double sum = 0;
  size_t n = 0;
  while (std::getline(in, line)) {
    auto tab = line.rfind('\t'), tab2 = line.rfind('\t', tab - 1);
    sum += std::stod(line.substr(tab2 + 1, tab - tab2 - 1));
    ++n;
  }
  // llama-perplexity's spellings: -f FILE -c CONTEXT.
  auto p = run_ok({"perplexity", "--config", kConfig.string(), "-f", heldout, "-c", "64", "--stride", "64"});
  double ppl = 0, se = 0;
  unsigned long long scored = 0;
  BOOST_REQUIRE(std::sscanf(p.out.c_str(), "perplexity=%lf tokens=%llu tok_s=%*f ppl_se=%lf", &ppl, &scored, &se) == 3);
  BOOST_TEST(n == scored);
  BOOST_TEST(std::fabs(sum / double(n) + std::log(ppl)) <= 2e-6, "mean " << sum / n << ", -ln ppl " << -std::log(ppl));
  BOOST_TEST((se > 0 && se < ppl / 10), "standard error " << se);
  // stderr is a pipe here: no progress bar (it redraws with carriage returns on a terminal).
  BOOST_TEST(p.err.find('\r') == std::string::npos);
  BOOST_TEST(p.err.find("+/-") != std::string::npos, p.err);
}

// --tsv escapes a NUL byte (GPT-2's token 188) as \0: an empty field would read as an
// empty token.
BOOST_AUTO_TEST_CASE(tsv_escapes_a_nul_byte) {
  const fs::path file = fs::temp_directory_path() / "gptvk_test_score_nul.txt";
  std::ofstream(file, std::ios::binary) << std::string("a\0b", 3);
  auto s = run_ok({"score", "--config", kConfig.string(), "--file", file.string(), "--tsv"});
  fs::remove(file);
  BOOST_TEST(s.out.find("\n188\t\\0\t") != std::string::npos, s.out);
  BOOST_TEST(s.out.find('\0') == std::string::npos);
}

// In JSON, a token that is part of a UTF-8 character is "bytes:\xNN..." (as in generate
// --json and the server's logprobs), not U+FFFD that would make distinct tokens look alike.
BOOST_AUTO_TEST_CASE(json_names_partial_characters_by_their_bytes) {
  auto s = run_ok({"score", "--config", kConfig.string(), "--text", "\xe2\x9c\x93 done"});  // U+2713: 2 tokens
  const auto lines = json_lines(s.out);
  BOOST_REQUIRE(!lines.empty());
  BOOST_TEST(lines[0]["id"] == 241);  // the character's last byte; token 0 (its first two) is not scored
  BOOST_TEST(lines[0]["text"] == "bytes:\\x93");
  BOOST_TEST(s.out.find("\xef\xbf\xbd") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_input) {
  auto both = test::run_cli({"score", "--config", kConfig.string(), "--text", "a b", "--file", kHeldout.string()});
  BOOST_TEST(both.exit_code == 2);
  auto short_text = test::run_cli({"score", "--config", kConfig.string(), "--text", "a"}, {}, 60.0);
  BOOST_TEST(short_text.exit_code == 1);
  BOOST_TEST(short_text.err == "gpt-vk: the text has fewer than 2 tokens\n");
  // Nothing on stdout either, in TSV too (its header went out before the refusal).
  BOOST_TEST(short_text.out.empty());
  auto short_tsv = test::run_cli({"score", "--config", kConfig.string(), "--text", "a", "--tsv"}, {}, 60.0);
  BOOST_TEST(short_tsv.exit_code == 1);
  BOOST_TEST(short_tsv.out.empty(), short_tsv.out);
  auto missing = test::run_cli({"score", "--config", kConfig.string(), "--file", "/nonexistent/t.txt"}, {}, 60.0);
  BOOST_TEST(missing.exit_code == 1);
  BOOST_TEST(missing.err.find("gpt-vk: cannot read --file /nonexistent/t.txt") == 0u, missing.err);
}

// Ctrl-C keeps what was scored: SIGINT once the first token's line is out stops the run
// after that window (one token a window with --stride 1 over thousands of tokens), with the
// summary of the tokens so far on stderr, and exit 130, rather than dying with no summary;
// perplexity shares this loop (score_windows) and its Ctrl-C handling.
BOOST_AUTO_TEST_CASE(ctrl_c_keeps_the_tokens_scored_so_far) {
  test::CliOptions ctrl_c;
  ctrl_c.sigint_on_output = "\n";
  auto r = test::run_cli({"score", "--config", kConfig.string(), "--file", kHeldout.string(), "--context", "64",
                          "--stride", "1"},
                         {}, 120.0, ctrl_c);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(!r.signaled);
  BOOST_TEST(r.exit_code == 130);
  const auto lines = json_lines(r.out);
  BOOST_TEST(!lines.empty());
  BOOST_TEST(lines.size() < 1000u, lines.size() << " lines: not stopped at Ctrl-C");
  BOOST_TEST(r.err.find("gpt-vk: interrupted: the lines above are the tokens scored so far\n") != std::string::npos);
  BOOST_TEST(r.err.find("gpt-vk: " + std::to_string(lines.size()) + " of ") != std::string::npos);
}
