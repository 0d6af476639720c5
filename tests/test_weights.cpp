// The weight loader: tiny models written in every layout (hf-gpt2 with and without the
// "transformer." prefix, custom with separate or fused q/k/v, out_in or in_out) load onto
// the device as [out][in] matrices with q/k/v fused, in f32/f16/bf16 storage from
// f32/f16/bf16 files; broken files name the tensor; random weights are deterministic.
#include "tests/support/vk_test.hpp"

#include <cstring>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "engine/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/safetensors_writer.hpp"
#include "models/weights.hpp"
#include "models/weights_source.hpp"

using namespace gptvk;
namespace fs = std::filesystem;

namespace {

using test::temp_dir;

using Floats = std::vector<float>;

// Odd sizes so that rows need padding (C = 20 -> stride 24) and nothing is a tile multiple.
ModelConfig tiny_config() {
  ModelConfig c;
  c.source = "tiny.toml";
  c.name = "tiny";
  c.vocab_size = 37;
  c.context_length = 11;
  c.emb_dim = 20;
  c.n_heads = 4;
  c.n_layers = 2;
  c.ffn_dim = 52;
  return c;
}

Floats transpose(const Floats& a, uint32_t rows, uint32_t cols) {
  Floats t(a.size());
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c) t[uint64_t(c) * rows + r] = a[uint64_t(r) * cols + c];
  return t;
}
Floats concat(std::initializer_list<const Floats*> parts) {
  Floats out;
  for (const Floats* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// The model's values in the engine's orientation ([out][in]), before any rounding.
struct Reference {
  struct Layer {
    Floats ln1_g, ln1_b, q, k, v, qb, kb, vb, o, ob, ln2_g, ln2_b, fc, fcb, proj, projb;
  };
  Floats tok, pos, lnf_g, lnf_b, head, head_b;
  std::vector<Layer> layers;
};

Reference make_reference(const ModelConfig& c, uint32_t seed) {
  const uint32_t V = c.vocab_size, T = c.context_length, C = c.emb_dim, F = c.ffn_dim;
  auto r = [&](size_t n) { return test::random_floats(n, seed++); };
  Reference ref;
  ref.tok = r(V * C);
  ref.pos = r(T * C);
  for (uint32_t l = 0; l < c.n_layers; ++l)
    ref.layers.push_back({r(C), r(C), r(C * C), r(C * C), r(C * C), r(C), r(C), r(C), r(C * C), r(C), r(C), r(C),
                          r(F * C), r(F), r(C * F), r(C)});
  ref.lnf_g = r(C);
  ref.lnf_b = r(C);
  ref.head = r(V * C);
  ref.head_b = r(V);
  return ref;
}

// name -> (shape, f32 values); written in one file dtype.
using Tensors = std::map<std::string, std::pair<std::vector<uint64_t>, Floats>>;

std::string write_tensors(const Tensors& ts, DType file_dtype, const std::string& name = "model.safetensors") {
  SafetensorsWriter w;
  for (const auto& [n, t] : ts) w.add_f32(n, file_dtype, t.first, t.second);
  w.add_raw("h.0.attn.masked_bias", "I64", {1}, std::string(8, '\0'));  // buffers the loader must ignore
  std::string path = (temp_dir() / name).string();
  w.write(path);
  return path;
}

// Hugging Face GPT-2: Conv1D [in][out] weights, q/k/v fused in c_attn.
Tensors hf_tensors(const Reference& ref, const ModelConfig& c, const std::string& prefix) {
  const uint32_t V = c.vocab_size, T = c.context_length, C = c.emb_dim, F = c.ffn_dim;
  Tensors ts;
  ts[prefix + "wte.weight"] = {{V, C}, ref.tok};
  ts[prefix + "wpe.weight"] = {{T, C}, ref.pos};
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const auto& L = ref.layers[l];
    std::string h = prefix + "h." + std::to_string(l) + ".";
    ts[h + "ln_1.weight"] = {{C}, L.ln1_g};
    ts[h + "ln_1.bias"] = {{C}, L.ln1_b};
    ts[h + "attn.c_attn.weight"] = {{C, 3 * C}, transpose(concat({&L.q, &L.k, &L.v}), 3 * C, C)};
    ts[h + "attn.c_attn.bias"] = {{3 * C}, concat({&L.qb, &L.kb, &L.vb})};
    ts[h + "attn.c_proj.weight"] = {{C, C}, transpose(L.o, C, C)};
    ts[h + "attn.c_proj.bias"] = {{C}, L.ob};
    ts[h + "attn.bias"] = {{1, 1, T, T}, Floats(T * T, 1.0f)};  // causal mask buffer
    ts[h + "ln_2.weight"] = {{C}, L.ln2_g};
    ts[h + "ln_2.bias"] = {{C}, L.ln2_b};
    ts[h + "mlp.c_fc.weight"] = {{C, F}, transpose(L.fc, F, C)};
    ts[h + "mlp.c_fc.bias"] = {{F}, L.fcb};
    ts[h + "mlp.c_proj.weight"] = {{F, C}, transpose(L.proj, C, F)};
    ts[h + "mlp.c_proj.bias"] = {{C}, L.projb};
  }
  ts[prefix + "ln_f.weight"] = {{C}, ref.lnf_g};
  ts[prefix + "ln_f.bias"] = {{C}, ref.lnf_b};
  ts["lm_head.weight"] = {{V, C}, ref.head};  // used only when untied
  return ts;
}

// A custom layout: every role in cfg.names, in the orientation `linear` says.
Tensors custom_tensors(const Reference& ref, const ModelConfig& c) {
  const uint32_t V = c.vocab_size, T = c.context_length, C = c.emb_dim, F = c.ffn_dim;
  const bool io = c.names.at("linear") == "in_out";
  auto name = [&](const std::string& role, uint32_t l) {
    std::string s = c.names.at(role);
    size_t p = s.find("{i}");
    return p == std::string::npos ? s : s.replace(p, 3, std::to_string(l));
  };
  Tensors ts;
  auto put = [&](const std::string& role, uint32_t l, std::vector<uint64_t> shape, const Floats& v) {
    if (c.names.count(role)) ts[name(role, l)] = {shape, v};
  };
  // A linear weight [out][in], stored transposed when in_out.
  auto linear = [&](const std::string& role, uint32_t l, uint32_t out, uint32_t in, const Floats& v) {
    put(role, l, io ? std::vector<uint64_t>{in, out} : std::vector<uint64_t>{out, in}, io ? transpose(v, out, in) : v);
  };
  put("tok_emb", 0, {V, C}, ref.tok);
  put("pos_emb", 0, {T, C}, ref.pos);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const auto& L = ref.layers[l];
    put("ln1_weight", l, {C}, L.ln1_g);
    put("ln1_bias", l, {C}, L.ln1_b);
    linear("qkv_weight", l, 3 * C, C, concat({&L.q, &L.k, &L.v}));
    put("qkv_bias", l, {3 * C}, concat({&L.qb, &L.kb, &L.vb}));
    linear("q_weight", l, C, C, L.q);
    linear("k_weight", l, C, C, L.k);
    linear("v_weight", l, C, C, L.v);
    put("q_bias", l, {C}, L.qb);
    put("k_bias", l, {C}, L.kb);
    put("v_bias", l, {C}, L.vb);
    linear("attn_out_weight", l, C, C, L.o);
    put("attn_out_bias", l, {C}, L.ob);
    put("ln2_weight", l, {C}, L.ln2_g);
    put("ln2_bias", l, {C}, L.ln2_b);
    linear("fc_weight", l, F, C, L.fc);
    put("fc_bias", l, {F}, L.fcb);
    linear("proj_weight", l, C, F, L.proj);
    put("proj_bias", l, {C}, L.projb);
  }
  put("lnf_weight", 0, {C}, ref.lnf_g);
  put("lnf_bias", 0, {C}, ref.lnf_b);
  put("head_weight", 0, {V, C}, ref.head);  // [vocab][emb] whatever `linear` says
  put("head_bias", 0, {V}, ref.head_b);
  return ts;
}

