// The bad-input matrix: every row runs the real `gpt-vk` binary on one broken input and
// requires what the CONTRACT promises for errors (tests/support/cli_matrix.hpp: exit code,
// one-line message, no crash, no hang, no validation message). Files that never end,
// change underneath or cannot be written are the rows of tests/test_cli_io.cpp.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "tests/support/cli_matrix.hpp"

using namespace gptvk::test::matrix;

BOOST_FIXTURE_TEST_SUITE(config_file, Rows)

BOOST_AUTO_TEST_CASE(malformed_toml) {
  check(forward(config("[model\nname = \"x\"\n")), {1, {"config.toml:1", "malformed TOML"}});
}
BOOST_AUTO_TEST_CASE(non_ascii_key) {
  // toml++ 3.3 has undefined behaviour here (see models/config.cpp).
  check(forward(fixture_with("n_layers = 2", "n_l\xC3\xA1yers = 2")),
        {1, {"config.toml:9", "non-ASCII character outside a string or comment"}});
}
BOOST_AUTO_TEST_CASE(config_not_found) {
  check(forward((dir / "absent.toml").string()), {1, {"absent.toml", "cannot open config file"}});
}
BOOST_AUTO_TEST_CASE(unknown_key) {
  check(forward(fixture_with("n_layers = 2", "n_layers = 2\nn_layer = 2")), {1, {"unknown key model.n_layer"}});
}
// A long unknown key is named by its start, so the error stays one readable line.
BOOST_AUTO_TEST_CASE(long_unknown_key) {
  check(forward(fixture_with("n_layers = 2", "n_layers = 2\n" + std::string(100000, 'k') + " = 2")),
        {1, {"unknown key model." + std::string(64, 'k') + "... (100000 bytes)"}});
}
// A path holding a NUL ("\u0000") is refused: cut there, it would open another file.
BOOST_AUTO_TEST_CASE(path_with_a_nul_byte) {
  check(forward(fixture_with("model.safetensors\"", "model.safetensors\\u0000.gguf\"")),
        {1, {"config.toml:", "weights.file: the path holds a NUL byte"}});
}
// A UTF-8 byte-order mark (Windows editors write one) before a config, a vocab.json or a
// merges.txt is skipped, as JSON and TOML parsers skip it.
BOOST_AUTO_TEST_CASE(byte_order_marks_are_skipped) {
  const std::string bom = "\xEF\xBB\xBF";
  std::string vocab = read_text(kSource / "models/gpt2-tokenizer/encoder.json");
  std::string merges = read_text(kSource / "models/gpt2-tokenizer/vocab.bpe");
  const std::string cfg = tokenizer_config(bom + vocab, bom + merges);
  write_text(cfg, bom + replace_line(read_text(cfg), "vocab_size = 311", "vocab_size = 50257"));
  const CliResult r = run_cli({"tokenize", "--config", cfg, "-p", "Hello world"});  // llama-tokenize's -p
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "15496 995\n");
}
BOOST_AUTO_TEST_CASE(unknown_table) {
  check(forward(config(fixture_config + "\n[training]\nlr = 1\n")), {1, {"unknown key training"}});
}
BOOST_AUTO_TEST_CASE(missing_key) {
  check(forward(fixture_with("n_layers = 2\n", "")), {1, {"missing required key model.n_layers"}});
}
BOOST_AUTO_TEST_CASE(missing_weights_table) {
  check(forward(config(fixture_config.substr(0, fixture_config.find("[weights]")))),
        {1, {"missing required table [weights]"}});
}
BOOST_AUTO_TEST_CASE(wrong_type) {
  check(forward(fixture_with("n_layers = 2", "n_layers = \"2\"")), {1, {"model.n_layers", "expected an integer"}});
}
BOOST_AUTO_TEST_CASE(unknown_activation) {
  check(forward(fixture_with("n_layers = 2", "n_layers = 2\nactivation = \"swish\"")),
        {1, {"model.activation", "unknown value 'swish'"}});
}
BOOST_AUTO_TEST_CASE(unknown_layout) {
  check(forward(fixture_with("layout = \"hf-gpt2\"", "layout = \"megatron\"")),
        {1, {"weights.layout", "unknown value 'megatron'"}});
}
BOOST_AUTO_TEST_CASE(unknown_dtype) {
  check(forward(fixture_with("dtype = \"f32\"", "dtype = \"int4\"")), {1, {"weights.dtype", "unknown value 'int4'"}});
}
BOOST_AUTO_TEST_CASE(custom_layout_without_names) {
  check(forward(fixture_with("layout = \"hf-gpt2\"", "layout = \"custom\"")),
        {1, {"missing required table [weights.names]"}});
}
BOOST_AUTO_TEST_CASE(heads_do_not_divide_width) {
  check(forward(fixture_with("n_heads = 2", "n_heads = 3")), {1, {"model.n_heads", "3 does not divide", "64"}});
}
BOOST_AUTO_TEST_CASE(zero_dimension) {
  check(forward(fixture_with("emb_dim = 64", "emb_dim = 0")), {1, {"model.emb_dim", "positive"}});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(weights_file, Rows)

BOOST_AUTO_TEST_CASE(missing) {
  check(forward(fixture_with("", ""), (dir / "absent.safetensors").string()), {1, {"absent.safetensors", "not found"}});
}
BOOST_AUTO_TEST_CASE(missing_from_config) {
  check(forward(config(fixture_config), ""), {1, {"model.safetensors", "not found"}});
}
BOOST_AUTO_TEST_CASE(empty) {
  write_text(dir / "empty.safetensors", "");
  check(forward(fixture_with("", ""), (dir / "empty.safetensors").string()), {1, {"empty.safetensors", "empty file"}});
}
BOOST_AUTO_TEST_CASE(truncated) {
  std::string bytes = read_text(kFixture / "model.safetensors");
  write_text(dir / "cut.safetensors", bytes.substr(0, bytes.size() / 2));
  check(forward(fixture_with("", ""), (dir / "cut.safetensors").string()),
        {1, {"cut.safetensors", "tensor '", "runs past the end of the data area"}});
}
BOOST_AUTO_TEST_CASE(header_length_beyond_file) {
  std::string bytes = read_text(kFixture / "model.safetensors");
  bytes[5] = '\x01';  // header length += 2^40
  write_text(dir / "long.safetensors", bytes);
  check(forward(fixture_with("", ""), (dir / "long.safetensors").string()),
        {1, {"long.safetensors", "header length", "runs past the end of the file"}});
}
BOOST_AUTO_TEST_CASE(not_json) {
  std::string bytes = read_text(kFixture / "model.safetensors");
  bytes[8] = '[';
  bytes[9] = '}';
  write_text(dir / "bad.safetensors", bytes);
  check(forward(fixture_with("", ""), (dir / "bad.safetensors").string()), {1, {"malformed JSON header"}});
}
BOOST_AUTO_TEST_CASE(overlapping_offsets) {
  check(forward_lying([](Safetensors& st) {
          auto& a = st.header["h.0.ln_1.weight"]["data_offsets"];
          auto& b = st.header["h.0.ln_1.bias"]["data_offsets"];
          uint64_t len = b[1].get<uint64_t>() - b[0].get<uint64_t>();
          b = {a[0].get<uint64_t>() + 4, a[0].get<uint64_t>() + 4 + len};
        }),
        {1, {"overlaps tensor"}});
}
BOOST_AUTO_TEST_CASE(offsets_out_of_range) {
  check(forward_lying([](Safetensors& st) {
          auto& o = st.header["wpe.weight"]["data_offsets"];
          uint64_t len = o[1].get<uint64_t>() - o[0].get<uint64_t>();
          o = {st.data.size() - len + 64, st.data.size() + 64};
        }),
        {1, {"tensor 'wpe.weight'", "runs past the end of the data area"}});
}
BOOST_AUTO_TEST_CASE(offsets_disagree_with_shape) {
  check(forward_lying([](Safetensors& st) { st.header["ln_f.bias"]["shape"] = {65}; }),
        {1, {"tensor 'ln_f.bias'", "needs 260 bytes", "span 256 bytes"}});
}
BOOST_AUTO_TEST_CASE(unsupported_dtype) {
  check(forward_lying([](Safetensors& st) { st.header["wte.weight"]["dtype"] = "I32"; }),
        {1, {"tensor 'wte.weight'", "dtype I32", "only F32, F16 and BF16"}});
}
BOOST_AUTO_TEST_CASE(unknown_dtype) {
  check(forward_lying([](Safetensors& st) { st.header["wte.weight"]["dtype"] = "Q4_K"; }),
        {1, {"tensor 'wte.weight'", "unknown dtype 'Q4_K'"}});
}
// What a file holds reaches stderr escaped: a newline cannot split the one-line error, nor
// an escape sequence reach the terminal, nor a byte that is not UTF-8 pass as it is.
BOOST_AUTO_TEST_CASE(control_characters_in_a_file_are_escaped) {
  check(forward_lying([](Safetensors& st) { st.header["wte.weight"]["dtype"] = "\x1b[2J\nX\u0085"; }),
        {1, {"tensor 'wte.weight'", "unknown dtype '\\x1B[2J\\nX\\u0085'"}});
}
BOOST_AUTO_TEST_CASE(missing_tensor) {
  check(forward_lying([](Safetensors& st) {
          st.header["h.1.mlp.c_fc.renamed"] = st.header["h.1.mlp.c_fc.weight"];
          st.header.erase("h.1.mlp.c_fc.weight");
        }),
        {1, {"tensor 'h.1.mlp.c_fc.weight' not found"}});
}
BOOST_AUTO_TEST_CASE(wrong_shape) {
  // Same bytes, transposed shape: only the [model] dimensions can tell.
  check(forward_lying([](Safetensors& st) { st.header["h.1.mlp.c_fc.weight"]["shape"] = {256, 64}; }),
        {1, {"tensor 'h.1.mlp.c_fc.weight'", "shape [256, 64], expected [64, 256]"}});
}
BOOST_AUTO_TEST_CASE(config_disagrees_with_file) {
  check(forward(fixture_with("vocab_size = 311", "vocab_size = 312")),
        {1, {"tensor 'wte.weight'", "shape [311, 64], expected [312, 64]"}});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(tokenizer_files, Rows)

BOOST_AUTO_TEST_CASE(vocab_not_json) {
  auto cfg = tokenizer_config("{\"a\": 0,\n \"b\": }", "#version: 0.2\n");
  check(run_cli({"tokenize", "--config", cfg, "--text", "hi"}), {1, {"vocab.json:2"}});
}
BOOST_AUTO_TEST_CASE(vocab_ids_not_dense) {
  auto cfg = tokenizer_config("{\"a\": 0, \"b\": 5}", "#version: 0.2\n");
  check(run_cli({"tokenize", "--config", cfg, "--text", "hi"}), {1, {"vocab.json"}});
  // An id far past what the file can hold is refused before the tables grow to it, so a
  // small file cannot claim hundreds of MB.
  cfg = tokenizer_config("{\"a\": 0, \"b\": 16777216}", "#version: 0.2\n");
  check(run_cli({"tokenize", "--config", cfg, "--text", "hi"}),
        {1, {"vocab.json:1:", "id 16777216 leaves gaps: the file is too short to hold that many tokens"}});
}
BOOST_AUTO_TEST_CASE(merges_malformed) {
  std::string vocab = read_text(kSource / "models/gpt2-tokenizer/encoder.json");
  auto cfg = tokenizer_config(vocab, "#version: 0.2\n\xC4\xA0 t\nthree tokens here\n");
  check(run_cli({"tokenize", "--config", cfg, "--text", "hi"}), {1, {"merges.txt:3"}});
}
BOOST_AUTO_TEST_CASE(merges_unknown_token) {
  std::string vocab = read_text(kSource / "models/gpt2-tokenizer/encoder.json");
  auto cfg = tokenizer_config(vocab, "#version: 0.2\nzzqx zzqy\n");
  check(run_cli({"tokenize", "--config", cfg, "--text", "hi"}), {1, {"merges.txt:2"}});
}
BOOST_AUTO_TEST_CASE(vocab_file_missing) {
  auto cfg = config(fixture_config + "\n[tokenizer]\nvocab = \"absent.json\"\nmerges = \"absent.txt\"\n");
  check(run_cli({"tokenize", "--config", cfg, "--text", "hi"}), {1, {"absent.json"}});
}
BOOST_AUTO_TEST_CASE(no_tokenizer_section) {
  check(run_cli({"tokenize", "--config", fixture_with("", ""), "--text", "hi"}), {1, {"[tokenizer]"}});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(ids_and_lengths, Rows)

BOOST_AUTO_TEST_CASE(id_out_of_vocabulary) {
  check(forward(fixture_with("", ""), "", "5,311"), {1, {"token id 311", "vocab_size = 311"}});
}
BOOST_AUTO_TEST_CASE(detokenize_id_out_of_vocabulary) {
  check(run_cli({"detokenize", "--config", gpt2_tokenizer_config(), "--ids", "464,50257"}),
        {1, {"token id 50257", "outside the vocabulary"}});
}
BOOST_AUTO_TEST_CASE(id_not_a_number) {
  check(forward(fixture_with("", ""), "", "464,x2"), {1, {"'x2' is not a token id"}});
}
// No ids, or an empty item, is refused: it wrote a [0, vocab] array, or read 1,,2 as 1,2.
BOOST_AUTO_TEST_CASE(ids_empty_or_with_an_empty_item) {
  check(forward(fixture_with("", ""), "", ""), {1, {"--ids: no token ids"}});
  check(forward(fixture_with("", ""), "", " "), {1, {"--ids: no token ids"}});
  for (const char* ids : {",", "1,,2", ",1", "1,", "1, ,2"})
    check(forward(fixture_with("", ""), "", ids), {1, {"--ids: an empty item"}});
  check(run_cli({"detokenize", "--config", gpt2_tokenizer_config(), "--ids", "464,,2068"}),
        {1, {"--ids: an empty item"}});
}
BOOST_AUTO_TEST_CASE(id_beyond_32_bits) {
  check(forward(fixture_with("", ""), "", "4294967296"), {1, {"4294967296"}});
}
BOOST_AUTO_TEST_CASE(more_ids_than_context) {
  std::string ids;
  for (int i = 0; i < 74; ++i) ids += (i ? "," : "") + std::to_string(i);
  check(forward(fixture_with("", ""), "", ids), {1, {"74 tokens exceed the model's context of 73"}});
}
BOOST_AUTO_TEST_CASE(max_tokens_beyond_context) {
  check(run_cli({"generate", "--config", fixture_with("", ""), "--prompt", "x", "--max-tokens", "74"}),
        {1, {"--max-tokens 74", "context of 73"}});
}
BOOST_AUTO_TEST_CASE(bench_lengths_beyond_context) {
  check(run_cli({"bench", "--config", fixture_with("", ""), "--prompt-tokens", "70", "--gen-tokens", "4"}),
        {1, {"--prompt-tokens 70", "with 4 generated tokens", "context of 73"}});
  // The defaults (128 + 64 tokens) are shortened to fit, as generate's --max-tokens is.
  CliResult r = run_cli({"bench", "--config", fixture_with("", ""), "--repeats", "1"});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("the model's context is 73 tokens: --prompt-tokens 48 --gen-tokens 25") != std::string::npos,
             r.err);
  r = run_cli({"bench", "--config", fixture_with("", ""), "--repeats", "1", "--prompt-tokens", "70"});
  BOOST_TEST(r.err.find("--prompt-tokens 70 --gen-tokens 3") != std::string::npos, r.err);
}
BOOST_AUTO_TEST_CASE(bench_batch_list_items) {
  check(run_cli({"bench", "--config", fixture_with("", ""), "--batch", "1,,2"}), {2, {"--batch 1,,2: an empty item"}});
  check(run_cli({"bench", "--config", fixture_with("", ""), "--batch", "1,300"}),
        {2, {"--batch 1,300: value 300 not in range 1 to 256"}});
}
BOOST_AUTO_TEST_CASE(bench_batch_kernels_named) {
  check(run_cli({"bench", "--config", fixture_with("", ""), "--batch", "2", "--batch-kernels", "fast"}),
        {2, {"--batch-kernels", "fast not in {exact,gemm}"}});
}

// Counts that must be at least 1 say so, with their own range.
BOOST_AUTO_TEST_CASE(zero_counts) {
  check(run_cli({"bench", "--config", fixture_with("", ""), "--repeats", "0"}), {2, {"--repeats", "not in range 1 to"}});
  check(run_cli({"generate", "--config", fixture_with("", ""), "--prompt", "x", "--max-tokens", "0"}),
        {2, {"--max-tokens", "not in range 1 to"}});
}
// Sampling parameters are checked before the weights load (the sampler warm-up starts first);
// --top-p's range, (0, 1], is the one its --help states.
BOOST_AUTO_TEST_CASE(top_p_out_of_range) {
  for (const char* p : {"0", "-0.5", "1.5", "nan", "abc"})
    check(run_cli({"generate", "--config", fixture_with("", ""), "--prompt", "x", "--top-p", p}),
          {2, {"--top-p", "(0, 1]"}});
}

BOOST_AUTO_TEST_SUITE_END()

// The fixture (context 73) with a tokenizer of its 311 tokens: GPT-2's first 311, whose
// ids 256-310 are its first 55 merges.
struct ShortContext : Rows {
  std::string text_config() {
    const fs::path tok = kSource / "models/gpt2-tokenizer";
    nlohmann::json vocab = nlohmann::json::object();
    const nlohmann::json gpt2 = nlohmann::json::parse(read_text(tok / "encoder.json"));
    for (auto it = gpt2.begin(); it != gpt2.end(); ++it)
      if (it.value().get<uint32_t>() < 311) vocab[it.key()] = it.value();
    std::istringstream bpe(read_text(tok / "vocab.bpe"));
    std::string merges;
    std::string line;
    for (int i = 0; i < 56 && std::getline(bpe, line); ++i) merges += line + "\n";  // the version line, 55 merges
    write_text(dir / "vocab.json", vocab.dump());
    write_text(dir / "merges.txt", merges);
    return config(read_text(fixture_with("", "")) + "\n[tokenizer]\nvocab = \"vocab.json\"\nmerges = \"merges.txt\"\n");
  }
};

BOOST_FIXTURE_TEST_SUITE(short_context, ShortContext)

// The default --max-tokens (100) is cut to a shorter context: the run stops when the
// context is full. A value given, on the command line or a prompt line, is still refused.
BOOST_AUTO_TEST_CASE(default_max_tokens_fits_the_context) {
  const std::string cfg = text_config();
  write_text(dir / "p.jsonl", "\"the cat\"\n{\"prompt\": \"a\", \"seed\": 3}\n");
  using Args = std::vector<std::string>;
  for (const Args& prompt : {Args{"--prompt", "the cat"}, Args{"--prompt-file", (dir / "p.jsonl").string()}}) {
    std::vector<std::string> args = {"generate", "--config", cfg, "--seed", "1"};
    args.insert(args.end(), prompt.begin(), prompt.end());
    const CliResult r = run_cli(args);
    BOOST_TEST_INFO("stderr: " << r.err);
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.err.find("the context of 73 tokens is full") != std::string::npos);
  }
  check(run_cli({"generate", "--config", cfg, "--prompt", "x", "--max-tokens", "74"}), {1, {"--max-tokens 74"}});
  write_text(dir / "p.jsonl", "{\"prompt\": \"a\", \"max_tokens\": 100}\n");
  check(run_cli({"generate", "--config", cfg, "--prompt-file", (dir / "p.jsonl").string()}),
        {1, {"\"max_tokens\" 100 exceeds the model's context of 73"}});
}
// perplexity and score: --context 0 and --stride 0 are refused as --context 1 is (0 is no
// documented default).
BOOST_AUTO_TEST_CASE(zero_window_or_stride) {
  const std::string cfg = text_config();
  write_text(dir / "t.txt", "the cat sat on the mat and the cat sat on the hat");
  const std::string file = (dir / "t.txt").string();
  for (const char* cmd : {"perplexity", "score"}) {
    check(run_cli({cmd, "--config", cfg, "--file", file, "--context", "0"}),
          {2, {"--context must be between 2 and the model's context of 73"}});
    check(run_cli({cmd, "--config", cfg, "--file", file, "--context", "1"}), {2, {"--context must be between 2"}});
    check(run_cli({cmd, "--config", cfg, "--file", file, "--stride", "0"}), {2, {"--stride must be between 1"}});
    check(run_cli({cmd, "--config", cfg, "--file", file, "--context", "-1"}), {2, {"--context: expected a whole number in [2, the model's context], got '-1'"}});
    check(run_cli({cmd, "--config", cfg, "--file", file, "--stride", "x"}), {2, {"--stride: expected a whole number"}});
  }
}

// A model whose context holds one token cannot score a text: the model's doing (bad input),
// not that of a --context flag nobody gave.
BOOST_AUTO_TEST_CASE(a_one_token_context_cannot_score) {
  Safetensors st = Safetensors::read(kFixture / "model.safetensors");
  auto& wpe = st.header["wpe.weight"];
  wpe["shape"] = {1, 64};
  wpe["data_offsets"][1] = wpe["data_offsets"][0].get<uint64_t>() + 64 * 4;
  const std::string weights = (dir / "one.safetensors").string();
  write_text(weights, st.bytes());
  const std::string cfg = config(replace_line(read_text(text_config()), "context_length = 73", "context_length = 1"));
  write_text(dir / "t.txt", "the cat sat on the mat");
  for (const char* cmd : {"perplexity", "score"})
    check(run_cli({cmd, "--config", cfg, "--weights", weights, "--file", (dir / "t.txt").string()}),
          {1, {"the model's context of 1 token is too short to score a text"}});
}

BOOST_AUTO_TEST_SUITE_END()

// generate --prompt-file FILE.jsonl: a bad line is bad input naming the file and line (a
// good line and a blank one come first, so the bad one is line 3).
struct PromptLines : Rows {
  CliResult generate_lines(const std::string& bad_line) {
    const fs::path file = dir / "prompts.jsonl";
    write_text(file, "\"fine\"\n\n" + bad_line + "\n");
    return run_cli({"generate", "--config", fixture_with("", ""), "--prompt-file", file.string()});
  }
};

BOOST_FIXTURE_TEST_SUITE(prompt_lines, PromptLines)

BOOST_AUTO_TEST_CASE(not_json) {
  check(generate_lines("{\"prompt\": \"hi\""), {1, {"prompts.jsonl:3: not valid JSON (at column"}});
  check(generate_lines("hi"), {1, {"prompts.jsonl:3: not valid JSON"}});
  check(generate_lines("\"a\" \"b\""), {1, {"prompts.jsonl:3: not valid JSON"}});
  check(generate_lines("\"caf\xE9\""), {1, {"prompts.jsonl:3: not valid JSON"}});  // Latin-1, not UTF-8
}
BOOST_AUTO_TEST_CASE(not_a_string_or_object) {
  check(generate_lines("42"), {1, {"prompts.jsonl:3: expected a JSON string or an object", "got a number"}});
  check(generate_lines("[\"hi\"]"), {1, {"prompts.jsonl:3:", "got an array"}});
  check(generate_lines("null"), {1, {"prompts.jsonl:3:", "got null"}});
}
BOOST_AUTO_TEST_CASE(object_without_a_prompt_string) {
  check(generate_lines("{\"text\": \"hi\"}"), {1, {"prompts.jsonl:3: the object has no \"prompt\""}});
  check(generate_lines("{\"prompt\": 7}"), {1, {"prompts.jsonl:3: \"prompt\" must be a string, got a number"}});
}
BOOST_AUTO_TEST_CASE(unknown_key) {
  check(generate_lines("{\"prompt\": \"hi\", \"max_token\": 5}"), {1, {"prompts.jsonl:3: unknown key \"max_token\""}});
  check(generate_lines("{\"prompt\": \"hi\", \"a\\nb\": 5}"), {1, {"prompts.jsonl:3: unknown key \"a\\nb\""}});
  // A long key is quoted by its start, so the error stays one readable line.
  check(generate_lines("{\"prompt\": \"hi\", \"" + std::string(100000, 'k') + "\": 5}"),
        {1, {"prompts.jsonl:3: unknown key \"" + std::string(63, 'k') + "... (100002 bytes) (a line's object takes"}});
}
// nlohmann::json prints and copies a value recursively, so a line nested a few hundred
// thousand levels deep overflowed the stack when its error quoted it (a segfault).
BOOST_AUTO_TEST_CASE(nesting_past_100_levels) {
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  check(generate_lines("{\"prompt\": \"hi\", \"seed\": " + deep + "}"),
        {1, {"prompts.jsonl:3: the JSON nests deeper than 100 levels"}});
  check(generate_lines("{\"prompt\": \"hi\", \"seed\": [[[]]]}"), {1, {"prompts.jsonl:3: \"seed\"", "got an array"}});
}
BOOST_AUTO_TEST_CASE(bad_settings) {
  check(generate_lines("{\"prompt\": \"hi\", \"max_tokens\": 0}"),
        {1, {"prompts.jsonl:3: \"max_tokens\" must be a whole number from 1 to 1073741824, got 0"}});
  check(generate_lines("{\"prompt\": \"hi\", \"max_tokens\": 2.5}"), {1, {"prompts.jsonl:3: \"max_tokens\"", "2.5"}});
  check(generate_lines("{\"prompt\": \"hi\", \"seed\": -1}"), {1, {"prompts.jsonl:3: \"seed\"", "got -1"}});
  check(generate_lines("{\"prompt\": \"hi\", \"seed\": \"7\"}"), {1, {"prompts.jsonl:3: \"seed\"", "got \"7\""}});
}
BOOST_AUTO_TEST_CASE(no_prompts) {
  write_text(dir / "blank.jsonl", "\n  \n\r\n");
  check(run_cli({"generate", "--config", fixture_with("", ""), "--prompt-file", (dir / "blank.jsonl").string()}),
        {1, {"blank.jsonl: no prompts"}});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(device_and_usage, Rows)

BOOST_AUTO_TEST_CASE(device_index_does_not_exist) {
  check(run_cli({"forward", "--device", "99", "--config", fixture_with("", ""), "--ids", "1", "--out",
                 (dir / "o.npy").string()}),
        {2, {"--device 99 does not exist"}});
}
BOOST_AUTO_TEST_CASE(model_does_not_fit_device_memory) {
  // GPT-2 XL's shape widened 8x: ~350 GiB of f32 weights, more than any GPU or host here.
  // No weights file, so bench would fill random weights; the size check comes first.
  auto cfg = config(
      "[model]\nname = \"huge\"\nvocab_size = 50257\ncontext_length = 1024\nemb_dim = 12800\nn_heads = 50\n"
      "n_layers = 48\n\n[weights]\nfile = \"absent.safetensors\"\ndtype = \"f32\"\n");
  CliResult r = run_cli({"bench", "--config", cfg, "--prompt-tokens", "4", "--gen-tokens", "1"});
  check(r, {1, {"model needs ", " MiB of device memory, device has ", " MiB"}, 2});
}
// bench fills random weights when neither --weights nor the config's file exists (the
// contract); a missing --weights beside a config file that exists is bad input. The run's
// lengths and repeats in llama-bench's spellings (-p, -n, -r).
BOOST_AUTO_TEST_CASE(bench_random_weights_only_when_no_weights_file_exists) {
  auto cfg = config("[model]\nname = \"tiny\"\nvocab_size = 64\ncontext_length = 32\nemb_dim = 32\nn_heads = 2\n"
                    "n_layers = 1\n\n[weights]\nfile = \"absent.safetensors\"\n");
  const std::vector<std::string> run = {"-p", "4", "-n", "1", "-r", "1"};
  auto bench = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "bench");
    args.insert(args.end(), run.begin(), run.end());
    return run_cli(args);
  };
  CliResult r = bench({"--config", cfg, "--weights", (dir / "also-absent.safetensors").string()});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("using deterministic random weights") != std::string::npos, r.err);
  BOOST_TEST(r.out.find("prefill_tok_s=") != std::string::npos);
  BOOST_TEST(r.err.find("prefill 4 tokens: median") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("over 1 runs\ndecode 1 tokens at depth 4") != std::string::npos, r.err);
  check(bench({"--config", fixture_with("", ""), "--weights", (dir / "absent.safetensors").string()}),
        {1, {"absent.safetensors", "not found"}});
}
// A vocabulary past what a CPU device's sampler takes (1024 tokens an invocation, its widest
// workgroup) is refused before the weights: bench says so without filling random ones first.
// A GPU's sampler takes any vocabulary the config allows; there the bench runs.
BOOST_AUTO_TEST_CASE(bench_refuses_a_vocabulary_too_large_for_the_sampler_before_the_weights) {
  auto cfg = config("[model]\nname = \"wide\"\nvocab_size = 16777215\ncontext_length = 8\nemb_dim = 8\n"
                    "n_heads = 1\nn_layers = 1\n\n[weights]\nfile = \"absent.safetensors\"\n");
  CliResult r = run_cli({"bench", "--config", cfg, "--prompt-tokens", "1", "--gen-tokens", "1", "--repeats", "1"});
  if (r.exit_code == 0) {
    BOOST_TEST_MESSAGE("this device's sampler takes 16777215 tokens: nothing to refuse");
    BOOST_TEST(r.out.find("decode_tok_s=") != std::string::npos);
    return;
  }
  check(r, {1, {"a vocabulary of 16777215 is too large for the sampler on this CPU device"}});
  BOOST_TEST(r.err.find("random weights") == std::string::npos, r.err);
}
BOOST_AUTO_TEST_CASE(unknown_flag) {
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", (dir / "o.npy").string(),
                 "--idz", "1"}),
        {2, {"--idz"}});
}
BOOST_AUTO_TEST_CASE(missing_required_flag) {
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1"}), {2, {"--out"}});
}
// CLI11 words both as "A subcommand is required" (cli/main.cpp names 'train', '--bogus').
BOOST_AUTO_TEST_CASE(unknown_command) {
  check(run_cli({"train"}), {2, {"unknown command 'train'", "generate"}});
  check(run_cli({"tr\x1b]0;x\aain"}), {2, {"unknown command 'tr\\x1B]0;x\\x07ain'"}});
  check(run_cli({"--temperature", "0", "generate"}), {2, {"unknown option '--temperature' before the command"}});
}
BOOST_AUTO_TEST_CASE(no_command) { check(run_cli({}), {2, {"subcommand"}}); }
BOOST_AUTO_TEST_CASE(bad_forced_limits) {
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", (dir / "o.npy").string()},
                {"GPTVK_FORCE=max_range=lots"}),
        {2, {"GPTVK_FORCE"}});
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", (dir / "o.npy").string()},
                {"GPTVK_FORCE=matvec=diagonal"}),
        {2, {"GPTVK_FORCE", "matvec", "'rows' or 'cols'", "diagonal"}});
  // A switch takes no value: "no_fp16=0" must not read as turning it on.
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", (dir / "o.npy").string()},
                {"GPTVK_FORCE=no_fp16=0"}),
        {2, {"GPTVK_FORCE: no_fp16 takes no value ('no_fp16=0')"}});
  // Experiments that are not in the build (bench/PERFORMANCE.md describes them) are unknown limits.
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", (dir / "o.npy").string()},
                {"GPTVK_FORCE=chain"}),
        {2, {"GPTVK_FORCE", "unknown limit 'chain'"}});
}
BOOST_AUTO_TEST_CASE(output_not_writable) {
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out",
                 (dir / "no/such/dir/o.npy").string()}),
        {1, {"cannot write", "o.npy", "No such file or directory"}});
}
// An empty path (-m "$MODEL" with the variable unset) is refused, not read as "no flag",
// which ran the bundled model or the config's own weights.
BOOST_AUTO_TEST_CASE(empty_model_paths) {
  const std::string out = (dir / "o.npy").string();
  check(run_cli({"forward", "-m", "", "--ids", "1", "--out", out}), {2, {"--model: empty path"}});
  check(run_cli({"forward", "--config", "", "--ids", "1", "--out", out}), {2, {"--config: empty path"}});
  check(run_cli({"forward", "--config", fixture_with("", ""), "--weights", "", "--ids", "1", "--out", out}),
        {2, {"--weights: empty path"}});
  check(run_cli({"tokenize", "--model", "", "--text", "hi"}), {2, {"--model: empty path"}});
  BOOST_TEST(!fs::exists(out));
}
BOOST_AUTO_TEST_CASE(text_file_missing) {
  check(run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", (dir / "absent.txt").string()}),
        {1, {"absent.txt"}});
}

BOOST_AUTO_TEST_SUITE_END()

// The harness itself must be able to fail: a good run succeeds with nothing on stderr.
BOOST_FIXTURE_TEST_CASE(good_input_runs_clean, Rows) {
  // Not a matrix row: the first run may compile every pipeline (no cache yet), so 120 s.
  CliResult r = run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1,2,3", "--out",
                         (dir / "out.npy").string()},
                        {}, 120.0);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.err.find("validation:") == std::string::npos);
  BOOST_TEST(fs::file_size(dir / "out.npy") > 3u * 311u * 4u);
}
