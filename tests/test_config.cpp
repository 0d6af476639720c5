// The TOML model config: defaults, path resolution, every shipped config, and every
// rejection rule, each checked to produce an InputError that names the file and the key.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "models/config.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

using test::temp_dir;

std::string write_config(const std::string& text, const std::string& name = "model.toml") {
  return test::write_temp_file(name, text);
}

// `text` with the first occurrence of `from` replaced by `to` (which must occur).
std::string edit(std::string text, const std::string& from, const std::string& to) {
  size_t p = text.find(from);
  BOOST_REQUIRE_MESSAGE(p != std::string::npos, "test config lacks '" << from << "'");
  return text.replace(p, from.size(), to);
}

const std::string kHf = R"([model]
name = "tiny"
vocab_size = 100
context_length = 32
emb_dim = 64
n_heads = 4
n_layers = 2

[weights]
file = "tiny.safetensors"
layout = "hf-gpt2"
dtype = "f16"

[tokenizer]
vocab = "vocab.json"
merges = "merges.txt"
)";

// Separate q/k/v with biases, untied head with a bias: every optional role in play.
const std::string kCustom = R"([model]
name = "tiny-custom"
vocab_size = 100
context_length = 32
emb_dim = 64
n_heads = 4
n_layers = 2
tie_embeddings = false
out_bias = true

[weights]
file = "/abs/dir/tiny.safetensors"
layout = "custom"
dtype = "bf16"

[weights.names]
linear = "in_out"
tok_emb = "tok.weight"
pos_emb = "pos.weight"
ln1_weight = "b.{i}.n1.w"
ln1_bias = "b.{i}.n1.b"
q_weight = "b.{i}.q.w"
q_bias = "b.{i}.q.b"
k_weight = "b.{i}.k.w"
k_bias = "b.{i}.k.b"
v_weight = "b.{i}.v.w"
v_bias = "b.{i}.v.b"
attn_out_weight = "b.{i}.o.w"
attn_out_bias = "b.{i}.o.b"
ln2_weight = "b.{i}.n2.w"
ln2_bias = "b.{i}.n2.b"
fc_weight = "b.{i}.fc.w"
fc_bias = "b.{i}.fc.b"
proj_weight = "b.{i}.proj.w"
proj_bias = "b.{i}.proj.b"
lnf_weight = "nf.w"
lnf_bias = "nf.b"
head_weight = "head.w"
head_bias = "head.b"
)";