// seed000-like: separate q/k/v with biases, untied head with a bias, no attn_out bias.
ModelConfig separate_qkv_config(const std::string& linear) {
  ModelConfig c = tiny_config();
  c.layout = "custom";
  c.tie_embeddings = false;
  c.out_bias = true;
  c.names = {{"linear", linear},
             {"tok_emb", "tok_emb.weight"},
             {"pos_emb", "pos_emb.weight"},
             {"ln1_weight", "b.{i}.n1.s"},
             {"ln1_bias", "b.{i}.n1.t"},
             {"q_weight", "b.{i}.att.W_query.weight"},
             {"q_bias", "b.{i}.att.W_query.bias"},
             {"k_weight", "b.{i}.att.W_key.weight"},
             {"k_bias", "b.{i}.att.W_key.bias"},
             {"v_weight", "b.{i}.att.W_value.weight"},
             {"v_bias", "b.{i}.att.W_value.bias"},
             {"attn_out_weight", "b.{i}.att.out_proj.weight"},
             {"ln2_weight", "b.{i}.n2.s"},
             {"ln2_bias", "b.{i}.n2.t"},
             {"fc_weight", "b.{i}.ff.0.weight"},
             {"fc_bias", "b.{i}.ff.0.bias"},
             {"proj_weight", "b.{i}.ff.2.weight"},
             {"proj_bias", "b.{i}.ff.2.bias"},
             {"lnf_weight", "final_norm.scale"},
             {"lnf_bias", "final_norm.shift"},
             {"head_weight", "out_head.weight"},
             {"head_bias", "out_head.bias"}};
  return c;
}

