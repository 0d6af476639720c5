// The files people have, other than gpt-vk's own TOML + safetensors: Hugging Face snapshot
// folders (gpt2 and openai-gpt, with and without the "transformer." prefix, sharded),
// torch.save files (tests/fixtures/formats, made by tools/make_format_fixtures.py with
// PyTorch), against PyTorch's logits; GPT-1's text commands; --model and --dtype. The same
// formats broken, as rows of the bad-input matrix: tests/test_bad_model_files.cpp.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <sstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "engine/error.hpp"
#include "engine/host_memory.hpp"
#include "engine/vk/context.hpp"
#include "models/gpt_model.hpp"
#include "models/model_path.hpp"
#include "models/npy.hpp"
#include "models/safetensors.hpp"
#include "models/torch_pickle.hpp"
#include "tests/support/safetensors_writer.hpp"
#include "models/tokenizer/id_list.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/weights.hpp"
#include "models/weights_source.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/hf_snapshot.hpp"
#include "tests/support/model_cases.hpp"
#include "tests/support/pickle_writer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using test::CliResult, test::run_cli, test::TempDir, test::hf_gpt2_json, test::snapshot;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = GPTVK_SOURCE_DIR;
const fs::path kModels = kSource / "tests/fixtures/models";
const fs::path kFormats = kSource / "tests/fixtures/formats";
const fs::path kGguf = kSource / "tests/fixtures/gguf";

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Max |logits - golden| / max |golden| of the model `cfg` over `ids`.
double error_against(const ModelConfig& cfg, const std::vector<uint32_t>& ids, const NpyArray& golden) {
  auto& ctx = test::context();
  GptModel model(ctx, cfg, load_weights(ctx, cfg));
  return test::rel_error(model.prefill(ids, 0, true), golden, 0, ids.size(), cfg.vocab_size);
}

// `file`'s tensors with `rename` applied to their names, into `out` (F32/F16/BF16 only).
void rewrite(const fs::path& file, const fs::path& out, const std::function<std::string(const std::string&)>& rename,
             const std::function<bool(const std::string&)>& keep = {}) {
  SafetensorsFile f = SafetensorsFile::open(file.string());
  SafetensorsWriter w;
  for (const TensorInfo& t : f.tensors())
    if (t.supported && (!keep || keep(t.name))) w.add(rename(t.name), t.dtype, t.shape, f.data(t).data());
  w.write(out.string());
}


// The merges of a merges.txt (its "#version" line left out), as tokenizer.json lists them:
// "A B" strings (tokenizers before 0.20) or ["A", "B"] pairs (0.20 on).
nlohmann::json merges_list(const std::string& merges_txt, bool pairs) {
  nlohmann::json list = nlohmann::json::array();
  std::istringstream lines(merges_txt);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    if (pairs) list.push_back({line.substr(0, space), line.substr(space + 1)});
    else list.push_back(line);
  }
  return list;
}

