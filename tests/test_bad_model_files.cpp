// The files people have, broken, as rows of the bad-input matrix (tests/support/cli_matrix.hpp):
// GGUF files with truncated, lying or unsupported headers, torch.save files that would run
// code or are cut short, snapshot folders with broken config.json, missing or inconsistent
// shards, links and loops, and flags that cannot go together. Each row: the exit code and
// one line naming the file and the cause. The same formats intact: tests/test_model_files.cpp.
#include <tuple>

#include "models/npy.hpp"
#include "models/safetensors.hpp"
#include "tests/support/cli_matrix.hpp"
#include "tests/support/hf_snapshot.hpp"
#include "tests/support/safetensors_writer.hpp"

using namespace gptvk;
using namespace gptvk::test::matrix;
using gptvk::test::hf_gpt2_json, gptvk::test::snapshot;

namespace {

const fs::path kModels = kSource / "tests/fixtures/models";
const fs::path kFormats = kSource / "tests/fixtures/formats";
const fs::path kGguf = kSource / "tests/fixtures/gguf";

// matrix::Rows (a fresh folder) and the GGUF fixture, edited by the rows.
struct FileRows : Rows {
  std::string gguf = read_text(kGguf / "small-Q8_0.gguf");

  CliResult forward_model(const std::string& model) {
    return run_cli({"forward", "-m", model, "--ids", "1,2", "--out", (dir / "o.npy").string()});
  }
  CliResult forward_config(const std::string& config) {
    return run_cli({"forward", "--config", config, "--ids", "1,2", "--out", (dir / "o.npy").string()});
  }
  // The GGUF with `from` replaced by `to` (the first time it appears), as a file.
  std::string gguf_with(const std::string& from, const std::string& to) {
    std::string b = gguf;
    size_t at = b.find(from);
    BOOST_REQUIRE(at != std::string::npos);
    b.replace(at, from.size(), to);
    return dir.write("bad.gguf", b);
  }
  // The GGUF with the little-endian integer of `n` bytes at `at` set to `v`.
  std::string gguf_poke(size_t at, uint64_t v, int n) {
    std::string b = gguf;
    for (int i = 0; i < n; ++i) b[at + size_t(i)] = char((v >> (8 * i)) & 0xFF);
    return dir.write("bad.gguf", b);
  }
  // Byte offset of the tensor entry of `name` (after its name: n_dims, ne, type, offset).
  size_t tensor_entry(const std::string& name) {
    std::string key(8, '\0');
    key[0] = char(name.size());
    size_t at = gguf.rfind(key + name);  // the directory comes after the metadata
    BOOST_REQUIRE(at != std::string::npos);
    return at + 8 + name.size();
  }
  static std::string le64(uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
    return s;
  }
};

// A tokenizer.json of GPT-2's pipeline over a 3-token vocabulary (fine for the pipeline
// checks; a byte-level vocabulary needs all 256 bytes to load).
const nlohmann::json kByteLevel = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
const nlohmann::json kSmallTokenizerJson = {
    {"normalizer", nullptr}, {"pre_tokenizer", kByteLevel}, {"post_processor", nullptr}, {"decoder", kByteLevel},
    {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}}};
using Ptr = nlohmann::json::json_pointer;