// seed002-like with qkv_bias = false: fused c_attn, tied head, no final norm.
ModelConfig fused_qkv_config(const std::string& linear) {
  ModelConfig c = tiny_config();
  c.layout = "custom";
  c.qkv_bias = false;
  c.final_norm = false;
  c.names = {{"linear", linear},
             {"tok_emb", "wte.weight"},
             {"pos_emb", "wpe.weight"},
             {"ln1_weight", "blocks.{i}.ln_1.weight"},
             {"ln1_bias", "blocks.{i}.ln_1.bias"},
             {"qkv_weight", "blocks.{i}.attn.c_attn.weight"},
             {"attn_out_weight", "blocks.{i}.attn.c_proj.weight"},
             {"attn_out_bias", "blocks.{i}.attn.c_proj.bias"},
             {"ln2_weight", "blocks.{i}.ln_2.weight"},
             {"ln2_bias", "blocks.{i}.ln_2.bias"},
             {"fc_weight", "blocks.{i}.mlp.c_fc.weight"},
             {"fc_bias", "blocks.{i}.mlp.c_fc.bias"},
             {"proj_weight", "blocks.{i}.mlp.c_proj.weight"},
             {"proj_bias", "blocks.{i}.mlp.c_proj.bias"}};
  return c;
}

// What the device must hold for `v`: rounded to the file's dtype, then to the storage dtype.
Floats rounded(const Floats& v, DType file, DType device) { return test::rounded_to(test::rounded_to(v, file), device); }

// Largest relative error two roundings can add: half an ulp of each 16-bit format.
double rounding_tolerance(DType file, DType device) {
  auto ulp = [](DType t) { return t == DType::F32 ? 0.0 : t == DType::F16 ? 1.0 / 2048 : 1.0 / 256; };
  return ulp(file) + ulp(device) + 1e-7;
}

