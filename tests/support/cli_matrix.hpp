// The bad-input matrix's shared parts (tests/test_cli_errors.cpp, tests/test_cli_io.cpp):
// one row runs the real `gpt-vk` binary on one broken input and check() requires what the
// CONTRACT promises for errors: the exit code (1 bad input, 2 bad usage), a one-line
// message on stderr naming the cause, no crash or core dump, no hang (10 s limit, longer
// under GPTVK_VALIDATION_GPU: time_limits.hpp), and no validation-layer message. Rows write
// their broken files into a fresh temporary directory.
#pragma once
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_run.hpp"
#include "tests/support/temp_dir.hpp"

namespace gptvk::test::matrix {

namespace fs = std::filesystem;
using gptvk::test::CliResult;
using gptvk::test::run_cli;

inline const fs::path kSource = GPTVK_SOURCE_DIR;
inline const fs::path kFixture = kSource / "tests/fixtures/models/hf_gpt2";  // V 311, ctx 73, C 64, 2 heads, 2 layers

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// "a\nb" with the line `from` replaced by `to` (the line must exist).
inline std::string replace_line(const std::string& text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "fixture text lacks '" << from << "'");
  return text.substr(0, at) + to + text.substr(at + from.size());
}

// The fixture's safetensors split into header JSON and data, to be rewritten with lies.
struct Safetensors {
  nlohmann::json header;
  std::string data;

  static Safetensors read(const fs::path& p) {
    std::string bytes = read_text(p);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
    return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
  }
  std::string bytes() const {
    std::string h = header.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t(h.size()) >> (8 * i)) & 0xFF);
    return out + h + data;
  }
};

// One matrix row's expectations; check() tests everything the header comment promises.
struct Expect {
  int exit_code = 1;
  std::vector<std::string> says;  // substrings the error line must contain
  size_t max_lines = 1;           // stderr lines allowed (bench first says it uses random weights)
};

inline void check(const CliResult& r, const Expect& e) {
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(!r.timed_out, "hung: still running after " << r.seconds << " s");
  BOOST_TEST(!r.signaled, "killed by signal " << r.signal << (r.core_dumped ? " (core dumped)" : ""));
  BOOST_TEST(r.exit_code == e.exit_code);
  BOOST_TEST(r.err.find("validation:") == std::string::npos, "the validation layer reported something");
  for (const char* crash : {"terminate called", "internal error", "Assertion", "Sanitizer", "runtime error"})
    BOOST_TEST(r.err.find(crash) == std::string::npos, "stderr shows '" << crash << "'");
  std::vector<std::string> lines;
  std::istringstream in(r.err);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  BOOST_TEST(!lines.empty(), "no message on stderr");
  BOOST_TEST(std::none_of(r.err.begin(), r.err.end(), [](unsigned char c) { return (c < 0x20 && c != '\n') || c == 0x7f; }),
             "stderr holds a control character");
  BOOST_TEST(lines.size() <= e.max_lines, "stderr has " << lines.size() << " lines, expected one message");
  if (lines.empty()) return;
  const std::string& msg = lines.back();
  BOOST_TEST_MESSAGE("exit " << r.exit_code << " in " << r.seconds << " s: " << msg);
  BOOST_TEST(msg.rfind("gpt-vk: ", 0) == 0, "message does not start with 'gpt-vk: '");
  for (const auto& s : e.says) BOOST_TEST(msg.find(s) != std::string::npos, "message lacks '" << s << "'");
}

using gptvk::test::TempDir;  // a fresh directory for one row's files

struct Rows {
  TempDir dir;
  std::string fixture_config = read_text(kFixture / "config.toml");

  // `text` as dir/config.toml.
  std::string config(const std::string& text) {
    fs::path p = dir / "config.toml";
    write_text(p, text);
    return p.string();
  }
  // The fixture's config with its weights path made absolute and the text `from`
  // replaced by `to` (none when `from` is empty), as dir/config.toml.
  std::string fixture_with(const std::string& from, const std::string& to) {
    std::string text = replace_line(fixture_config, "file = \"model.safetensors\"",
                                    "file = \"" + (kFixture / "model.safetensors").string() + "\"");
    return config(from.empty() ? text : replace_line(text, from, to));
  }
  // `gpt-vk forward` on the fixture's config (maybe edited) and a weights file.
  CliResult forward(const std::string& config, const std::string& weights = "", const std::string& ids = "1,2,3") {
    std::vector<std::string> args = {"forward", "--config", config, "--ids", ids, "--out", (dir / "out.npy").string()};
    if (!weights.empty()) args.insert(args.end(), {"--weights", weights});
    return run_cli(args);
  }
  // forward with the fixture's weights rewritten by `edit`.
  CliResult forward_lying(const std::function<void(Safetensors&)>& edit) {
    Safetensors st = Safetensors::read(kFixture / "model.safetensors");
    edit(st);
    fs::path p = dir / "model.safetensors";
    write_text(p, st.bytes());
    return forward(fixture_with("", ""), p.string());
  }
  // A config whose [tokenizer] names the given vocab and merges texts.
  std::string tokenizer_config(const std::string& vocab, const std::string& merges) {
    write_text(dir / "vocab.json", vocab);
    write_text(dir / "merges.txt", merges);
    return config(fixture_config + "\n[tokenizer]\nvocab = \"vocab.json\"\nmerges = \"merges.txt\"\n");
  }
  std::string gpt2_tokenizer_config() {
    fs::path tok = kSource / "models/gpt2-tokenizer";
    return config(fixture_config + "\n[tokenizer]\nvocab = \"" + (tok / "encoder.json").string() +
                  "\"\nmerges = \"" + (tok / "vocab.bpe").string() + "\"\n");
  }
};


}  // namespace gptvk::test::matrix