// kSmallTokenizerJson with `value` at `at`, as the folder's tokenizer.json.
void write_tokenizer_json(const test::TempDir& dir, const Ptr& at, const nlohmann::json& value) {
  nlohmann::json t = kSmallTokenizerJson;
  t[at] = value;
  dir.write("tokenizer.json", t.dump());
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(bad_gguf, FileRows)
BOOST_AUTO_TEST_CASE(truncated) {
  check(forward_model(dir.write("t.gguf", gguf.substr(0, gguf.size() / 2))), {1, {"t.gguf", "truncated"}});
  check(forward_model(dir.write("h.gguf", gguf.substr(0, 100))), {1, {"h.gguf", "metadata count 17", "truncated"}});
}
BOOST_AUTO_TEST_CASE(lying_counts) {
  check(forward_model(gguf_poke(8, uint64_t(1) << 40, 8)), {1, {"bad.gguf", "tensor count"}});
  check(forward_model(gguf_poke(16, uint64_t(1) << 40, 8)), {1, {"bad.gguf", "metadata count"}});
  check(forward_model(gguf_poke(24, uint64_t(1) << 50, 8)), {1, {"bad.gguf", "runs past the end of the file"}});
  // One tensor too few: the last entry's first bytes would be taken for padding, and every
  // tensor read from 32 bytes too early.
  uint64_t tensors = 0;
  for (int i = 7; i >= 0; --i) tensors = tensors << 8 | uint8_t(gguf[8 + size_t(i)]);
  check(forward_model(gguf_poke(8, tensors - 1, 8)),
        {1, {"bad.gguf", "in the padding before the tensor data, is not zero", "a lying tensor or metadata count"}});
}
BOOST_AUTO_TEST_CASE(versions) {
  check(forward_model(gguf_poke(4, 1, 4)), {1, {"bad.gguf", "version 1 is not supported"}});
  check(forward_model(gguf_poke(4, 7, 4)), {1, {"bad.gguf", "version 7 is not supported"}});
  check(forward_model(gguf_poke(4, 0x03000000, 4)), {1, {"bad.gguf", "big-endian"}});
}
BOOST_AUTO_TEST_CASE(misaligned_offset) {
  size_t e = tensor_entry("token_embd.weight");
  check(forward_model(gguf_poke(e + 4 + 16 + 4, 33, 8)), {1, {"token_embd.weight", "not a multiple of the alignment 32"}});
}
BOOST_AUTO_TEST_CASE(unknown_and_unsupported_types) {
  size_t e = tensor_entry("token_embd.weight");
  check(forward_model(gguf_poke(e + 4 + 16, 99, 4)), {1, {"token_embd.weight", "unknown tensor type 99"}});
  check(forward_model(gguf_poke(e + 4 + 16, 16, 4)),
        {1, {"token_embd.weight", "has type IQ2_XXS", "Q2_K to Q6_K, IQ4_NL and IQ4_XS"}});
}
BOOST_AUTO_TEST_CASE(duplicate_tensor_names) {
  check(forward_model(gguf_with(le64(19) + "blk.1.attn_qkv.bias", le64(19) + "blk.0.attn_qkv.bias")),
        {1, {"bad.gguf", "tensor 'blk.0.attn_qkv.bias' appears twice"}});
}
BOOST_AUTO_TEST_CASE(other_architecture_and_missing_keys) {
  check(forward_model(gguf_with(le64(4) + "gpt2", le64(4) + "bert")),
        {1, {"bad.gguf", "architecture 'bert' is not supported"}});
  // A NUL in a file's text is shown escaped, with the rest of the message after it.
  check(forward_model(gguf_with(le64(4) + "gpt2", le64(4) + std::string("gp\0" "2", 4))),
        {1, {"bad.gguf", "architecture 'gp\\x002' is not supported (gpt-vk runs 'gpt2')"}});
  check(forward_model(gguf_with("gpt2.block_count", "gpt2.block_xount")),
        {1, {"bad.gguf", "missing metadata key gpt2.block_count"}});
  check(forward_model(gguf_with("output_norm.bias", "output_xorm.bias")),
        {1, {"bad.gguf", "holds tensor 'output_xorm.bias', which the gpt2 architecture does not read"}});
  // Past block_count too: only a layer's own tensors are left to the layer-count check.
  check(forward_model(gguf_with("output_norm.bias", "blk.7.foo_n.bias")),
        {1, {"bad.gguf", "holds tensor 'blk.7.foo_n.bias', which the gpt2 architecture does not read"}});
}
// Metadata that would make the file another model than the one run: a head_count_kv below
// head_count (grouped-query attention; general.quantization_version, the same length and
// type, renamed), and another pre-tokenizer than GPT-2's, whose ids the text commands would
// not give (the model itself still runs on ids), unless llama.cpp splits its text as GPT-2.
BOOST_AUTO_TEST_CASE(metadata_of_another_model) {
  std::string b = gguf;
  const size_t at = b.find("general.quantization_version");
  BOOST_REQUIRE(at != std::string::npos);
  BOOST_REQUIRE((b[at + 28] == 4 && b[at + 32] == 2));  // u32 2, as head_count
  b.replace(at, 28, "gpt2.attention.head_count_kv");
  BOOST_TEST(forward_model(dir.write("same.gguf", b)).exit_code == 0);
  b[at + 32] = 1;
  check(forward_model(dir.write("bad.gguf", b)),
        {1, {"bad.gguf: metadata gpt2.attention.head_count_kv: differs from gpt2.attention.head_count (2)"}});
  const std::string pre = gguf_with(le64(5) + "gpt-2", le64(5) + "llama");
  BOOST_TEST(forward_model(pre).exit_code == 0);
  check(run_cli({"tokenize", "-m", pre, "--text", "a 123"}),
        {1, {"bad.gguf: tokenizer.ggml.pre is 'llama', not GPT-2's pre-tokenizer"}});
  // A name llama.cpp runs with GPT-2's split (phi-2, mellum, ...) tokenizes as gpt-2 does.
  const std::string text = "The year 12345, ok!? x+y=z";
  const CliResult as_gpt2 = run_cli({"tokenize", "-m", dir.write("gpt2.gguf", gguf), "--text", text});
  const CliResult as_phi2 = run_cli({"tokenize", "-m", gguf_with(le64(5) + "gpt-2", le64(5) + "phi-2"), "--text", text});
  BOOST_TEST(as_gpt2.exit_code == 0);
  BOOST_TEST(as_phi2.exit_code == 0);
  BOOST_TEST(as_phi2.out == as_gpt2.out);
}
// Tensors whose bytes overlap (position_embd at token_embd's offset) are refused, as in
// safetensors: the header lies about one of them.
BOOST_AUTO_TEST_CASE(overlapping_tensors) {
  const size_t tok = tensor_entry("token_embd.weight") + 4 + 16 + 4;
  uint64_t offset = 0;
  for (int i = 7; i >= 0; --i) offset = offset << 8 | uint8_t(gguf[tok + size_t(i)]);
  const std::string bad = gguf_poke(tensor_entry("position_embd.weight") + 4 + 16 + 4, offset, 8);
  check(forward_model(bad), {1, {"bad.gguf", "overlaps tensor", "token_embd.weight", "position_embd.weight"}});
}
// A block_count below the file's layers would run a shallower model (llama.cpp refuses it).
BOOST_AUTO_TEST_CASE(block_count_below_the_files_layers) {
  const size_t at = gguf.find("gpt2.block_count") + 16;
  BOOST_REQUIRE(gguf.substr(at, 8) == std::string("\x04\0\0\0\x02\0\0\0", 8));  // u32 2
  check(forward_model(gguf_poke(at + 4, 1, 4)),
        {1, {"bad.gguf", "holds tensor 'blk.1.", "of layer 1, but the model declares 1 layer"}});
}
// A block_count past what the file's tensors can hold is refused before any per-layer work
// (2^24 layers took 1.3 s of tensor lookups in a release build before failing on a missing
// bias, over 10 s under the fuzzer's sanitizers).
BOOST_AUTO_TEST_CASE(block_count_past_the_files_tensors) {
  const size_t at = gguf.find("gpt2.block_count") + 16;
  check(forward_model(gguf_poke(at + 4, uint64_t(1) << 24, 4)),
        {1, {"bad.gguf: metadata gpt2.block_count: 16777216 layers need at least 134217730 tensors, and the file "
             "holds "}});
}
// Messages that name the cause: a 0 dimension is no question of type, and a GGUF without
// a tokenizer has no [tokenizer] section to speak of.
BOOST_AUTO_TEST_CASE(zero_dimension_and_no_tokenizer) {
  check(forward_model(gguf_poke(tensor_entry("output_norm.bias") + 4, 0, 8)),
        {1, {"tensor 'output_norm.bias' has shape [0]: no values"}});
  check(run_cli({"tokenize", "-m", gguf_with("tokenizer.ggml.model", "tokenizer.ggml.modex"), "--text", "hi"}),
        {1, {"bad.gguf: no tokenizer in the file (metadata key tokenizer.ggml.model)"}});
}
BOOST_AUTO_TEST_CASE(shape_disagrees_with_metadata) {
  size_t e = tensor_entry("position_embd.weight");
  check(forward_model(gguf_poke(e + 4 + 8, 72, 8)), {1, {"position_embd.weight", "has shape [72, 64]", "[73, 64]"}});
}
// A token table with its dims swapped is said as such, not as a tokenizer of more tokens
// than the table's rows (the tokenizer used to be read first).
// (F16: a Q8_0 table of 311 columns is refused first, for rows of whole blocks.)
BOOST_AUTO_TEST_CASE(token_table_with_swapped_dims) {
  gguf = read_text(kGguf / "small-F16.gguf");
  const size_t e = tensor_entry("token_embd.weight") + 4;  // past its dimension count
  std::string b = gguf;
  std::swap_ranges(b.begin() + long(e), b.begin() + long(e + 8), b.begin() + long(e + 8));
  check(forward_model(dir.write("bad.gguf", b)),
        {1, {"bad.gguf: token_embd.weight is [64][311], not [vocabulary][64] (gpt2.embedding_length)"}});
}
// Every inner array of an array of arrays names its key for its errors, so the key is quoted
// by its start (in full, a long key made reading such arrays quadratic): here an inner
// array of u8 that runs past the end of the file.
BOOST_AUTO_TEST_CASE(a_long_key_of_nested_arrays) {
  auto le32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const std::string key(100000, 'k');
  const std::string file = "GGUF" + le32(3) + le64(0) + le64(1) + le64(key.size()) + key + le32(9) + le32(9) +
                           le64(1) + le32(0) + le64(100);  // one array of arrays, holding 100 u8 (none there)
  check(forward_model(dir.write("k.gguf", file)),
        {1, {"k.gguf", "the value of 'kkkkkkkk",
             "(100000 bytes)': array of 100 elements runs past the end of the file"}});
}
BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bad_torch_files, FileRows)
BOOST_AUTO_TEST_CASE(pickle_naming_os_system_is_refused_not_run) {
  fs::remove("/tmp/gptvk-pwned");
  check(forward_config((kFormats / "torch/evil_os_system.toml").string()),
        {1, {"evil_os_system.pt", "refused global 'posix.system'"}});
  check(forward_config((kFormats / "torch/evil_eval.toml").string()),
        {1, {"evil_eval.pt", "refused global '__builtin__.eval'"}});
  check(forward_config((kFormats / "torch/evil_legacy.toml").string()),
        {1, {"evil_legacy.pt: object (the pickle at byte 137): refused global 'posix.system'"}});
  BOOST_TEST(!fs::exists("/tmp/gptvk-pwned"));
}
BOOST_AUTO_TEST_CASE(truncated_zip) {
  std::string pt = read_text(kFormats / "torch/gpt2_f16.pt");
  std::string toml = read_text(kFormats / "torch/gpt2_f16.toml");
  dir.write("gpt2_f16.pt", pt.substr(0, pt.size() - 100));
  check(forward_config(dir.write("c.toml", toml)), {1, {"gpt2_f16.pt", "no zip end-of-central-directory record: truncated"}});
  dir.write("gpt2_f16.pt", pt.substr(0, pt.size() / 2) + pt.substr(pt.size() - 2000));  // directory intact, data cut
  check(forward_config(dir.write("c.toml", toml)), {1, {"gpt2_f16.pt", "truncated"}});
  // A zip with no entries is its end record alone: still a zip, not a damaged safetensors.
  dir.write("gpt2_f16.pt", std::string("PK\x05\x06", 4) + std::string(18, '\0'));
  check(forward_config(dir.write("c.toml", toml)), {1, {"gpt2_f16.pt", "a zip archive without", "data.pkl"}});
}
// A pickle that torch.save did not write (no magic number) is named as what it is.
BOOST_AUTO_TEST_CASE(a_pickle_not_from_torch_save) {
  const std::string pickle("\x80\x02}q\x00(X\x01\x00\x00\x00" "aK\x01u.", 16);  // {"a": 1}
  check(run_cli({"forward", "--config", (kModels / "hf_gpt2/config.toml").string(), "--weights",
                 dir.write("dict.pkl", pickle), "--ids", "1", "--out", (dir / "o.npy").string()}),
        {1, {"dict.pkl", "not safetensors, GGUF or a torch.save file", "starts with bytes 80 02",
             "a Python pickle, but not one torch.save writes"}});
}
// Files torch.load reads but gpt-vk does not, and one torch.load refuses: each said as such.
BOOST_AUTO_TEST_CASE(legacy_protocol_1_and_two_archives) {
  auto forward_weights = [&](const std::string& file) {
    return run_cli({"forward", "--config", (kModels / "hf_gpt2/config.toml").string(), "--weights",
                    (kFormats / "torch" / file).string(), "--ids", "1", "--out", (dir / "o.npy").string()});
  };
  check(forward_weights("legacy_protocol1.pt"),
        {1, {"legacy_protocol1.pt", "starts with bytes 4c 31 31 39",
             "a torch.save file of the legacy format at pickle protocol 0 or 1, which gpt-vk does not read"}});
  check(forward_weights("two_archives.pt"),
        {1, {"two_archives.pt: holds two torch.save archives (a/data.pkl and z/data.pkl)"}});
}
BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bad_snapshots_and_flags, FileRows)
BOOST_AUTO_TEST_CASE(unknown_formats_say_what_they_look_like) {
  check(forward_model((kSource / "README.md").string()),
        {1, {"README.md", "not GGUF, a Hugging Face snapshot folder or a TOML config", "starts with bytes 23 20"}});
  check(run_cli({"forward", "--config", (kModels / "hf_gpt2/config.toml").string(), "--weights",
                 dir.write("page.bin", "<!DOCTYPE html><html>Not Found</html>"), "--ids", "1", "--out",
                 (dir / "o.npy").string()}),
        {1, {"page.bin", "not safetensors, GGUF or a torch.save file", "HTML"}});
  for (const std::string config : {dir.write("settings.toml", "[model]\nname = \"x\"\n"),
                                   (kSource / "configs/gpt2-small.toml").string()})  // opens with comments
    check(run_cli({"forward", "--config", (kModels / "hf_gpt2/config.toml").string(), "--weights", config, "--ids", "1",
                   "--out", (dir / "o.npy").string()}),
          {1, {".toml", "TOML text: a config? give it as --config"}});
  check(forward_model((dir / "absent.gguf").string()), {1, {"absent.gguf", "not found"}});
  check(forward_model(dir.path.string()), {1, {"without config.json"}});
}
BOOST_AUTO_TEST_CASE(bad_config_json) {
  dir.write("config.json", "{\"model_type\": \"gpt2\",");
  check(forward_model(dir.path.string()), {1, {"config.json", "malformed JSON"}});
  dir.write("config.json", "{\"model_type\": \"llama\"}");
  check(forward_model(dir.path.string()), {1, {"config.json", "model_type", "\"llama\" is not supported"}});
  // Copying such a document (nlohmann::json recurses) overflowed the stack: a segfault.
  dir.write("config.json", "{\"model_type\": \"gpt2\", \"x\": " + std::string(300000, '[') + std::string(300000, ']') + "}");
  check(forward_model(dir.path.string()), {1, {"config.json: the JSON nests deeper than 100 levels"}});
  dir.write("config.json", std::string("{\"model_type\": \"gpt2\\u0000x\"}"));  // the message went on past a NUL
  check(forward_model(dir.path.string()), {1, {"model_type: \"gpt2\\u0000x\" is not supported (gpt2 or openai-gpt)"}});
  auto j = hf_gpt2_json();
  j["n_head"] = 3;
  dir.write("config.json", j.dump());
  check(forward_model(dir.path.string()), {1, {"config.json", "n_head", "does not divide"}});
  j["n_head"] = 1;
  j["n_embd"] = 1024;
  dir.write("config.json", j.dump());
  check(forward_model(dir.path.string()), {1, {"config.json", "n_head", "head dim", "1024", "512"}});
  j = hf_gpt2_json();
  j["activation_function"] = "swish";
  dir.write("config.json", j.dump());
  check(forward_model(dir.path.string()), {1, {"activation_function", "'swish' is not supported"}});
  for (auto [key, value, why] : {std::tuple{"eos_token_id", nlohmann::json({5, -1}), "-1 is not a token id"},
                                 {"eos_token_id", nlohmann::json("</s>"), "\"</s>\" is not a token id"},
                                 {"bos_token_id", nlohmann::json(2.5), "2.5 is not a token id"},
                                 {"bos_token_id", nlohmann::json({1, 2}), "expected one token id"}}) {
    j = hf_gpt2_json();
    j[key] = value;
    dir.write("config.json", j.dump());
    check(forward_model(dir.path.string()), {1, {"config.json", std::string(key) + ": " + why}});
  }
}
BOOST_AUTO_TEST_CASE(snapshot_weights_missing_or_inconsistent) {
  dir.write("config.json", hf_gpt2_json().dump());
  check(forward_model(dir.path.string()), {1, {"no model.safetensors, pytorch_model.bin or their .index.json"}});
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "model-1.safetensors"}})");
  check(forward_model(dir.path.string()), {1, {"model.safetensors.index.json", "shard model-1.safetensors"}});
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "../x.safetensors"}})");
  check(forward_model(dir.path.string()), {1, {"is not a file in the folder"}});
  // A 100 KB name and file name are quoted in part.
  const std::string long_name(100000, 'w');
  dir.write("model.safetensors.index.json",
            nlohmann::json{{"weight_map", {{long_name, "../" + long_name}}}}.dump());
  const CliResult long_entry = forward_model(dir.path.string());
  check(long_entry,
        {1, {"weight_map['" + long_name.substr(0, 64) + "... (100000 bytes)'] = '../www", "is not a file"}});
  BOOST_TEST(long_entry.err.size() < 600u, long_entry.err.size());
  fs::copy_file(kModels / "hf_gpt2/model.safetensors", dir / "a.safetensors");
  fs::copy_file(kModels / "hf_gpt2/model.safetensors", dir / "b.safetensors");
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "a.safetensors", "wpe.weight": "b.safetensors"}})");
  check(forward_model(dir.path.string()), {1, {"is in two shards"}});
}
// A snapshot's tokenizer.json (alone, without vocab.json and merges.txt) whose pipeline is not
// GPT-2's or GPT-1's, or whose BPE model is malformed: the text commands name the part they
// cannot run, and forward --ids still runs.
BOOST_AUTO_TEST_CASE(tokenizer_json_that_gpt_vk_cannot_run) {
  snapshot(dir, hf_gpt2_json(), kModels / "hf_gpt2/model.safetensors");
  dir.write("tokenizer_config.json", R"({"add_prefix_space": true})");  // no tokenizer to apply it to
  check(run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"}),
        {1, {"config.json: no vocab.json + merges.txt or tokenizer.json beside it (needed to handle text)"}});
  fs::remove(dir / "tokenizer_config.json");
  for (auto [at, value, says] : std::vector<std::tuple<Ptr, nlohmann::json, std::string>>{
           {Ptr("/pre_tokenizer"), {{"type", "Metaspace"}}, "pre_tokenizer: Metaspace is not supported"},
           {Ptr("/pre_tokenizer/add_prefix_space"), true,
            "pre_tokenizer: ByteLevel without \"add_prefix_space\": false"},
           {Ptr("/pre_tokenizer/use_regex"), false, "pre_tokenizer: ByteLevel with \"use_regex\": false"},
           {Ptr("/normalizer"), {{"type", "NFC"}}, "normalizer: NFC is not supported"},
           {Ptr("/post_processor"), {{"type", "TemplateProcessing"}}, "post_processor: TemplateProcessing"},
           {Ptr("/decoder"), nullptr, "decoder: null is not supported"},
           {Ptr("/model/type"), "WordPiece", "model: WordPiece is not supported (BPE)"},
           {Ptr("/model/dropout"), 0.1, "model: dropout 0.1 is not supported"},
           {Ptr("/model/ignore_merges"), true, "model: ignore_merges true is not supported"},
           {Ptr("/model/vocab"), {{"a</w>", 0}, {"b", 1}}, "model.vocab is spelled as GPT-1's"},
           {Ptr("/model/merges/0"), {"a", "b", "c"}, "model.merges[0]: [\"a\",\"b\",\"c\"] is not a merge"},
           {Ptr("/model/merges/0"), "a  b", "model.merges[0]: \"a  b\" is not two tokens split by one space"},
           {Ptr("/model/merges/0"), {"a b", "c"},
            "model.merges[0]: [\"a b\",\"c\"] has a token that is empty or holds a space"},
           {Ptr("/model/merges"), "a b", "model.merges: expected an array"},
           {Ptr("/model/vocab"), nlohmann::json::array(), "model.vocab: expected an object"}}) {
    write_tokenizer_json(dir, at, value);
    check(run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"}), {1, {"tokenizer.json: " + says}});
  }
  const CliResult ids_only = forward_model(dir.path.string());
  BOOST_TEST(ids_only.exit_code == 0, ids_only.err);
  // The vocabulary's own errors name it where it is.
  write_tokenizer_json(dir, Ptr("/model/merges"), {"a b"});
  check(run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"}),
        {1, {"tokenizer.json (model.vocab): no token for the single byte 0x00"}});
  // An added token whose id the vocabulary gives to a token of bytes that are not UTF-8
  // (94 is the single byte 0xA1): named, not an internal error.
  nlohmann::json bytes_token = kSmallTokenizerJson;
  bytes_token["model"]["vocab"] = nlohmann::json::parse(read_text(kSource / "models/gpt2-tokenizer/encoder.json"));
  bytes_token["added_tokens"] = {{{"id", 94}, {"content", "foo"}}};
  dir.write("tokenizer.json", bytes_token.dump());
  check(run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"}),
        {1, {"tokenizer.json: added token \"foo\" has id 94, which model.vocab gives \"\xef\xbf\xbd\""}});
}

// Tokenizer files beside vocab.json + merges.txt that transformers would read and gpt-vk
// cannot follow, or that cannot be read: text is refused naming the file, ids still run.
BOOST_AUTO_TEST_CASE(tokenizer_files_beside_vocab_json) {
  snapshot(dir, hf_gpt2_json(), kModels / "hf_gpt2/model.safetensors");
  fs::copy_file(kSource / "models/gpt2-tokenizer/encoder.json", dir / "vocab.json");
  fs::copy_file(kSource / "models/gpt2-tokenizer/vocab.bpe", dir / "merges.txt");
  const auto refused = [&](const std::string& says) {
    check(run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"}), {1, {says}});
  };
  // transformers' fast tokenizer runs tokenizer.json's pipeline over these files.
  write_tokenizer_json(dir, Ptr("/pre_tokenizer"), {{"type", "Metaspace"}});
  refused("tokenizer.json: pre_tokenizer: Metaspace is not supported");
  dir.write("tokenizer.json", "{\"model\": ");
  refused("tokenizer.json: malformed JSON");
  // nlohmann's message quotes the token it last read: a 300 KB one is cut short.
  dir.write("tokenizer.json", "{\"normalizer\": \"" + std::string(300000, 'a') + "\\q\"}");
  const CliResult long_token = run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"});
  check(long_token, {1, {"tokenizer.json: malformed JSON: [json.exception.parse_error.101]", "bytes)"}});
  BOOST_TEST(long_token.err.size() < 1000u, long_token.err.size());
  fs::remove(dir / "tokenizer.json");
  // tokenizer_config.json's add_prefix_space true (transformers applies it over the files);
  // false and null leave the files to decide.
  for (const char* prefix : {"false", "null"}) {
    dir.write("tokenizer_config.json", std::string(R"({"add_prefix_space": )") + prefix + "}");
    const CliResult ok = run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"});
    BOOST_TEST((ok.exit_code == 0 && ok.out == "5303\n"), prefix << ": " << ok.err);
  }
  dir.write("tokenizer_config.json", R"({"add_prefix_space": true})");
  refused("tokenizer_config.json: add_prefix_space true is not supported");
  dir.write("tokenizer_config.json", R"({"add_bos_token": "yes"})");
  refused("tokenizer_config.json: add_bos_token \"yes\" is not true or false");
  dir.write("tokenizer_config.json", "{");
  refused("tokenizer_config.json: malformed JSON");
  const CliResult ids_still = forward_model(dir.path.string());
  BOOST_TEST(ids_still.exit_code == 0, ids_still.err);
}
// GPT-1's tokenizer.json with what its tokenizer here does not do: fused unknowns, an added
// token outside the vocabulary (transformers would match it whole), accents kept.
BOOST_AUTO_TEST_CASE(gpt1_tokenizer_json_that_gpt_vk_cannot_run) {
  dir.write("config.json", read_text(kFormats / "gpt1_snapshot/config.json"));
  fs::copy_file(kFormats / "gpt1_snapshot/model.safetensors", dir / "model.safetensors");
  const auto fixture = nlohmann::json::parse(read_text(kSource / "tests/fixtures/tokenizer/gpt1/tokenizer.json"));
  using Ptr = nlohmann::json::json_pointer;
  for (auto [at, value, says] : std::vector<std::tuple<Ptr, nlohmann::json, std::string>>{
           {Ptr("/model/fuse_unk"), true, "model: fuse_unk true is not supported"},
           {Ptr("/added_tokens/-"), {{"id", 400}, {"content", "xyzzy"}, {"special", false}},
            "added token {\"content\":\"xyzzy\",\"id\":400,\"special\":false} is not one of model.vocab's tokens"},
           {Ptr("/normalizer/strip_accents"), false, "normalizer: BertNormalizer with strip_accents false"}}) {
    nlohmann::json t = fixture;
    t[at] = value;
    dir.write("tokenizer.json", t.dump());
    check(run_cli({"tokenize", "-m", dir.path.string(), "--text", "say xyzzy"}), {1, {"tokenizer.json: " + says}});
  }
  dir.write("tokenizer.json", fixture.dump());  // the added "<unk>" is the vocabulary's own
  const CliResult ok = run_cli({"tokenize", "-m", dir.path.string(), "--text", "say"});
  BOOST_TEST(ok.exit_code == 0, ok.err);
}
// Weights under a prefix no reader strips (a Lightning module's "model."): the message shows
// the name the file has, so the prefix is plain to see.
BOOST_AUTO_TEST_CASE(weights_under_an_unknown_prefix) {
  SafetensorsFile f = SafetensorsFile::open((kModels / "hf_gpt2/model.safetensors").string());
  SafetensorsWriter w;
  for (const TensorInfo& t : f.tensors()) w.add("model." + t.name, t.dtype, t.shape, f.data(t).data());
  w.write((dir / "model.safetensors").string());
  dir.write("config.json", hf_gpt2_json().dump());
  check(forward_model(dir.path.string()),
        {1, {"tensor 'wte.weight' (or 'transformer.wte.weight') not found (the file has 'model.wte.weight'): not a "
             "weights file in the hf-gpt2 layout"}});
  SafetensorsWriter other;
  const std::vector<float> one{1.0f};
  other.add_f32("z.weight", DType::F32, {1}, one);
  other.add_f32("a.weight", DType::F32, {1}, one);
  other.write((dir / "model.safetensors").string());
  check(forward_model(dir.path.string()), {1, {"not found (the file has 'a.weight' among others): not a weights"}});
}
// Messages that name the cause: HF's own key for the context, a float out of range, and
// a model.safetensors link whose target is gone.
BOOST_AUTO_TEST_CASE(config_json_and_link_messages) {
  auto j = hf_gpt2_json();
  j.erase("n_positions");
  check(forward_model(snapshot(dir, j, kModels / "hf_gpt2/model.safetensors")), {1, {"missing key n_positions"}});
  j = hf_gpt2_json();
  j["layer_norm_epsilon"] = 1e300;
  check(forward_model(snapshot(dir, j, kModels / "hf_gpt2/model.safetensors")),
        {1, {"layer_norm_epsilon: 1e+300 is outside the range of a float"}});
  dir.write("config.json", hf_gpt2_json().dump());
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(dir / "gone.safetensors", dir / "model.safetensors");
  check(forward_model(dir.path.string()), {1, {"model.safetensors: cannot open", "No such file"}});
}
// Links and folders where files belong are said as such, not as an internal error, "not
// found" or a folder opened as a snapshot of its own; a huge n_layer is quoted as written.
BOOST_AUTO_TEST_CASE(loops_folders_and_huge_numbers) {
  const std::string folder = snapshot(dir, hf_gpt2_json(), kModels / "hf_gpt2/model.safetensors");
  fs::create_symlink("vocab.json", dir / "vocab.json");
  fs::copy_file(kSource / "models/gpt2-tokenizer/vocab.bpe", dir / "merges.txt");
  check(run_cli({"tokenize", "-m", folder, "--text", "hi"}), {1, {"vocab.json", "Too many levels of symbolic links"}});
  fs::remove(dir / "model.safetensors");
  fs::create_directory(dir / "model.safetensors");
  check(forward_model(folder), {1, {"model.safetensors: a folder, not a weights file"}});
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(".", dir / "loop");
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "loop"}})");
  check(forward_model(folder), {1, {"loop: a folder, not a weights file"}});
  auto j = hf_gpt2_json();
  j["n_layer"] = 18446744073709551615ull;
  dir.write("config.json", j.dump());
  check(forward_model(folder), {1, {"n_layer: 18446744073709551615 is out of range"}});
  fs::create_symlink("self.toml", dir / "self.toml");
  check(forward_model((dir / "self.toml").string()), {1, {"self.toml: Too many levels of symbolic links"}});
}
// A shard name with a NUL byte would open the name cut there: refused, the NUL shown.
BOOST_AUTO_TEST_CASE(shard_name_with_a_nul_byte) {
  dir.write("config.json", hf_gpt2_json().dump());
  fs::copy_file(kModels / "hf_gpt2/model.safetensors", dir / "a.safetensors");
  nlohmann::json map = nlohmann::json::object();
  const SafetensorsFile shard = SafetensorsFile::open((dir / "a.safetensors").string());
  for (const TensorInfo& t : shard.tensors()) map[t.name] = std::string("a.safetensors\0.txt", 18);
  dir.write("model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
  check(forward_model(dir.path.string()),
        {1, {"model.safetensors.index.json", "\"a.safetensors\\u0000.txt\" holds a NUL byte"}});
}
// n_layer below the file's layers is refused; the 2-layer file with its h.{i}.attn.bias
// masks (no layer role) loads with n_layer 2.
BOOST_AUTO_TEST_CASE(n_layer_below_the_files_layers) {
  auto j = hf_gpt2_json();
  j["n_layer"] = 1;
  check(forward_model(snapshot(dir, j, kModels / "hf_gpt2/model.safetensors")),
        {1, {"model.safetensors: holds tensor 'h.1.", "of layer 1, but the model declares 1 layer", "config.json"}});
  CliResult ok = forward_model(snapshot(dir, hf_gpt2_json(), kModels / "hf_gpt2/model.safetensors"));
  BOOST_TEST(ok.exit_code == 0, ok.err);
}
BOOST_AUTO_TEST_CASE(flag_combinations) {
  const std::string g = (kGguf / "small-Q8_0.gguf").string();
  const std::string c = (kModels / "hf_gpt2/config.toml").string();
  check(run_cli({"forward", "-m", g, "--config", c, "--ids", "1", "--out", (dir / "o.npy").string()}), {2, {"excludes"}});
  check(run_cli({"forward", "--config", c, "--dtype", "f16", "--ids", "1", "--out", (dir / "o.npy").string()}),
        {2, {"--dtype", "--model"}});
  for (const char* dt : {"q8_0", "q4_0"}) {  // 8 and 4-bit blocks on the device
    CliResult q = run_cli({"forward", "-m", g, "--dtype", dt, "--ids", "1", "--out", (dir / "o.npy").string()});
    BOOST_TEST(q.exit_code == 0, dt << ": " << q.err);
  }
  check(run_cli({"forward", "-m", g, "--dtype", "f8", "--ids", "1", "--out", (dir / "o.npy").string()}), {2, {"f8"}});
  // Without either flag a model command runs the bundled model (its vocabulary: 50257).
  CliResult bundled = run_cli({"forward", "--ids", "1", "--out", (dir / "bundled.npy").string()});
  BOOST_TEST(bundled.exit_code == 0, bundled.err);
  BOOST_TEST(read_npy((dir / "bundled.npy").string()).shape == (std::vector<uint64_t>{1, 50257}));
  // tokenize without either flag uses the bundled tokenizer (tests/test_tokenizer_cli.cpp); both is an error.
  check(run_cli({"tokenize", "-m", g, "--config", c, "--text", "hi"}), {2, {"excludes"}});
}

BOOST_AUTO_TEST_SUITE_END()
