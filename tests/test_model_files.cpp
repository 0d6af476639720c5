// The files people have, other than gpt-vk's own TOML + safetensors: Hugging Face snapshot
// folders (gpt2 and openai-gpt, with and without the "transformer." prefix, sharded),
// torch.save zips (tests/fixtures/formats, made by tools/make_format_fixtures.py with
// PyTorch), against PyTorch's logits; then every bad file of those formats and of GGUF as
// a row of the bad-input matrix: exit code and one line naming the file and the cause.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "engine/error.hpp"
#include "engine/host_memory.hpp"
#include "engine/vk/context.hpp"
#include "models/gpt_model.hpp"
#include "models/model_path.hpp"
#include "models/npy.hpp"
#include "models/safetensors.hpp"
#include "tests/support/safetensors_writer.hpp"
#include "models/tokenizer/id_list.hpp"
#include "models/weights.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/model_cases.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using test::CliResult, test::run_cli, test::TempDir;
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

// A snapshot folder: config.json and the weights (copied), nothing else.
std::string snapshot(const TempDir& dir, const nlohmann::json& config, const fs::path& weights) {
  dir.write("config.json", config.dump());
  fs::copy_file(weights, dir / "model.safetensors", fs::copy_options::overwrite_existing);
  return dir.path.string();
}

nlohmann::json hf_gpt2_json() {
  return {{"model_type", "gpt2"}, {"n_embd", 64}, {"n_layer", 2}, {"n_head", 2}, {"n_positions", 73},
          {"vocab_size", 311},   {"n_inner", nullptr}, {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5}, {"tie_word_embeddings", true}};
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
  toml.replace(toml.find("model.safetensors"), 17, (kGguf / "small-F16.gguf").string());
  r = run_cli({"forward", "--config", dir.write("gguf.toml", toml), "--ids", ids, "--out", (dir / "b.npy").string()});
  BOOST_TEST(r.exit_code == 0, r.err);
  got = read_npy((dir / "b.npy").string());
  BOOST_TEST(test::rel_error(got.data, a.logits, 0, a.ids.size(), 311) <= 4e-3);
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

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------ the bad-input matrix

namespace {

struct Expect {
  int exit_code = 1;
  std::vector<std::string> says;
};

void check(const CliResult& r, const Expect& e) {
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(!r.signaled, "killed by signal " << r.signal);
  BOOST_TEST(r.exit_code == e.exit_code);
  for (const char* crash : {"terminate called", "internal error", "Sanitizer", "runtime error"})
    BOOST_TEST(r.err.find(crash) == std::string::npos);
  std::vector<std::string> lines;
  std::istringstream in(r.err);
  for (std::string l; std::getline(in, l);)
    if (l.find("dequantizing") == std::string::npos) lines.push_back(l);
  BOOST_TEST(lines.size() == 1u, "expected one error line");
  if (lines.empty()) return;
  BOOST_TEST(lines.back().rfind("gpt-vk: ", 0) == 0u);
  for (const auto& s : e.says) BOOST_TEST(lines.back().find(s) != std::string::npos, "message lacks '" << s << "'");
}

struct Rows {
  TempDir dir;
  std::string gguf = read_bytes(kGguf / "small-Q8_0.gguf");

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

}  // namespace

BOOST_FIXTURE_TEST_SUITE(bad_gguf, Rows)
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
BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bad_torch_files, Rows)
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
  std::string pt = read_bytes(kFormats / "torch/gpt2_f16.pt");
  std::string toml = read_bytes(kFormats / "torch/gpt2_f16.toml");
  dir.write("gpt2_f16.pt", pt.substr(0, pt.size() - 100));
  check(forward_config(dir.write("c.toml", toml)), {1, {"gpt2_f16.pt", "no zip end-of-central-directory record: truncated"}});
  dir.write("gpt2_f16.pt", pt.substr(0, pt.size() / 2) + pt.substr(pt.size() - 2000));  // directory intact, data cut
  check(forward_config(dir.write("c.toml", toml)), {1, {"gpt2_f16.pt", "truncated"}});
  // A zip with no entries is its end record alone: still a zip, not a damaged safetensors.
  dir.write("gpt2_f16.pt", std::string("PK\x05\x06", 4) + std::string(18, '\0'));
  check(forward_config(dir.write("c.toml", toml)), {1, {"gpt2_f16.pt", "a zip archive without", "data.pkl"}});
}
BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bad_snapshots_and_flags, Rows)
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
}
BOOST_AUTO_TEST_CASE(snapshot_weights_missing_or_inconsistent) {
  dir.write("config.json", hf_gpt2_json().dump());
  check(forward_model(dir.path.string()), {1, {"no model.safetensors, pytorch_model.bin or their .index.json"}});
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "model-1.safetensors"}})");
  check(forward_model(dir.path.string()), {1, {"model.safetensors.index.json", "shard model-1.safetensors"}});
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "../x.safetensors"}})");
  check(forward_model(dir.path.string()), {1, {"is not a file in the folder"}});
  fs::copy_file(kModels / "hf_gpt2/model.safetensors", dir / "a.safetensors");
  fs::copy_file(kModels / "hf_gpt2/model.safetensors", dir / "b.safetensors");
  dir.write("model.safetensors.index.json", R"({"weight_map": {"wte.weight": "a.safetensors", "wpe.weight": "b.safetensors"}})");
  check(forward_model(dir.path.string()), {1, {"is in two shards"}});
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
// GPT-1's own BPE (tests/test_tokenizer_gpt1.cpp) runs the text commands on a GPT-1
// snapshot: tokenize gives the references' ids (tools/make_gpt1_tokenizer_fixtures.js),
// greedy generate's first token is the argmax of forward's last row for those ids, a stop
// string typed in capitals stops it, and the echoed prompt gets the space its last word's
// "</w>" stands for.
BOOST_AUTO_TEST_CASE(gpt1_text_commands_run) {
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