// Loading `text` must throw an InputError whose one-line message names the config file
// and contains every one of `parts` (the key, and the cause where it matters).
void expect_rejected(const std::string& text, const std::vector<std::string>& parts) {
  std::string path = write_config(text);
  try {
    load_config(path);
    BOOST_ERROR("accepted a config that should fail; expected an error naming " << parts.front());
  } catch (const InputError& e) {
    std::string msg = e.what();
    BOOST_TEST_INFO("message: " << msg);
    BOOST_TEST(msg.find(path) != std::string::npos);
    BOOST_TEST(msg.find('\n') == std::string::npos);
    for (const auto& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "missing '" << p << "'");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_config)

BOOST_AUTO_TEST_CASE(defaults_and_relative_paths) {
  std::string path = write_config(kHf);
  ModelConfig c = load_config(path);
  BOOST_TEST(c.source == path);
  BOOST_TEST(c.name == "tiny");
  BOOST_TEST(c.vocab_size == 100u);
  BOOST_TEST(c.context_length == 32u);
  BOOST_TEST(c.emb_dim == 64u);
  BOOST_TEST(c.n_heads == 4u);
  BOOST_TEST(c.head_dim() == 16u);
  BOOST_TEST(c.n_layers == 2u);
  BOOST_TEST(c.ffn_dim == 256u);  // 4 * emb_dim
  BOOST_TEST(c.qkv_bias);
  BOOST_TEST(!c.out_bias);
  BOOST_TEST(c.tie_embeddings);
  BOOST_TEST((c.activation == Activation::GeluTanh));
  BOOST_TEST(c.norm_eps == 1e-5f);
  BOOST_TEST((c.norm_position == NormPosition::Pre));
  BOOST_TEST(c.final_norm);
  BOOST_TEST(c.layout == "hf-gpt2");
  BOOST_TEST((c.dtype == DType::F16));
  BOOST_TEST(c.names.empty());
  // Relative to the TOML's directory, not the working directory; missing files are fine.
  BOOST_TEST(c.weights_file == (temp_dir() / "tiny.safetensors").string());
  BOOST_TEST(c.tokenizer_vocab == (temp_dir() / "vocab.json").string());
  BOOST_TEST(c.tokenizer_merges == (temp_dir() / "merges.txt").string());
}

BOOST_AUTO_TEST_CASE(optional_sections_and_weights_defaults) {
  std::string text = edit(kHf, "[tokenizer]\nvocab = \"vocab.json\"\nmerges = \"merges.txt\"\n", "");
  text = edit(edit(text, "layout = \"hf-gpt2\"\n", ""), "dtype = \"f16\"\n", "");
  ModelConfig c = load_config(write_config(text));
  BOOST_TEST(c.tokenizer_vocab.empty());
  BOOST_TEST(c.tokenizer_merges.empty());
  BOOST_TEST(c.layout == "hf-gpt2");
  BOOST_TEST((c.dtype == DType::F32));
  // Parent-relative and absolute paths.
  c = load_config(write_config(edit(kHf, "file = \"tiny.safetensors\"", "file = \"../w/x.safetensors\"")));
  BOOST_TEST(c.weights_file == (temp_dir().parent_path() / "w" / "x.safetensors").string());
  c = load_config(write_config(edit(kHf, "file = \"tiny.safetensors\"", "file = \"/abs/x.safetensors\"")));
  BOOST_TEST(c.weights_file == "/abs/x.safetensors");
}

// A config in a symlinked folder: "../x" is taken from the real folder behind the link,
// as the kernel (and `ls`) would, not by cancelling the link's name as text.
BOOST_AUTO_TEST_CASE(parent_paths_go_through_a_symlinked_folder) {
  fs::path real = temp_dir() / "real" / "model", link = temp_dir() / "link";
  fs::create_directories(real);
  fs::remove(link);
  fs::create_directory_symlink(real, link);
  test::write_temp_file("real/model/config.toml", edit(kHf, "vocab = \"vocab.json\"", "vocab = \"../vocab.json\""));
  test::write_temp_file("real/vocab.json", "{}");
  ModelConfig c = load_config((link / "config.toml").string());
  BOOST_TEST(c.tokenizer_vocab == (temp_dir() / "real" / "vocab.json").string());
  BOOST_TEST(c.weights_file == (temp_dir() / "real" / "model" / "tiny.safetensors").string());
  // The file's own name stays as the config writes it, a link too (Hugging Face's cache
  // links model.safetensors to ../blobs/<hash>: errors name the former).
  fs::remove(real / "tiny.safetensors");
  fs::create_symlink("../blobs/9f86d081", real / "tiny.safetensors");
  BOOST_TEST(load_config((link / "config.toml").string()).weights_file == (real / "tiny.safetensors").string());
}

// The KV cache is f32 unless weights.kv_dtype = "f16", which needs head_dim % 8 == 0.
BOOST_AUTO_TEST_CASE(kv_dtype_default_and_choices) {
  BOOST_TEST(!load_config(write_config(kHf)).kv_f16());  // f16 weights, f32 cache
  BOOST_TEST(load_config(write_config(edit(kHf, "dtype = \"f16\"", "dtype = \"f16\"\nkv_dtype = \"f16\""))).kv_f16());
  BOOST_TEST(!load_config(write_config(edit(kHf, "dtype = \"f16\"", "dtype = \"f16\"\nkv_dtype = \"f32\""))).kv_f16());
  // f32 weights with an f16 cache
  const std::string f32_weights = edit(kHf, "dtype = \"f16\"\n", "");
  BOOST_TEST(load_config(write_config(edit(f32_weights, "layout = \"hf-gpt2\"", "layout = \"hf-gpt2\"\nkv_dtype = \"f16\"")))
                 .kv_f16());
  // head_dim 12 cannot have one.
  const std::string hd12 = edit(kHf, "emb_dim = 64", "emb_dim = 48");
  expect_rejected(edit(hd12, "dtype = \"f16\"", "dtype = \"f16\"\nkv_dtype = \"f16\""),
                  {"weights.kv_dtype", "head dim", "12", "divisible by 8"});
  expect_rejected(edit(kHf, "dtype = \"f16\"", "dtype = \"f16\"\nkv_dtype = \"bf16\""), {"weights.kv_dtype", "bf16"});
}

BOOST_AUTO_TEST_CASE(every_option_parsed) {
  std::string text = edit(kCustom, "out_bias = true\n",
                          "out_bias = true\nffn_dim = 100\nqkv_bias = true\nactivation = \"relu\"\n"
                          "norm_eps = 1e-6\nnorm_position = \"post\"\nfinal_norm = true\n");
  ModelConfig c = load_config(write_config(text));
  BOOST_TEST(c.ffn_dim == 100u);
  BOOST_TEST(!c.tie_embeddings);
  BOOST_TEST(c.out_bias);
  BOOST_TEST((c.activation == Activation::Relu));
  BOOST_TEST(c.norm_eps == 1e-6f);
  BOOST_TEST((c.norm_position == NormPosition::Post));
  BOOST_TEST(c.layout == "custom");
  BOOST_TEST((c.dtype == DType::BF16));
  BOOST_TEST(c.weights_file == "/abs/dir/tiny.safetensors");
  BOOST_TEST(c.names.at("linear") == "in_out");
  BOOST_TEST(c.names.at("q_weight") == "b.{i}.q.w");
  BOOST_TEST(c.names.at("head_bias") == "head.b");
  BOOST_TEST(c.names.size() == 23u);  // linear + 22 roles
  c = load_config(write_config(
      edit(edit(kCustom, "linear = \"in_out\"\n", ""), "n_layers = 2", "n_layers = 2\nactivation = \"gelu\"")));
  BOOST_TEST(c.names.at("linear") == "out_in");  // default: torch nn.Linear
  BOOST_TEST((c.activation == Activation::GeluErf));
  // An integer norm_eps is a number too.
  c = load_config(write_config(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = 1")));
  BOOST_TEST(c.norm_eps == 1.0f);
}

BOOST_AUTO_TEST_CASE(malformed_toml_names_the_line) {
  expect_rejected("[model]\nname = \"x\"\nvocab_size = = 3\n", {":3", "malformed TOML"});
  expect_rejected("[model\n", {":1", "malformed TOML"});
  expect_rejected(kHf + "[model]\nname = \"again\"\n", {"malformed TOML"});  // table defined twice
  BOOST_CHECK_THROW(load_config((temp_dir() / "does-not-exist.toml").string()), InputError);
}

// toml++ opens a dotted key's tables recursively, one stack frame a part, so keys are held
// to 100 parts wherever they stand (a header, before "=", in an inline table) before toml++
// reads them; dots in values (numbers, times, strings, comments) never count.
BOOST_AUTO_TEST_CASE(dotted_keys_of_more_than_100_parts) {
  auto dotted = [](size_t parts, const std::string& part) {
    std::string key = part;
    for (size_t i = 1; i < parts; ++i) key += " ." + part;
    return key;
  };
  const std::string too_many = "a dotted key of more than 100 parts";
  expect_rejected("[" + dotted(200000, "a") + "]\n", {":1", too_many});
  expect_rejected(kHf + "[tokenizer]\n" + dotted(101, "\"x.y\"") + " = 1\n", {too_many});
  expect_rejected(kHf + "x = {" + dotted(101, "'b'") + " = 1}\n", {too_many});
  // 100 parts reach toml++, which reads them: the error is then the schema's.
  expect_rejected(kHf + "[" + dotted(100, "a") + "]\n", {"unknown key a"});
  std::string dots_in_values = "x = [1.5";
  for (int i = 0; i < 150; ++i) dots_in_values += i % 2 ? ", 2.5" : ",3.5";
  dots_in_values += "]\nt = [07:32:00.5, 1979-05-27T07:32:00.999Z]\ny = \"" + std::string(300, '.') + "\" # " +
                    std::string(300, '.');
  expect_rejected(kHf + "[unused]\n" + dots_in_values + "\n", {"unknown key unused"});
}

BOOST_AUTO_TEST_CASE(unknown_keys_in_every_table) {
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nn_layer = 2"), {"unknown key model.n_layer"});
  expect_rejected(edit(kHf, "dtype = \"f16\"", "dtype = \"f16\"\npath = \"x\""), {"unknown key weights.path"});
  expect_rejected(edit(kHf, "merges = \"merges.txt\"", "merges = \"merges.txt\"\nspecial = \"x\""),
                  {"unknown key tokenizer.special"});
  expect_rejected(edit(kCustom, "head_bias = \"head.b\"", "head_bias = \"head.b\"\nlm_head = \"x\""),
                  {"unknown key weights.names.lm_head"});
  expect_rejected(kHf + "[training]\nlr = 1\n", {"unknown key training"});
  expect_rejected("seed = 3\n" + kHf, {"unknown key seed"});
}

BOOST_AUTO_TEST_CASE(missing_required_keys) {
  for (std::string key : {"name = \"tiny\"\n", "vocab_size = 100\n", "context_length = 32\n", "emb_dim = 64\n",
                          "n_heads = 4\n", "n_layers = 2\n"})
    expect_rejected(edit(kHf, key, ""), {"missing required key model." + key.substr(0, key.find(' '))});
  expect_rejected(edit(kHf, "file = \"tiny.safetensors\"\n", ""), {"missing required key weights.file"});
  expect_rejected(edit(kHf, "merges = \"merges.txt\"\n", ""), {"missing required key tokenizer.merges"});
  expect_rejected(edit(kHf, "vocab = \"vocab.json\"\n", ""), {"missing required key tokenizer.vocab"});
  expect_rejected(kHf.substr(kHf.find("[weights]")), {"[model]"});
  expect_rejected(kHf.substr(0, kHf.find("[weights]")), {"[weights]"});
}

BOOST_AUTO_TEST_CASE(wrong_types) {
  expect_rejected(edit(kHf, "vocab_size = 100", "vocab_size = \"100\""), {"model.vocab_size", "integer"});
  expect_rejected(edit(kHf, "emb_dim = 64", "emb_dim = 64.0"), {"model.emb_dim", "integer"});
  expect_rejected(edit(kHf, "name = \"tiny\"", "name = 7"), {"model.name", "string"});
  expect_rejected(edit(kHf, "name = \"tiny\"", "name = \"\""), {"model.name", "empty"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nqkv_bias = 1"), {"model.qkv_bias", "true or false"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nfinal_norm = \"yes\""), {"model.final_norm"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = \"1e-5\""), {"model.norm_eps", "number"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nactivation = 1"), {"model.activation", "string"});
  expect_rejected(edit(kHf, "file = \"tiny.safetensors\"", "file = [\"a\"]"), {"weights.file", "string"});
  expect_rejected(edit(kCustom, "linear = \"in_out\"", "linear = true"), {"weights.names.linear"});
  expect_rejected(edit(kCustom, "tok_emb = \"tok.weight\"", "tok_emb = 3"), {"weights.names.tok_emb"});
  expect_rejected("model = 3\n" + kHf.substr(kHf.find("[weights]")), {"model", "table"});
  expect_rejected(edit(kHf, "dtype = \"f16\"", "dtype = \"f16\"\nnames = 1"), {"weights.names", "table"});
}

BOOST_AUTO_TEST_CASE(bad_values) {
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nactivation = \"swish\""),
                  {"model.activation", "swish", "gelu_tanh"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_position = \"middle\""), {"model.norm_position"});
  expect_rejected(edit(kHf, "layout = \"hf-gpt2\"", "layout = \"llama\""), {"weights.layout", "llama"});
  expect_rejected(edit(kHf, "dtype = \"f16\"", "dtype = \"f64\""), {"weights.dtype", "f64"});
  expect_rejected(edit(kCustom, "linear = \"in_out\"", "linear = \"rows\""), {"weights.names.linear", "rows"});
  expect_rejected(edit(kHf, "emb_dim = 64", "emb_dim = 0"), {"model.emb_dim", "positive"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = -1"), {"model.n_layers", "positive"});
  expect_rejected(edit(kHf, "vocab_size = 100", "vocab_size = 0"), {"model.vocab_size"});
  expect_rejected(edit(kHf, "context_length = 32", "context_length = -32"), {"model.context_length"});
  expect_rejected(edit(kHf, "n_heads = 4", "n_heads = 0"), {"model.n_heads"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nffn_dim = 0"), {"model.ffn_dim"});
  expect_rejected(edit(kHf, "vocab_size = 100", "vocab_size = 10000000000"), {"model.vocab_size", "too large"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = 0.0"), {"model.norm_eps"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = 0"), {"model.norm_eps", "positive"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = -1e-5"), {"model.norm_eps"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = nan"), {"model.norm_eps"});
  // Finite positive doubles that are no positive finite float (found by the config fuzzer).
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = 1e45"), {"model.norm_eps", "float range"});
  expect_rejected(edit(kHf, "n_layers = 2", "n_layers = 2\nnorm_eps = 1e-50"), {"model.norm_eps", "float range"});
  expect_rejected(edit(kHf, "file = \"tiny.safetensors\"", "file = \"\""), {"weights.file"});
}

BOOST_AUTO_TEST_CASE(inconsistent_dimensions) {
  expect_rejected(edit(kHf, "n_heads = 4", "n_heads = 5"), {"model.n_heads", "does not divide", "64"});
  expect_rejected(edit(kHf, "n_heads = 4", "n_heads = 128"), {"model.n_heads"});
  // Past what the kernels take: a head dim of 1024 (minutes of shader compiling) and a
  // vocabulary of 2^24 (the sampler counts in floats); 512 and 2^24 - 1 pass.
  std::string wide = edit(kHf, "emb_dim = 64", "emb_dim = 1024");
  expect_rejected(edit(wide, "n_heads = 4", "n_heads = 1"), {"model.n_heads", "head dim", "1024", "512"});
  BOOST_TEST(load_config(write_config(edit(wide, "n_heads = 4", "n_heads = 2"))).head_dim() == 512u);
  expect_rejected(edit(kHf, "vocab_size = 100", "vocab_size = 16777216"), {"model.vocab_size", "16777215"});
  BOOST_TEST(load_config(write_config(edit(kHf, "vocab_size = 100", "vocab_size = 16777215"))).vocab_size == 16777215u);
}

BOOST_AUTO_TEST_CASE(names_section_rules) {
  // Custom without names; names with hf-gpt2.
  expect_rejected(kCustom.substr(0, kCustom.find("[weights.names]")), {"[weights.names]"});
  expect_rejected(edit(kHf, "[tokenizer]", "[weights.names]\ntok_emb = \"x\"\n\n[tokenizer]"),
                  {"weights.names", "custom"});
  // Always-required roles.
  for (std::string role : {"tok_emb", "pos_emb", "ln1_weight", "ln1_bias", "ln2_weight", "ln2_bias", "attn_out_weight",
                           "fc_weight", "proj_weight"}) {
    size_t at = kCustom.find(role + " = ");
    BOOST_REQUIRE(at != std::string::npos);
    std::string text = kCustom;
    text.erase(at, text.find('\n', at) + 1 - at);
    expect_rejected(text, {"weights.names." + role});
  }
  // No projection at all, a partial split, and a fused + split mix.
  std::string no_qkv = kCustom;
  for (const char* r : {"q_weight", "k_weight", "v_weight"}) {
    size_t at = no_qkv.find(std::string(r) + " = ");
    no_qkv.erase(at, no_qkv.find('\n', at) + 1 - at);
  }
  expect_rejected(no_qkv, {"weights.names.qkv_weight"});
  expect_rejected(edit(kCustom, "v_weight = \"b.{i}.v.w\"\n", ""), {"weights.names.v_weight"});
  expect_rejected(edit(kCustom, "linear = \"in_out\"", "linear = \"in_out\"\nqkv_weight = \"b.{i}.qkv\""),
                  {"weights.names.qkv_weight"});
  // Biases follow model.qkv_bias.
  expect_rejected(edit(kCustom, "k_bias = \"b.{i}.k.b\"\n", ""), {"weights.names.k_bias", "qkv_bias"});
  expect_rejected(edit(kCustom, "n_layers = 2", "n_layers = 2\nqkv_bias = false"), {"weights.names.q_bias"});
  std::string fused = edit(edit(edit(no_qkv, "q_bias = \"b.{i}.q.b\"\n", ""), "k_bias = \"b.{i}.k.b\"\n", ""),
                           "v_bias = \"b.{i}.v.b\"\n", "qkv_weight = \"b.{i}.qkv.w\"\n");
  expect_rejected(fused, {"weights.names.qkv_bias"});
  BOOST_CHECK_NO_THROW(load_config(write_config(edit(fused, "qkv_weight", "qkv_bias = \"b.{i}.qkv.b\"\nqkv_weight"))));
  BOOST_CHECK_NO_THROW(load_config(write_config(edit(fused, "n_layers = 2", "n_layers = 2\nqkv_bias = false"))));
  expect_rejected(edit(edit(fused, "qkv_weight", "qkv_bias = \"b.{i}.qkv.b\"\nqkv_weight"), "n_layers = 2",
                       "n_layers = 2\nqkv_bias = false"),
                  {"weights.names.qkv_bias"});
  expect_rejected(edit(kCustom, "q_bias", "qkv_bias = \"b.{i}.qkv.b\"\nq_bias"), {"weights.names.qkv_bias"});
  // Final norm, head and head bias follow final_norm, tie_embeddings and out_bias.
  expect_rejected(edit(kCustom, "lnf_weight = \"nf.w\"\n", ""), {"weights.names.lnf_weight", "final_norm"});
  expect_rejected(edit(kCustom, "lnf_bias = \"nf.b\"\n", ""), {"weights.names.lnf_bias"});
  expect_rejected(edit(kCustom, "n_layers = 2", "n_layers = 2\nfinal_norm = false"), {"weights.names.lnf_"});
  expect_rejected(edit(kCustom, "head_weight = \"head.w\"\n", ""), {"weights.names.head_weight", "tie_embeddings"});
  expect_rejected(edit(kCustom, "tie_embeddings = false", "tie_embeddings = true"), {"weights.names.head_weight"});
  expect_rejected(edit(kCustom, "head_bias = \"head.b\"\n", ""), {"weights.names.head_bias", "out_bias"});
  expect_rejected(edit(kCustom, "out_bias = true", "out_bias = false"), {"weights.names.head_bias"});
  // {i}: per-layer names need it, whole-model names must not have it.
  expect_rejected(edit(kCustom, "\"b.{i}.n1.w\"", "\"b.n1.w\""), {"weights.names.ln1_weight", "{i}"});
  expect_rejected(edit(kCustom, "\"tok.weight\"", "\"tok.{i}.weight\""), {"weights.names.tok_emb", "{i}"});
  expect_rejected(edit(kCustom, "\"nf.w\"", "\"\""), {"weights.names.lnf_weight", "empty"});
}

// Every config the project ships parses, with the architecture its comment claims.
BOOST_AUTO_TEST_CASE(shipped_configs_load) {
  const fs::path dir = fs::path(GPTVK_SOURCE_DIR) / "configs";
  std::map<std::string, ModelConfig> cfgs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".toml") {
      BOOST_TEST_CONTEXT(e.path()) {
        BOOST_CHECK_NO_THROW(cfgs[e.path().stem().string()] = load_config(e.path().string()));
      }
    }
  for (const char* name : {"gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt1", "seed000-gpt2-small",
                           "seed002-gpt2", "seed003-gpt", "seed004-gpt1"})
    BOOST_REQUIRE_MESSAGE(cfgs.count(name), "configs/" << name << ".toml missing");

  struct Dims {
    const char* name;
    uint32_t C, H, L;
  };
  for (Dims d : {Dims{"gpt2-small", 768, 12, 12}, Dims{"gpt2-medium", 1024, 16, 24}, Dims{"gpt2-large", 1280, 20, 36},
                 Dims{"gpt2-xl", 1600, 25, 48}}) {
    const ModelConfig& c = cfgs[d.name];
    BOOST_TEST_CONTEXT(d.name) {
      BOOST_TEST(c.vocab_size == 50257u);
      BOOST_TEST(c.context_length == 1024u);
      BOOST_TEST(c.emb_dim == d.C);
      BOOST_TEST(c.n_heads == d.H);
      BOOST_TEST(c.n_layers == d.L);
      BOOST_TEST(c.ffn_dim == 4 * d.C);
      BOOST_TEST(c.layout == "hf-gpt2");
      BOOST_TEST(c.tie_embeddings);
      BOOST_TEST((c.activation == Activation::GeluTanh));
      BOOST_TEST(c.weights_file == (dir / (std::string(d.name) + ".safetensors")).string());
      BOOST_TEST(c.tokenizer_vocab == (fs::path(GPTVK_SOURCE_DIR) / "models/gpt2-tokenizer/encoder.json").string());
      BOOST_TEST(c.tokenizer_merges == (fs::path(GPTVK_SOURCE_DIR) / "models/gpt2-tokenizer/vocab.bpe").string());
    }
  }
  const ModelConfig& g1 = cfgs["gpt1"];
  BOOST_TEST(g1.vocab_size == 40478u);
  BOOST_TEST(g1.context_length == 512u);
  BOOST_TEST((g1.norm_position == NormPosition::Post));
  BOOST_TEST(!g1.final_norm);
  BOOST_TEST((g1.activation == Activation::GeluTanh));  // openai-gpt's afn "gelu" is gelu_new
  BOOST_TEST(g1.names.at("linear") == "in_out");
  BOOST_TEST(g1.tokenizer_vocab.empty());

  const ModelConfig& s0 = cfgs["seed000-gpt2-small"];
  BOOST_TEST(!s0.tie_embeddings);
  BOOST_TEST(s0.qkv_bias);
  BOOST_TEST(!s0.out_bias);
  BOOST_TEST(s0.names.at("q_weight") == "trf_blocks.{i}.att.W_query.weight");
  const ModelConfig& s2 = cfgs["seed002-gpt2"];
  BOOST_TEST(s2.tie_embeddings);
  BOOST_TEST((s2.activation == Activation::GeluErf));
  BOOST_TEST(s2.names.at("linear") == "out_in");
  const ModelConfig& s3 = cfgs["seed003-gpt"];
  BOOST_TEST(!s3.qkv_bias);
  BOOST_TEST(s3.out_bias);
  BOOST_TEST(!s3.tie_embeddings);
  const ModelConfig& s4 = cfgs["seed004-gpt1"];
  BOOST_TEST(s4.vocab_size == 40478u);
  BOOST_TEST(s4.context_length == 512u);
  BOOST_TEST((s4.norm_position == NormPosition::Pre));
  BOOST_TEST(s4.names.at("ln1_weight") == "blocks.{i}.ln_1.gamma");
}

// Each seed notebook's shipped config describes the model class its fixture was made from
// (tools/make_fixtures.py builds both from the notebook's class): everything but the sizes
// and the storage types agrees, so a wrong name, activation or norm in configs/ shows here.
BOOST_AUTO_TEST_CASE(shipped_seed_configs_match_their_fixtures) {
  const fs::path root(GPTVK_SOURCE_DIR);
  for (auto [shipped, fixture] : {std::pair{"seed000-gpt2-small", "seed000_mha_untied"},
                                  {"seed002-gpt2", "seed002_fused_tied_erf"},
                                  {"seed003-gpt", "seed003_noqkvbias_headbias"},
                                  {"seed004-gpt1", "seed004_gpt1_hd128"}}) {
    BOOST_TEST_CONTEXT(shipped) {
      const ModelConfig a = load_config((root / "configs" / (std::string(shipped) + ".toml")).string());
      const ModelConfig b = load_config((root / "tests/fixtures/models" / fixture / "config.toml").string());
      BOOST_TEST(a.layout == b.layout);
      BOOST_TEST((a.names == b.names));
      BOOST_TEST((a.activation == b.activation));
      BOOST_TEST((a.norm_position == b.norm_position));
      BOOST_TEST(a.final_norm == b.final_norm);
      BOOST_TEST(a.tie_embeddings == b.tie_embeddings);
      BOOST_TEST(a.qkv_bias == b.qkv_bias);
      BOOST_TEST(a.out_bias == b.out_bias);
      BOOST_TEST(a.norm_eps == b.norm_eps);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