// tokenizer.json as GPT2TokenizerFast saves it, over the bundled vocabulary.
nlohmann::json gpt2_tokenizer_json(bool pair_merges) {
  const auto byte_level = [](bool prefix) {
    return nlohmann::json{{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", true},
                          {"use_regex", true}};
  };
  nlohmann::json model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                          {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
                          {"byte_fallback", false}, {"ignore_merges", false}};
  model["vocab"] = nlohmann::json::parse(read_bytes(kSource / "models/gpt2-tokenizer/encoder.json"));
  model["merges"] = merges_list(read_bytes(kSource / "models/gpt2-tokenizer/vocab.bpe"), pair_merges);
  return {{"version", "1.0"},
          {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                             {"rstrip", false}, {"normalized", true}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level(false)},
          {"post_processor", byte_level(true)},
          {"decoder", byte_level(true)},
          {"model", model}};
}

// The bundled model as a snapshot folder whose tokenizer is `tokenizer_json` alone.
std::string bundled_snapshot(const TempDir& dir, const nlohmann::json& tokenizer_json) {
  const nlohmann::json config = {{"model_type", "gpt2"}, {"vocab_size", 50257}, {"n_positions", 256},
                                 {"n_embd", 128},        {"n_head", 4},         {"n_layer", 6}};
  dir.write("tokenizer.json", tokenizer_json.dump());
  return snapshot(dir, config, kSource / "models/default/model.safetensors");
}

Tokenizer tokenizer_of(const ModelConfig& cfg) {
  BOOST_TEST_REQUIRE(cfg.tokenizer_unsupported.empty(), cfg.tokenizer_unsupported);
  BOOST_TEST_REQUIRE(bool(cfg.tokenizer_vocab_json));
  return Tokenizer::from_text(cfg.tokenizer_vocab, *cfg.tokenizer_vocab_json, cfg.tokenizer_merges,
                              *cfg.tokenizer_merges_text, cfg.tokenizer_added);
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(model_files, test::NoValidationMessages)

// hf_gpt2's weights (no prefix, GPT2Model.save_pretrained) and hf_gpt2_prefixed_relu's
// (GPT2LMHeadModel: "transformer." keys and a tied lm_head.weight) as snapshot folders
// with config.json: PyTorch's logits within 1e-4 (f32 storage).
BOOST_AUTO_TEST_CASE(gpt2_snapshots_both_key_styles) {
  TempDir plain, prefixed;
  const test::Case a = test::load_case(kModels / "hf_gpt2");
  ModelConfig ca = model_config_for_path(snapshot(plain, hf_gpt2_json(), kModels / "hf_gpt2/model.safetensors"), DType::F32);
  BOOST_TEST(ca.ffn_dim == 256u);
  BOOST_TEST(error_against(ca, a.ids, a.logits) <= 1e-4);

  const test::Case b = test::load_case(kModels / "hf_gpt2_prefixed_relu");
  auto jb = hf_gpt2_json();
  jb.update({{"n_head", 1}, {"n_layer", 3}, {"n_positions", 67}, {"vocab_size", 293}, {"activation_function", "relu"}});
  ModelConfig cb = model_config_for_path(
      snapshot(prefixed, jb, kModels / "hf_gpt2_prefixed_relu/model.safetensors"), DType::F32);
  BOOST_TEST((cb.activation == Activation::Relu));
  BOOST_TEST(error_against(cb, b.ids, b.logits) <= 1e-4);
  // The same folder with GELU instead: the activation really comes from config.json.
  jb["activation_function"] = "gelu_new";
  prefixed.write("config.json", jb.dump());
  BOOST_TEST(error_against(model_config_for_path(prefixed.path.string(), DType::F32), b.ids, b.logits) > 1e-2);
}

// config.json's bos_token_id and eos_token_id (one id or a list, as transformers writes
// either) become the model's start and end ids; GPT-2's own config names 50256 for both.
BOOST_AUTO_TEST_CASE(snapshot_document_ids) {
  TempDir dir;
  auto j = hf_gpt2_json();
  ModelConfig none = model_config_for_path(snapshot(dir, j, kModels / "hf_gpt2/model.safetensors"), DType::F32);
  BOOST_TEST(!none.start_token_id.has_value());
  BOOST_TEST(none.end_token_ids.empty());
  j.update({{"bos_token_id", 3}, {"eos_token_id", {7, 5}}});
  dir.write("config.json", j.dump());
  ModelConfig listed = model_config_for_path(dir.path.string(), DType::F32);
  BOOST_TEST((listed.start_token_id == std::optional<uint32_t>(3)));
  BOOST_TEST(listed.end_token_ids == (std::vector<uint32_t>{7, 5}), boost::test_tools::per_element());
  j["eos_token_id"] = 310;
  dir.write("config.json", j.dump());
  BOOST_TEST(model_config_for_path(dir.path.string(), DType::F32).end_token_ids == std::vector<uint32_t>{310},
             boost::test_tools::per_element());
  // GPT2Config's defaults (50256) in a config of 311 tokens: ids the model cannot produce,
  // left out; the folder still runs.
  j.update({{"bos_token_id", 50256}, {"eos_token_id", {50256, 7}}});
  dir.write("config.json", j.dump());
  ModelConfig defaults = model_config_for_path(dir.path.string(), DType::F32);
  BOOST_TEST(!defaults.start_token_id.has_value());
  BOOST_TEST(defaults.end_token_ids == std::vector<uint32_t>{7}, boost::test_tools::per_element());
  CliResult r = run_cli({"forward", "-m", dir.path.string(), "--ids", "1,2", "--out", (dir / "o.npy").string()});
  BOOST_TEST(r.exit_code == 0, r.err);
}

// A snapshot's tokenizer.json added_tokens (six past vocab.json's ids, two overlapping, one
// with lstrip and one with rstrip): the ids Hugging Face's JavaScript tokenizers gives
// (tools/make_added_tokens_fixture.js), special tokens read with --special and left text
// without, and what it decodes them to. Of tokenizer.json only the pipeline (checked, as
// transformers' fast tokenizer runs it) and added_tokens are read, so the test writes those.
BOOST_AUTO_TEST_CASE(snapshot_added_tokens_as_hugging_face_reads_them) {
  std::ifstream in(kSource / "tests/fixtures/tokenizer/added_tokens.json");
  const auto fixture = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  TempDir dir;
  auto j = hf_gpt2_json();
  j["vocab_size"] = 50263;
  dir.write("config.json", j.dump());
  fs::copy_file(kSource / "models/gpt2-tokenizer/encoder.json", dir / "vocab.json");
  fs::copy_file(kSource / "models/gpt2-tokenizer/vocab.bpe", dir / "merges.txt");
  const auto byte_level = nlohmann::json{{"type", "ByteLevel"}, {"add_prefix_space", false}};
  const nlohmann::json pipeline = {
      {"normalizer", nullptr}, {"pre_tokenizer", byte_level}, {"decoder", byte_level}, {"model", {{"type", "BPE"}}}};
  const auto with_added = [&](const nlohmann::json& added) {
    nlohmann::json t = pipeline;
    t["added_tokens"] = added;
    return t.dump();
  };
  dir.write("tokenizer.json", with_added(fixture["added_tokens"]));
  for (const auto& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    std::vector<std::string> args = {"tokenize", "-m", dir.path.string(), "--text", text};
    if (c["special"].get<bool>()) args.push_back("--special");
    BOOST_TEST_CONTEXT(text << (c["special"].get<bool>() ? " (--special)" : "")) {
      CliResult r = run_cli(args);
      BOOST_TEST(r.exit_code == 0, r.err);
      std::string want;
      for (uint32_t id : c["ids"].get<std::vector<uint32_t>>()) want += (want.empty() ? "" : " ") + std::to_string(id);
      BOOST_TEST(r.out == want + "\n");
      CliResult d = run_cli({"detokenize", "-m", dir.path.string(), "--ids", want});
      BOOST_TEST(d.exit_code == 0, d.err);
      BOOST_TEST(d.out == c["decoded"].get<std::string>());
    }
  }
  // Added tokens that contradict vocab.json or each other are refused, naming both sides.
  for (auto [added, why] : {std::pair{R"({"id": 464, "content": "<|x|>"})",
                                      "added token \"<|x|>\" has id 464, which vocab.json gives \"The\""},
                            {R"({"id": 50257, "content": "The"})",
                             "added token \"The\" has id 50257, but vocab.json gives it id 464"},
                            {R"({"id": 50257, "content": "<a>"}, {"id": 50257, "content": "<b>"})",
                             "added_tokens give id 50257 to both \"<a>\" and \"<b>\""},
                            {R"({"id": 50257, "content": "<a>", "single_word": true})",
                             "added token \"<a>\": single_word is not supported"}}) {
    dir.write("tokenizer.json", with_added(nlohmann::json::parse(std::string("[") + added + "]")));
    CliResult bad = run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"});
    BOOST_TEST(bad.exit_code == 1);
    BOOST_TEST(bad.err.find(std::string("tokenizer.json: ") + why) != std::string::npos, bad.err);
  }
  // The matcher's cost grows with the longest added token: 257 bytes are refused, quoted by
  // their start.
  dir.write("tokenizer.json", with_added({{{"id", 50257}, {"content", std::string(257, 'a')}}}));
  CliResult bad = run_cli({"tokenize", "-m", dir.path.string(), "--text", "hi"});
  BOOST_TEST(bad.exit_code == 1);
  BOOST_TEST(bad.err.find("tokenizer.json: added token \"aaaa") != std::string::npos, bad.err);
  const std::string why = "aaaa\"... is 257 bytes long, more than the 256 this tokenizer matches";
  BOOST_TEST(bad.err.find(why) != std::string::npos, bad.err);
}

// pickle_protocol=1 writes INT's text where protocol 2 has BININT and NEWTRUE (requires_grad
// as "I01"): read as torch.load reads it, a Parameter's values included.
BOOST_AUTO_TEST_CASE(torch_save_at_pickle_protocol_1) {
  auto src = open_tensor_source((kFormats / "torch/protocol1.pt").string());
  for (const char* name : {"w", "p"}) {  // arange(12).view(3, 4), and a Parameter of it
    const TensorInfo& t = src->get(name);
    BOOST_TEST(t.shape_str() == "[3, 4]");
    std::vector<float> got(12);
    BOOST_REQUIRE(src->data(t).size() == got.size() * 4);
    std::memcpy(got.data(), src->data(t).data(), 48);
    std::vector<float> want(12);
    std::iota(want.begin(), want.end(), 0.f);
    BOOST_TEST(got == want, boost::test_tools::per_element());
  }
}

// model.safetensors.index.json over two shards.
BOOST_AUTO_TEST_CASE(sharded_snapshot) {
  TempDir dir;
  const test::Case a = test::load_case(kModels / "hf_gpt2");
  const fs::path src = kModels / "hf_gpt2/model.safetensors";
  auto first = [](const std::string& n) { return n.starts_with("h.0.") || n.starts_with("w"); };
  rewrite(src, dir / "model-00001-of-00002.safetensors", [](auto& n) { return n; }, first);
  rewrite(src, dir / "model-00002-of-00002.safetensors", [](auto& n) { return n; }, [&](auto& n) { return !first(n); });
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  const SafetensorsFile file = SafetensorsFile::open(src.string());
  for (const TensorInfo& t : file.tensors())
    if (t.supported)
      index["weight_map"][t.name] = first(t.name) ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  dir.write("model.safetensors.index.json", index.dump());
  dir.write("config.json", hf_gpt2_json().dump());
  BOOST_TEST(error_against(model_config_for_path(dir.path.string(), DType::F32), a.ids, a.logits) <= 1e-4);
}

// A snapshot whose weights are a torch.save pytorch_model.bin (older hub repositories), whole
// or as the shards of a pytorch_model.bin.index.json, and one in the legacy format (F16).
BOOST_AUTO_TEST_CASE(snapshot_with_pytorch_model_bin) {
  TempDir dir;
  const test::Case a = test::load_case(kModels / "hf_gpt2");
  dir.write("config.json", hf_gpt2_json().dump());
  fs::copy_file(kFormats / "torch/gpt2_lmhead_f32.pt", dir / "pytorch_model.bin");
  BOOST_TEST(error_against(model_config_for_path(dir.path.string(), DType::F32), a.ids, a.logits) <= 1e-4);
  fs::rename(dir / "pytorch_model.bin", dir / "pytorch_model-00001-of-00001.bin");
  dir.write("pytorch_model.bin.index.json", R"({"weight_map": {"transformer.wte.weight": "pytorch_model-00001-of-00001.bin"}})");
  BOOST_TEST(error_against(model_config_for_path(dir.path.string(), DType::F32), a.ids, a.logits) <= 1e-4);
  for (const char* shard : {"pytorch_model.bin.index.json", "pytorch_model-00001-of-00001.bin"}) fs::remove(dir / shard);
  fs::copy_file(kFormats / "torch/gpt2_lmhead_legacy.pt", dir / "pytorch_model.bin");
  BOOST_TEST(error_against(model_config_for_path(dir.path.string(), DType::F32), a.ids, a.logits) <= 4e-3);
}

// GPT-1 as OpenAIGPTLMHeadModel.save_pretrained writes it ("transformer." keys), the same
// without the prefix, and configs/gpt1.toml as shipped (its sizes shrunk to the fixture's)
// over the prefixed file (a shipped config must load what save_pretrained writes): PyTorch's
// logits within 1e-4.
BOOST_AUTO_TEST_CASE(gpt1_snapshot_and_custom_layout) {
  const fs::path d = kFormats / "gpt1_snapshot";
  const std::vector<uint32_t> ids = parse_id_list(read_bytes(d / "ids.txt"));
  const NpyArray golden = read_npy((d / "logits.npy").string());
  ModelConfig cfg = model_config_for_path(d.string(), DType::F32);
  BOOST_TEST((cfg.norm_position == NormPosition::Post && !cfg.final_norm && cfg.activation == Activation::GeluTanh));
  const double prefixed = error_against(cfg, ids, golden);
  BOOST_TEST_MESSAGE("gpt1 snapshot: max rel error " << prefixed);
  BOOST_TEST(prefixed <= 1e-4);

  TempDir plain;
  plain.write("config.json", read_bytes(d / "config.json"));
  rewrite(d / "model.safetensors", plain / "model.safetensors",
          [](const std::string& n) { return n.starts_with("transformer.") ? n.substr(12) : n; });
  BOOST_TEST(error_against(model_config_for_path(plain.path.string(), DType::F32), ids, golden) <= 1e-4);

  std::string toml = read_bytes(kSource / "configs/gpt1.toml");
  for (auto [from, to] : {std::pair<std::string, std::string>{"vocab_size = 40478", "vocab_size = 97"},
                          {"context_length = 512", "context_length = 40"}, {"emb_dim = 768", "emb_dim = 64"},
                          {"n_heads = 12", "n_heads = 2"}, {"n_layers = 12", "n_layers = 2"},
                          {"ffn_dim = 3072", "ffn_dim = 256"},
                          {"file = \"gpt1.safetensors\"", "file = \"" + (d / "model.safetensors").string() + "\""},
                          {"dtype = \"f16\"", "dtype = \"f32\""}}) {
    BOOST_REQUIRE(toml.find(from) != std::string::npos);
    toml.replace(toml.find(from), from.size(), to);
  }
  TempDir custom;
  BOOST_TEST(error_against(load_config(custom.write("gpt1.toml", toml)), ids, golden) <= 1e-4);

  // tie_word_embeddings false: lm_head.weight is the head. One that is minus the token
  // embedding gives minus PyTorch's logits (it was ignored for the tied table, silently).
  TempDir untied;
  nlohmann::json config = nlohmann::json::parse(read_bytes(d / "config.json"));
  config["tie_word_embeddings"] = false;
  untied.write("config.json", config.dump());
  SafetensorsFile f = SafetensorsFile::open((d / "model.safetensors").string());
  SafetensorsWriter w;
  for (const TensorInfo& t : f.tensors()) w.add(t.name, t.dtype, t.shape, f.data(t).data());
  const TensorInfo& table = f.get("transformer.tokens_embed.weight");
  BOOST_REQUIRE(table.dtype == DType::F32);
  std::vector<float> head(table.elements());
  std::memcpy(head.data(), f.data(table).data(), head.size() * 4);
  for (float& x : head) x = -x;
  w.add_f32("lm_head.weight", DType::F32, table.shape, head);
  w.write((untied / "model.safetensors").string());
  NpyArray negated = golden;
  for (float& x : negated.data) x = -x;
  BOOST_TEST(error_against(model_config_for_path(untied.path.string(), DType::F32), ids, negated) <= 1e-4);
}

// torch.save files of hf_gpt2's weights through a TOML's [weights] file: F32 within 1e-4
// of PyTorch's logits (noncontiguous.pt: its wte.weight saved as a column-major view, which
// torch.load reads too); F16 and BF16 within what rounding the weights costs (the same
// bounds as the GGUF F16/BF16 files of these weights, tests/test_gguf.cpp), also from a
// training checkpoint that wraps them (nanoGPT's ckpt.pt) and from the legacy (non-zip)
// format, as PyTorch before 1.6 wrote every file.
BOOST_AUTO_TEST_CASE(torch_save_files) {
  const test::Case a = test::load_case(kModels / "hf_gpt2");
  for (auto [name, tol] : {std::pair{"gpt2_lmhead_f32", 1e-4}, {"noncontiguous", 1e-4}, {"gpt2_f16", 4e-3},
                           {"checkpoint_f16", 4e-3}, {"gpt2_lmhead_legacy", 4e-3}, {"gpt2_bf16", 2e-2}}) {
    BOOST_TEST_CONTEXT(name) {
      const double err = error_against(load_config((kFormats / "torch" / (std::string(name) + ".toml")).string()),
                                       a.ids, a.logits);
      BOOST_TEST_MESSAGE(name << ": max rel error against PyTorch " << err);
      BOOST_TEST(err <= tol);
    }
  }
}

// The wrappers' prefixes on every name come off in either order and nesting: torch.compile
// of a DDP model saves "_orig_mod.module.", DDP of a compiled one "module._orig_mod."; a
// prefix only some names have stays.
BOOST_AUTO_TEST_CASE(torch_wrapper_prefixes_in_either_order) {
  auto names_of = [](const std::vector<std::string>& saved) {
    const std::string p = test::pickle::state_dict(saved);
    std::vector<std::string> names;
    for (const auto& [name, tensor] : read_state_dict_pickle("p.pt", std::as_bytes(std::span(p.data(), p.size()))))
      names.push_back(name);
    return names;
  };
  const std::vector<std::string> plain{"wte.weight", "h.0.ln_1.weight"};
  for (const std::string prefix : {"module.", "_orig_mod.", "_orig_mod.module.", "module._orig_mod.", "module.module."})
    BOOST_TEST(names_of({prefix + plain[0], prefix + plain[1]}) == plain, boost::test_tools::per_element());
  BOOST_TEST(names_of({"module.wte.weight", "h.0.ln_1.weight"}) ==
                 (std::vector<std::string>{"module.wte.weight", "h.0.ln_1.weight"}),
             boost::test_tools::per_element());
  BOOST_TEST(names_of({"_orig_mod.module.wte.weight", "_orig_mod.h.0.ln_1.weight"}) ==
                 (std::vector<std::string>{"module.wte.weight", "h.0.ln_1.weight"}),
             boost::test_tools::per_element());
}

// The CLI end to end: forward --model FOLDER, and a GGUF named by a TOML's [weights] file.
BOOST_AUTO_TEST_CASE(cli_model_flag_and_toml_naming_gguf) {
  TempDir dir;
  const test::Case a = test::load_case(kModels / "hf_gpt2");
  std::string ids;
  for (uint32_t id : a.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  std::string folder = snapshot(dir, hf_gpt2_json(), kModels / "hf_gpt2/model.safetensors");
  CliResult r = run_cli({"forward", "--model", folder, "--dtype", "f32", "--ids", ids, "--out", (dir / "a.npy").string()});
  BOOST_TEST(r.exit_code == 0, r.err);
  NpyArray got = read_npy((dir / "a.npy").string());
  BOOST_TEST(test::rel_error(got.data, a.logits, 0, a.ids.size(), 311) <= 1e-4);

  std::string toml = read_bytes(kModels / "hf_gpt2/config.toml");
  // The [weights] line, not the comment above that names the hub's file too.
  const std::string file_line = "file = \"model.safetensors\"";
  BOOST_REQUIRE(toml.find(file_line) != std::string::npos);
  toml.replace(toml.find(file_line), file_line.size(), "file = \"" + (kGguf / "small-F16.gguf").string() + "\"");
  r = run_cli({"forward", "--config", dir.write("gguf.toml", toml), "--ids", ids, "--out", (dir / "b.npy").string()});
  BOOST_TEST(r.exit_code == 0, r.err);
  got = read_npy((dir / "b.npy").string());
  BOOST_TEST(test::rel_error(got.data, a.logits, 0, a.ids.size(), 311) <= 4e-3);
  // A config that describes another model than the GGUF's metadata is refused, naming the
  // key: the heads, the LayerNorm epsilon and a tied head are in no tensor's shape, and ran
  // as the config said, silently.
  for (auto [from, to, says] : {std::tuple<std::string, std::string, std::string>{
                                    "n_heads = 2", "n_heads = 1", "model.n_heads is 1, but "},
                                {"n_layers = 2", "n_layers = 2\nnorm_eps = 0.001", "model.norm_eps is 0.001, but "},
                                {"n_layers = 2", "n_layers = 2\ntie_embeddings = false",
                                 "model.tie_embeddings is false, but "}}) {
    std::string edited = toml;
    BOOST_REQUIRE(edited.find(from) != std::string::npos);
    edited.replace(edited.find(from), from.size(), to);
    r = run_cli({"forward", "--config", dir.write("gguf.toml", edited), "--ids", ids, "--out", (dir / "b.npy").string()});
    BOOST_TEST(r.exit_code == 1, to);
    BOOST_TEST(r.err.find(says) != std::string::npos, r.err);
  }
}

// A CPU device's memory is the host's: GPT-2 large in f32 (2.9 GiB) is over the 2048 MiB
// heap lavapipe reports, and allocates when the host has the memory (lavapipe hands out
// pages as they are touched: allocating costs little). A model beyond the host's memory
// still gets "model needs X MiB of device memory, device has Y MiB".
BOOST_AUTO_TEST_CASE(cpu_device_heap_is_not_the_limit) {
  auto& ctx = test::context();
  if (!ctx.info().is_cpu()) {
    BOOST_TEST_MESSAGE("skipped: not a CPU device");
    return;
  }
  ModelConfig cfg = load_config((kSource / "configs/gpt2-large.toml").string());
  cfg.dtype = DType::F32;
  const uint64_t need = weights_device_bytes(cfg);
  BOOST_REQUIRE(need > ctx.caps().device_local_bytes);
  if (host_available_bytes() < need + (2ull << 30)) {
    BOOST_TEST_MESSAGE("skipped: the host has too little memory available");
    return;
  }
  ModelWeights w = allocate_weights(ctx, cfg);
  BOOST_TEST(w.device_bytes() >= need);
  cfg.emb_dim = 25600;  // ~ 1.5 TiB of weights
  cfg.n_heads = 25;
  cfg.ffn_dim = 4 * cfg.emb_dim;
  try {
    allocate_weights(ctx, cfg);
    BOOST_FAIL("a 1.5 TiB model was allocated");
  } catch (const DeviceError& e) {
    BOOST_TEST(std::string(e.what()).find("model needs ") != std::string::npos, e.what());
    BOOST_TEST(std::string(e.what()).find(" MiB of device memory, device has ") != std::string::npos, e.what());
  }
}

// GPT-1's own BPE (tests/test_tokenizer_gpt1.cpp) runs the text commands on a GPT-1
// snapshot: tokenize gives the references' ids (tools/make_gpt1_tokenizer_fixtures.js),
// greedy generate's first token is the argmax of forward's last row for those ids, a stop
// string typed in capitals stops it, and the echoed prompt gets the space its last word's
// "</w>" stands for.
BOOST_AUTO_TEST_CASE(gpt1_text_commands_run) {
  TempDir dir;
  const std::string gpt1 = (kFormats / "gpt1_snapshot").string();
  const auto want = nlohmann::json::parse(std::ifstream(kFormats / "gpt1_snapshot/text_ids.json"));
  const std::string text = want["text"];
  const auto ids = want["ids"].get<std::vector<uint32_t>>();
  CliResult tok = run_cli({"tokenize", "--model", gpt1, "--text", text});
  BOOST_TEST_REQUIRE(tok.exit_code == 0, tok.err);
  BOOST_TEST((parse_id_list(tok.out, "ids") == ids));

  std::string id_list;
  for (uint32_t id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
  CliResult fwd = run_cli({"forward", "-m", gpt1, "--ids", id_list, "--out", (dir / "o.npy").string()});
  BOOST_TEST_REQUIRE(fwd.exit_code == 0, fwd.err);
  const NpyArray logits = read_npy((dir / "o.npy").string());
  const size_t vocab = logits.shape.back();
  const auto last = logits.data.end() - std::ptrdiff_t(vocab);
  const uint32_t argmax = uint32_t(std::max_element(last, logits.data.end()) - last);

  CliResult gen = run_cli({"generate", "-m", gpt1, "--prompt", text, "--max-tokens", "3", "--temperature", "0", "--json"});
  BOOST_TEST_REQUIRE(gen.exit_code == 0, gen.err);
  const auto got = nlohmann::json::parse(gen.out);
  BOOST_TEST(got["prompt_tokens"] == ids.size());
  BOOST_TEST(got["tokens"][0] == argmax);
  // A stop string as typed (capitals, no word-end space) stops that continuation at once.
  std::string stop = got["text"];
  while (!stop.empty() && stop.back() == ' ') stop.pop_back();
  BOOST_TEST_REQUIRE(!stop.empty());
  std::transform(stop.begin(), stop.end(), stop.begin(), [](unsigned char c) { return std::toupper(c); });
  CliResult stopped = run_cli({"generate", "-m", gpt1, "--prompt", text, "--max-tokens", "3", "--temperature", "0",
                               "--stop", stop, "--json"});
  BOOST_TEST_REQUIRE(stopped.exit_code == 0, stopped.err);
  BOOST_TEST(nlohmann::json::parse(stopped.out)["finish_reason"] == "stop", stop << ": " << stopped.out);
  CliResult echo = run_cli({"generate", "-m", gpt1, "--prompt", "in the", "--max-tokens", "2", "--temperature", "0"});
  BOOST_TEST_REQUIRE(echo.exit_code == 0, echo.err);
  BOOST_TEST(echo.out.starts_with("in the "), echo.out);
}
// A snapshot whose tokenizer is tokenizer.json alone (PreTrainedTokenizerFast saves no
// vocab.json or merges.txt), in both spellings of its merges: the ids of Hugging Face's
// tokenizers for every text of tests/fixtures/tokenizer/cases.json, <|endoftext|> read as
// its token with --special, and the same greedy text as the bundled model's own config.
BOOST_AUTO_TEST_CASE(gpt2_snapshot_with_tokenizer_json_alone) {
  const auto cases = nlohmann::json::parse(read_bytes(kSource / "tests/fixtures/tokenizer/cases.json"));
  for (bool pairs : {false, true}) {
    TempDir dir;
    const std::string folder = bundled_snapshot(dir, gpt2_tokenizer_json(pairs));
    const Tokenizer tok = tokenizer_of(model_config_for_path(folder, DType::F32));
    for (const auto& c : cases["cases"])
      BOOST_TEST((tok.encode(c["text"].get<std::string>()) == c["ids"].get<std::vector<uint32_t>>()),
                 c["name"] << (pairs ? " (merge pairs)" : " (merge strings)"));
    BOOST_TEST((tok.encode("a<|endoftext|>b", true) == std::vector<uint32_t>{64, 50256, 65}));
    if (!pairs) continue;
    const std::vector<std::string> greedy = {"-p", "The old man said", "-n", "12", "--temperature", "0"};
    auto run = [&](std::vector<std::string> args) {
      args.insert(args.end(), greedy.begin(), greedy.end());
      CliResult r = run_cli(args);
      BOOST_TEST(r.exit_code == 0, r.err);
      return r.out;
    };
    const std::string want = run({"generate", "--config", (kSource / "models/default/config.toml").string()});
    BOOST_TEST(want.size() > std::string("The old man said").size() + 10);
    BOOST_TEST(run({"generate", "-m", folder}) == want);
  }
}

// tokenizer_config.json's add_bos_token true: transformers starts every text with the bos
// token, and so does gpt-vk (tokenize shows it; prompts and scored texts run from it).
BOOST_AUTO_TEST_CASE(snapshot_that_starts_every_text_with_bos) {
  TempDir dir;
  const std::string folder = bundled_snapshot(dir, gpt2_tokenizer_json(true));
  auto ids = [&] {
    CliResult r = run_cli({"tokenize", "-m", folder, "--text", "Hello world"});
    BOOST_TEST(r.exit_code == 0, r.err);
    return r.out;
  };
  BOOST_TEST(ids() == "15496 995\n");
  dir.write("tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<|endoftext|>"})");
  BOOST_TEST(ids() == "50256 15496 995\n");
  CliResult no_bos = run_cli({"tokenize", "-m", folder, "--text", "Hello world", "--no-bos"});
  BOOST_TEST(no_bos.out == "15496 995\n", no_bos.err);
}

// GPT-1's tokenizer.json as transformers' OpenAIGPTConverter writes it: the fixture's
// (tests/fixtures/tokenizer/gpt1) gives the reference ids of all its 325 texts, and the GPT-1
// snapshot with its vocabulary in such a file tokenizes as with vocab.json + merges.txt.
BOOST_AUTO_TEST_CASE(gpt1_snapshot_with_tokenizer_json_alone) {
  const fs::path fixture = kSource / "tests/fixtures/tokenizer/gpt1";
  const auto tokenizer_json = nlohmann::json::parse(read_bytes(fixture / "tokenizer.json"));
  TempDir dir;
  dir.write("config.json", read_bytes(kFormats / "gpt1_snapshot/config.json"));
  fs::copy_file(kFormats / "gpt1_snapshot/model.safetensors", dir / "model.safetensors");
  dir.write("tokenizer.json", tokenizer_json.dump());
  const Tokenizer tok = tokenizer_of(model_config_for_path(dir.path.string(), DType::F32));
  const auto cases = nlohmann::json::parse(read_bytes(fixture / "cases.json"));
  BOOST_TEST_REQUIRE(cases["cases"].size() == 325u);
  for (const auto& c : cases["cases"])
    BOOST_TEST((tok.encode(c["text"].get<std::string>()) == c["ids"].get<std::vector<uint32_t>>()),
               c["name"].get<std::string>());

  auto own = tokenizer_json;
  own["model"]["vocab"] = nlohmann::json::parse(read_bytes(kFormats / "gpt1_snapshot/vocab.json"));
  own["model"]["merges"] = merges_list(read_bytes(kFormats / "gpt1_snapshot/merges.txt"), true);
  own["added_tokens"] = nlohmann::json::array();
  dir.write("tokenizer.json", own.dump());
  const auto want = nlohmann::json::parse(read_bytes(kFormats / "gpt1_snapshot/text_ids.json"));
  CliResult r = run_cli({"tokenize", "-m", dir.path.string(), "--text", want["text"].get<std::string>()});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST((parse_id_list(r.out, "ids") == want["ids"].get<std::vector<uint32_t>>()));
}
// --dtype with --model naming a folder that holds a gpt-vk config.toml: the flag wins over
// the TOML's dtype, and without it the TOML's dtype stands.
BOOST_AUTO_TEST_CASE(dtype_wins_over_a_folders_config_toml) {
  const std::string folder = (kSource / "models/default").string();
  auto storage = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"bench", "-m", folder, "--prompt-tokens", "4", "--gen-tokens", "1", "--repeats", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = run_cli(args);
    BOOST_TEST(r.exit_code == 0, r.err);
    return r.err;
  };
  BOOST_TEST(storage({"--dtype", "q8_0"}).find(", q8_0 weights") != std::string::npos);
  BOOST_TEST(storage({}).find(", f16 weights") != std::string::npos);
}
BOOST_AUTO_TEST_SUITE_END()