struct Checker {
  DType file, device;
  void matrix(const Matrix& m, uint32_t rows, uint32_t cols, const Floats& want, const std::string& what) const {
    BOOST_TEST_CONTEXT(what) {
      BOOST_TEST(m.rows == rows);
      BOOST_TEST(m.cols == cols);
      BOOST_TEST((m.dtype == device));
      Floats got = m.read_rows_f32(0, rows);
      // Exact: the loader only moves values and converts each once per dtype step.
      BOOST_TEST(test::max_abs_error(got, rounded(want, file, device)) == 0.0);
      BOOST_TEST(test::max_rel_error(got, want) <= rounding_tolerance(file, device));
    }
  }
  // Biases and LayerNorm parameters are f32 on the device: only the file's rounding.
  void vector(const vk::Buffer& b, const Floats& want, const std::string& what) const {
    BOOST_TEST_CONTEXT(what) {
      BOOST_REQUIRE(b.size() >= want.size() * 4);
      BOOST_TEST(test::max_abs_error(test::download(b, want.size()), rounded(want, file, DType::F32)) == 0.0);
    }
  }
};

void check_loaded(const ModelWeights& w, const Reference& ref, const ModelConfig& c, DType file) {
  const uint32_t V = c.vocab_size, T = c.context_length, C = c.emb_dim, F = c.ffn_dim;
  Checker k{file, c.dtype};
  k.matrix(w.tok_emb, V, C, ref.tok, "tok_emb");
  k.matrix(w.pos_emb, T, C, ref.pos, "pos_emb");
  BOOST_REQUIRE(w.layers.size() == c.n_layers);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const auto& L = ref.layers[l];
    const auto& g = w.layers[l];
    std::string at = " layer " + std::to_string(l);
    k.vector(g.ln1_g, L.ln1_g, "ln1_g" + at);
    k.vector(g.ln1_b, L.ln1_b, "ln1_b" + at);
    k.matrix(g.qkv, 3 * C, C, concat({&L.q, &L.k, &L.v}), "qkv" + at);
    k.vector(g.qkv_b, c.qkv_bias ? concat({&L.qb, &L.kb, &L.vb}) : Floats(3 * C, 0.0f), "qkv_b" + at);
    k.matrix(g.attn_out, C, C, L.o, "attn_out" + at);
    bool has_ob = c.layout != "custom" || c.names.count("attn_out_bias");
    k.vector(g.attn_out_b, has_ob ? L.ob : Floats(C, 0.0f), "attn_out_b" + at);
    k.vector(g.ln2_g, L.ln2_g, "ln2_g" + at);
    k.vector(g.ln2_b, L.ln2_b, "ln2_b" + at);
    k.matrix(g.fc, F, C, L.fc, "fc" + at);
    k.vector(g.fc_b, L.fcb, "fc_b" + at);
    k.matrix(g.proj, C, F, L.proj, "proj" + at);
    k.vector(g.proj_b, L.projb, "proj_b" + at);
  }
  if (c.final_norm) {
    k.vector(w.lnf_g, ref.lnf_g, "lnf_g");
    k.vector(w.lnf_b, ref.lnf_b, "lnf_b");
  } else {
    BOOST_TEST(w.lnf_g.empty());
    BOOST_TEST(w.lnf_b.empty());
  }
  if (c.tie_embeddings) {
    BOOST_TEST(w.head.rows == 0u);
    BOOST_TEST(&w.lm_head() == &w.tok_emb);
  } else {
    k.matrix(w.head, V, C, ref.head, "head");
    BOOST_TEST(&w.lm_head() == &w.head);
  }
  if (c.out_bias)
    k.vector(w.head_b, ref.head_b, "head_b");
  else
    BOOST_TEST(w.head_b.empty());
  BOOST_TEST(w.device_bytes() == weights_device_bytes(c));
}

// Loading must fail with an InputError whose message contains every one of `parts`.
template <class F>
void expect_input_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    BOOST_ERROR("loaded; expected an error containing '" << parts.front() << "'");
  } catch (const InputError& e) {
    std::string msg = e.what();
    BOOST_TEST_INFO("message: " << msg);
    for (const auto& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "missing '" << p << "'");
  }
}

const DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(weights, test::NoValidationMessages)

BOOST_AUTO_TEST_CASE(hf_gpt2_with_and_without_prefix) {
  for (auto [label, ctx] : test::all_contexts())
    for (std::string prefix : {"", "transformer."})
      for (DType file : kDTypes)
        for (DType device : kDTypes) {
          ModelConfig c = tiny_config();
          c.dtype = device;
          Reference ref = make_reference(c, 100);
          std::string path = write_tensors(hf_tensors(ref, c, prefix), file);
          BOOST_TEST_CONTEXT(label << " prefix='" << prefix << "' file " << dtype_name(file) << " device "
                                   << dtype_name(device)) {
            ModelWeights w = load_weights(*ctx, c, path);
            check_loaded(w, ref, c, file);
          }
        }
}

// hf-gpt2 with the options a GPT-2 checkpoint may be paired with: untied (lm_head.weight),
// no qkv bias (the file's c_attn.bias is ignored), no final norm.
BOOST_AUTO_TEST_CASE(hf_gpt2_untied_without_qkv_bias_or_final_norm) {
  ModelConfig c = tiny_config();
  c.tie_embeddings = false;
  c.qkv_bias = false;
  c.final_norm = false;
  Reference ref = make_reference(c, 200);
  std::string path = write_tensors(hf_tensors(ref, c, "transformer."), DType::F32);
  check_loaded(load_weights(test::context(), c, path), ref, c, DType::F32);
}

BOOST_AUTO_TEST_CASE(custom_layouts_separate_and_fused_both_orientations) {
  for (std::string linear : {"out_in", "in_out"})
    for (bool fused : {false, true})
      for (DType file : kDTypes)
        for (DType device : kDTypes) {
          ModelConfig c = fused ? fused_qkv_config(linear) : separate_qkv_config(linear);
          c.dtype = device;
          Reference ref = make_reference(c, 300);
          std::string path = write_tensors(custom_tensors(ref, c), file);
          BOOST_TEST_CONTEXT(linear << (fused ? " fused" : " separate") << " file " << dtype_name(file) << " device "
                                    << dtype_name(device)) {
            check_loaded(load_weights(test::context(), c, path), ref, c, file);
          }
        }
}

// The config names one file; `weights_path` overrides it.
BOOST_AUTO_TEST_CASE(weights_path_overrides_config) {
  ModelConfig c = tiny_config();
  Reference ref = make_reference(c, 400);
  c.weights_file = write_tensors(hf_tensors(ref, c, ""), DType::F32, "from-config.safetensors");
  check_loaded(load_weights(test::context(), c), ref, c, DType::F32);
  Reference other = make_reference(c, 500);
  std::string path = write_tensors(hf_tensors(other, c, ""), DType::F32, "override.safetensors");
  check_loaded(load_weights(test::context(), c, path), other, c, DType::F32);
  c.weights_file = (temp_dir() / "absent.safetensors").string();
  expect_input_error([&] { load_weights(test::context(), c); }, {"absent.safetensors", "cannot open"});
}

// A weights file truncated after it was mapped and before its values are read (`cp` over
// it while a model loads): the fault is caught and named, not a silent death by SIGBUS.
BOOST_AUTO_TEST_CASE(file_truncated_while_loading) {
  ModelConfig c = tiny_config();
  Reference ref = make_reference(c, 600);
  std::string path = write_tensors(hf_tensors(ref, c, ""), DType::F32, "truncated-later.safetensors");
  BOOST_REQUIRE(fs::file_size(path) > 3 * 4096);
  WeightsFile file = WeightsFile::open(c, path);
  fs::resize_file(path, 4096);  // every page after the first is gone from under the mapping
  ModelWeights w = allocate_weights(test::context(), c);
  expect_input_error([&] { file.load_into(w); }, {path, "file changed or truncated while loading", "tensor '"});
  // The guard is gone with the load: the same file, rewritten whole, loads again.
  write_tensors(hf_tensors(ref, c, ""), DType::F32, "truncated-later.safetensors");
  check_loaded(load_weights(test::context(), c, path), ref, c, DType::F32);
}

BOOST_AUTO_TEST_CASE(missing_tensors_are_named) {
  auto& ctx = test::context();
  ModelConfig c = tiny_config();
  Reference ref = make_reference(c, 600);
  for (std::string missing : {"h.1.mlp.c_fc.bias", "h.0.attn.c_attn.bias", "ln_f.weight", "wpe.weight"}) {
    Tensors ts = hf_tensors(ref, c, "transformer.");
    BOOST_REQUIRE(ts.erase("transformer." + missing));
    std::string path = write_tensors(ts, DType::F16);
    expect_input_error([&] { load_weights(ctx, c, path); }, {path, "'transformer." + missing + "' not found"});
  }
  Tensors ts = hf_tensors(ref, c, "");
  ts.erase("wte.weight");
  std::string path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, c, path); }, {path, "'wte.weight'", "hf-gpt2"});
  // Untied needs lm_head.weight.
  ts = hf_tensors(ref, c, "");
  ts.erase("lm_head.weight");
  c.tie_embeddings = false;
  path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, c, path); }, {"'lm_head.weight' not found"});
  // Custom: a separate k projection of layer 1.
  ModelConfig s = separate_qkv_config("out_in");
  ts = custom_tensors(make_reference(s, 700), s);
  ts.erase("b.1.att.W_key.weight");
  path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, s, path); }, {"'b.1.att.W_key.weight' not found"});
}

BOOST_AUTO_TEST_CASE(wrong_shapes_are_named_with_both_shapes) {
  auto& ctx = test::context();
  ModelConfig c = tiny_config();
  Reference ref = make_reference(c, 800);
  // c_attn stored [out][in] where hf-gpt2 has Conv1D [in][out].
  Tensors ts = hf_tensors(ref, c, "");
  ts["h.1.attn.c_attn.weight"].first = {60, 20};
  std::string path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, c, path); },
                     {path, "'h.1.attn.c_attn.weight'", "shape [60, 20]", "expected [20, 60]"});
  // More positions in the file than the config's context_length.
  ts = hf_tensors(ref, c, "");
  ts["wpe.weight"] = {{12, 20}, Floats(12 * 20, 0.5f)};
  path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, c, path); }, {"'wpe.weight'", "[12, 20]", "expected [11, 20]"});
  // A 2-D bias.
  ts = hf_tensors(ref, c, "");
  ts["h.0.ln_2.bias"].first = {1, 20};
  path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, c, path); }, {"'h.0.ln_2.bias'", "[1, 20]", "expected [20]"});
  // A config that disagrees with the file: emb_dim.
  ts = hf_tensors(ref, c, "");
  path = write_tensors(ts, DType::F32);
  ModelConfig wide = c;
  wide.emb_dim = 24;
  wide.ffn_dim = 96;
  expect_input_error([&] { load_weights(ctx, wide, path); }, {"'wte.weight'", "[37, 20]", "expected [37, 24]"});
  // Custom in_out: the head is [vocab][emb] regardless, so a transposed head is an error.
  ModelConfig s = separate_qkv_config("in_out");
  ts = custom_tensors(make_reference(s, 900), s);
  ts["out_head.weight"].first = {20, 37};
  path = write_tensors(ts, DType::F32);
  expect_input_error([&] { load_weights(ctx, s, path); }, {"'out_head.weight'", "[20, 37]", "expected [37, 20]"});
}

BOOST_AUTO_TEST_CASE(unsupported_dtype_of_a_used_tensor_is_named) {
  ModelConfig c = tiny_config();
  Reference ref = make_reference(c, 1000);
  Tensors ts = hf_tensors(ref, c, "");
  ts.erase("ln_f.bias");
  SafetensorsWriter w;
  for (const auto& [n, t] : ts) w.add_f32(n, DType::F32, t.first, t.second);
  w.add_raw("ln_f.bias", "F64", {20}, std::string(160, '\0'));
  std::string path = (temp_dir() / "f64.safetensors").string();
  w.write(path);
  expect_input_error([&] { load_weights(test::context(), c, path); }, {"'ln_f.bias'", "F64"});
}

// A matrix split into several chunks (as GPT-2's LM head is on a 128 MiB binding limit)
// loads right, with staging blocks that straddle chunk boundaries, in both orientations.
// torch.save keeps a view as it is: a transposed matrix reads in row-major order, as
// torch.load gives it; a view repeating its storage's elements is refused by name.
BOOST_AUTO_TEST_CASE(torch_views_read_in_row_major_order) {
  auto src = open_tensor_source(GPTVK_SOURCE_DIR "/tests/fixtures/formats/torch/views.pt");
  const TensorInfo& t = src->get("w_t");  // arange(12).view(3, 4).t()
  BOOST_TEST(t.shape_str() == "[4, 3]");
  std::vector<float> got(12);
  BOOST_REQUIRE(src->data(t).size() == got.size() * 4);
  std::memcpy(got.data(), src->data(t).data(), 48);
  const std::vector<float> want = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_CHECK_EXCEPTION(src->get("rows"), InputError, [](const InputError& e) {
    return std::string(e.what()).find("tensor 'rows' is a view that repeats its storage's elements") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(chunked_matrix_reads_back) {
  auto& ctx = test::context();
  const uint32_t V = 301, C = 20;
  Floats head = test::random_floats(V * C, 1100);
  for (DType file : kDTypes)
    for (DType device : kDTypes)
      for (bool in_out : {false, true}) {
        SafetensorsWriter w;
        w.add_f32("head", file, in_out ? std::vector<uint64_t>{C, V} : std::vector<uint64_t>{V, C},
                  in_out ? transpose(head, V, C) : head);
        std::string path = (temp_dir() / "head.safetensors").string();
        w.write(path);
        SafetensorsFile f = SafetensorsFile::open(path);
        // 64-row chunks: 301 rows -> 5 chunks, the last one partial.
        const uint64_t row_bytes = 24ull * dtype_bytes(device);
        Matrix m = Matrix::create(ctx, device, V, C, "split head", 64 * row_bytes);
        BOOST_REQUIRE(m.chunks.size() == 5u);
        write_tensor_rows(m, 0, f, f.get("head"), in_out, 7 * C * dtype_bytes(file));  // 7-row blocks
        BOOST_TEST_CONTEXT(dtype_name(file) << " -> " << dtype_name(device) << (in_out ? " in_out" : " out_in")) {
          Checker{file, device}.matrix(m, V, C, head, "head");
          // Rows on both sides of a chunk boundary, read alone.
          Floats r = m.read_rows_f32(63, 2),
                 want = rounded(Floats(head.begin() + 63 * C, head.begin() + 65 * C), file, device);
          BOOST_TEST(test::max_abs_error(r, want) == 0.0);
        }
      }
}

BOOST_AUTO_TEST_CASE(random_weights_are_deterministic_and_shaped) {
  auto& ctx = test::context();
  ModelConfig c = tiny_config();
  c.dtype = DType::F16;
  c.qkv_bias = false;
  ModelWeights a = random_weights(ctx, c, 42), b = random_weights(ctx, c, 42), d = random_weights(ctx, c, 43);
  const uint32_t V = c.vocab_size, C = c.emb_dim, F = c.ffn_dim;
  BOOST_TEST(a.tok_emb.rows == V);
  BOOST_TEST(a.pos_emb.rows == c.context_length);
  BOOST_TEST(a.layers.size() == c.n_layers);
  BOOST_TEST(a.layers[1].qkv.rows == 3 * C);
  BOOST_TEST(a.layers[1].fc.rows == F);
  BOOST_TEST(a.layers[1].proj.cols == F);
  BOOST_TEST(a.head.rows == 0u);
  BOOST_TEST(a.head_b.empty());
  BOOST_TEST(!a.lnf_g.empty());
  BOOST_TEST(a.device_bytes() == weights_device_bytes(c));
  BOOST_TEST(test::max_abs_error(test::download(a.layers[0].qkv_b, 3 * C), Floats(3 * C, 0.0f)) == 0.0);
  auto same = [](const Matrix& x, const Matrix& y) {
    return test::max_abs_error(x.read_rows_f32(0, x.rows), y.read_rows_f32(0, y.rows)) == 0.0;
  };
  BOOST_TEST(same(a.tok_emb, b.tok_emb));
  BOOST_TEST(same(a.layers[1].proj, b.layers[1].proj));
  BOOST_TEST(test::max_abs_error(test::download(a.layers[1].fc_b, F), test::download(b.layers[1].fc_b, F)) == 0.0);
  BOOST_TEST(!same(a.tok_emb, d.tok_emb));
  BOOST_TEST(!same(a.layers[0].qkv, a.layers[1].qkv));  // every tensor draws its own values
  // The token embedding's spread is what makes the tied head's logits peaked: ~3/sqrt(C).
  Floats e = a.tok_emb.read_rows_f32(0, V);
  double ss = 0;
  for (float x : e) ss += double(x) * x;
  double spread = std::sqrt(ss / e.size());
  BOOST_TEST(spread == 3.0 / std::sqrt(double(C)), boost::test_tools::tolerance(0.1));
  Floats g = test::download(a.layers[0].ln1_g, C);
  for (float x : g) BOOST_TEST((x > 0.9f && x < 1.1f));

  ModelConfig u = tiny_config();
  u.tie_embeddings = false;
  u.out_bias = true;
  u.final_norm = false;
  ModelWeights h = random_weights(ctx, u, 1);
  BOOST_TEST(h.head.rows == V);
  BOOST_TEST(&h.lm_head() == &h.head);
  BOOST_TEST(h.head_b.size() >= V * 4u);
  BOOST_TEST(h.lnf_g.empty());
  BOOST_TEST(h.device_bytes() == weights_device_bytes(u));
}

BOOST_AUTO_TEST_CASE(model_too_big_for_the_device) {
  auto& ctx = test::context();
  ModelConfig c = tiny_config();
  c.emb_dim = 16384;
  c.n_heads = 128;
  c.ffn_dim = 65536;
  c.n_layers = 4096;  // ~26 TB in f32
  BOOST_REQUIRE(weights_device_bytes(c) > ctx.caps().device_local_bytes);
  try {
    random_weights(ctx, c, 1);
    BOOST_ERROR("allocated a model larger than the device");
  } catch (const DeviceError& e) {
    std::string msg = e.what();
    BOOST_TEST_INFO(msg);
    BOOST_TEST(msg.find("model needs") != std::string::npos);
    uint64_t have_mib = (ctx.caps().device_local_bytes + (1 << 20) - 1) >> 20;
    if (ctx.info().is_cpu())  // a CPU device's bound is the host memory available (weights.cpp)
      BOOST_TEST(msg.find(" MiB (a CPU device: the host memory available now)") != std::string::npos);
    else
      BOOST_TEST(msg.find("device has " + std::to_string(have_mib) + " MiB") != std::string::npos);
  }
  // The same check runs before a file is read.
  ModelConfig small = tiny_config();
  std::string path = write_tensors(hf_tensors(make_reference(small, 1200), small, ""), DType::F32);
  BOOST_CHECK_THROW(load_weights(ctx, c, path), DeviceError);
}

BOOST_AUTO_TEST_SUITE_END()
