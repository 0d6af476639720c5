// Weights files whose headers parse but whose content no model can run, as rows of the
// bad-input matrix (tests/support/cli_matrix.hpp): NaN and infinite values (in an f32
// vector, an f32 matrix, an F16 GGUF matrix and a Q8_0 block scale), a layer past the
// model's count at any index, a GGUF bias in some layers only, a shape of more dimensions
// than any tensor has, a pickle that makes objects or memo entries without end, a torch.save
// zip whose bytes are damaged, a damaged legacy torch.save file, an empty file as --model,
// and `serve` with a tokenizer that is not the model's; and weights past Q8_0's range, which
// load clamped with one warning. Unchecked, the first four would run with exit status 0 and
// give NaN logits, a shallower model, or a layer's bias unused.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/error.hpp"
#include "models/gguf_file.hpp"
#include "models/npy.hpp"
#include "models/torch_pickle.hpp"
#include "models/zip_archive.hpp"
#include "tests/support/cli_matrix.hpp"
#include "tests/support/pickle_writer.hpp"

using namespace gptvk::test::matrix;

namespace {

const fs::path kGguf = kSource / "tests/fixtures/gguf";

// Writes `v` over the bytes at `at` of `bytes`.
template <class T>
void poke(std::string& bytes, size_t at, T v) {
  BOOST_REQUIRE(at + sizeof v <= bytes.size());
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

struct GgufRows : Rows {
  // The fixture GGUF `file` with `edit` applied to its bytes, run through forward -m.
  CliResult forward_gguf(const std::string& file, const std::function<void(std::string&)>& edit) {
    std::string bytes = read_text(kGguf / file);
    edit(bytes);
    const fs::path p = dir / "bad.gguf";
    write_text(p, bytes);
    return run_cli({"forward", "-m", p.string(), "--ids", "1,2", "--out", (dir / "out.npy").string()});
  }
  // Where tensor `name`'s data starts in the GGUF `bytes`.
  static size_t data_at(const std::string& bytes, const std::string& name) {
    const auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
    const gptvk::GgufFile f = gptvk::GgufFile::parse("fixture", span);
    const gptvk::GgufTensor* t = f.tensor(name);
    BOOST_REQUIRE(t);
    return static_cast<size_t>(f.data(*t).data() - span.data());
  }
  // Every "from" in `bytes` replaced by the same-length "to".
  static void rename_all(std::string& bytes, const std::string& from, const std::string& to) {
    BOOST_REQUIRE(from.size() == to.size());
    for (size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + 1))
      bytes.replace(at, from.size(), to);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(damaged_weights, GgufRows)

BOOST_AUTO_TEST_CASE(nan_and_infinities_are_refused_by_name) {
  auto f32_at = [](const std::string& tensor, size_t element, float v) {
    return [=](Safetensors& st) {
      const size_t at = st.header[tensor]["data_offsets"][0].get<size_t>() + 4 * element;
      poke(st.data, at, v);
    };
  };
  check(forward_lying(f32_at("ln_f.weight", 5, std::numeric_limits<float>::quiet_NaN())),
        {1, {"model.safetensors: tensor 'ln_f.weight' holds 1 NaN or infinite value (the first at element 5)"}});
  check(forward_lying(f32_at("h.1.mlp.c_fc.weight", 70, -std::numeric_limits<float>::infinity())),
        {1, {"tensor 'h.1.mlp.c_fc.weight' holds 1 NaN or infinite value (the first at element 70)"}});
  // F16 weights (0x7c00: +infinity), and a Q8_0 block's f16 scale (0x7e00: NaN), which
  // reaches the device as it is.
  check(forward_gguf("small-F16.gguf",
                     [](std::string& b) { poke<uint16_t>(b, data_at(b, "blk.0.attn_qkv.weight") + 2 * 9, 0x7c00); }),
        {1, {"bad.gguf: tensor 'blk.0.attn_qkv.weight' holds 1 NaN or infinite value (the first at element 9)"}});
  check(forward_gguf("small-Q8_0.gguf",
                     [](std::string& b) { poke<uint16_t>(b, data_at(b, "blk.1.ffn_up.weight") + 34 * 3, 0x7e00); }),
        {1, {"tensor 'blk.1.ffn_up.weight' holds 1 NaN or infinite block scale (the first at block 3)"}});
}

// Finite weights past what Q8_0's f16 block scales hold (65504 x 127) are clamped and said
// once per storage dtype, on one stderr line; the logits stay finite, not NaN.
BOOST_AUTO_TEST_CASE(a_clamped_quantized_load_says_so_and_stays_finite) {
  Safetensors st = Safetensors::read(kFixture / "model.safetensors");
  const uint64_t at = st.header["h.0.mlp.c_fc.weight"]["data_offsets"][0].get<uint64_t>();
  const float big = 1e7f;
  std::memcpy(st.data.data() + at, &big, 4);
  const fs::path weights = dir / "model.safetensors";
  write_text(weights, st.bytes());
  const std::string cfg = config(replace_line(replace_line(fixture_config, "dtype = \"f32\"", "dtype = \"q8_0\""),
                                              "file = \"model.safetensors\"", "file = \"" + weights.string() + "\""));
  const std::string out = (dir / "o.npy").string();
  const CliResult r = run_cli({"forward", "--config", cfg, "--ids", "1,2,3", "--out", out});
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err == "gpt-vk: " + weights.string() +
                          ": 1 weight beyond q8_0's range (|w| > 8319008) clamped to +-8319008 in q8_0 storage; "
                          "--dtype f32 or bf16 (or [weights] dtype) keeps them\n");
  const gptvk::NpyArray logits = gptvk::read_npy(out);
  BOOST_TEST(logits.data.size() == 3u * 311u);
  BOOST_TEST(std::all_of(logits.data.begin(), logits.data.end(), [](float x) { return std::isfinite(x); }));
}

// Layer 1's tensors named as layer 7's (GGUF) or layer 5's (safetensors), the model
// declaring one layer: a tensor of any layer past the count is refused, not only of index
// n_layers, so the model cannot silently run one layer.
BOOST_AUTO_TEST_CASE(a_layer_past_the_count_at_any_index) {
  check(forward_gguf("small-F16.gguf",
                     [](std::string& b) {
                       rename_all(b, "blk.1.", "blk.7.");
                       poke<uint32_t>(b, b.find("gpt2.block_count") + 16 + 4, 1);
                     }),
        {1, {"bad.gguf: holds tensor 'blk.7.", "of layer 7, but the model declares 1 layer"}});
  Safetensors st = Safetensors::read(kFixture / "model.safetensors");
  nlohmann::json renamed;
  for (auto& [name, entry] : st.header.items())
    renamed[name.rfind("h.1.", 0) == 0 ? "h.5." + name.substr(4) : name] = entry;
  st.header = renamed;
  write_text(dir / "layers.safetensors", st.bytes());
  check(forward(fixture_with("n_layers = 2", "n_layers = 1"), (dir / "layers.safetensors").string()),
        {1, {"layers.safetensors: holds tensor 'h.5.", "of layer 5, but the model declares 1 layer"}});
}

// llama.cpp's gpt2 has every bias in every layer; a file with one in layer 1 but not in
// layer 0 is refused rather than run with that bias ignored.
BOOST_AUTO_TEST_CASE(a_bias_in_some_layers_only) {
  check(forward_gguf("small-F16.gguf",
                     [](std::string& b) { rename_all(b, "blk.0.attn_output.bias", "blk.0.attn_output.xias"); }),
        {1, {"bad.gguf: tensor 'blk.0.attn_output.bias' not found, but 'blk.1.attn_output.bias' is"}});
  check(forward_gguf("small-F16.gguf", [](std::string& b) { rename_all(b, "blk.1.ffn_down.bias", "blk.1.ffn_down.xias"); }),
        {1, {"tensor 'blk.1.ffn_down.bias' not found, but 'blk.0.ffn_down.bias' is"}});
}

// A gpt2 tokenizer without its merges would make every byte a token: refused, as llama.cpp
// refuses it.
BOOST_AUTO_TEST_CASE(a_gguf_tokenizer_without_merges) {
  check(forward_gguf("small-F16.gguf", [](std::string& b) { rename_all(b, "tokenizer.ggml.merges", "tokenizer.ggml.mergez"); }),
        {1, {"bad.gguf: missing metadata key tokenizer.ggml.merges"}});
}

// A 9-dimensional shape of ones (one element, consistent with its offsets): refused while
// the header streams, before millions of such dimensions could fill memory and the message.
BOOST_AUTO_TEST_CASE(shapes_of_more_than_eight_dimensions) {
  check(forward_lying([](Safetensors& st) {
          st.header["ln_f.bias"]["shape"] = std::vector<int>(9, 1);
          auto& off = st.header["ln_f.bias"]["data_offsets"];
          off[1] = off[0].get<uint64_t>() + 4;
        }),
        {1, {"model.safetensors: a tensor's shape has more than 8 dimensions"}});
}

// A 300 KB pickle that makes a value per byte, at hundreds of bytes of memory per byte of
// file without the caps: TUPLE1 over and over wraps one tuple in another (objects);
// MEMOIZE over and over files the same dict again and again (memo entries).
BOOST_AUTO_TEST_CASE(pickles_that_make_values_without_end) {
  const std::pair<std::string, std::string> bombs[] = {
      {"\x80\x02)" + std::string(300000, '\x85') + ".", "bomb.pt: data.pkl: makes more than 262144 objects"},
      {"\x80\x04}" + std::string(300000, '\x94') + ".", "bomb.pt: data.pkl: memoizes more than 262144 values"}};
  for (const auto& bomb : bombs)  // (not a structured binding: Debian 12's clang cannot capture one)
    BOOST_CHECK_EXCEPTION(
        gptvk::read_state_dict_pickle("bomb.pt", std::as_bytes(std::span(bomb.first.data(), bomb.first.size()))),
        gptvk::InputError, [&](const gptvk::InputError& e) {
          BOOST_TEST_INFO(e.what());
          return std::string(e.what()).find(bomb.second) == 0;
        });
}

namespace {

// name -> a one-element f32 tensor of `rank` ones, then `repeats` more pairs that only
// refer to the memoized first (2 x 5 bytes a pair).
std::string repeated_tensor_pickle(const std::string& name, size_t rank, size_t repeats) {
  using namespace gptvk::test::pickle;
  std::string p = "\x80\x02}(" + unicode(name) + memo_put(1) + one_element_tensor(rank) + memo_put(2);
  for (size_t i = 0; i < repeats; ++i) p += memo_get(1) + memo_get(2);
  return p + "u.";
}

}  // namespace

// A pickle can name one memoized value again and again at 5 bytes a time, and reading the
// state dict copies each use: names are held to 1 KiB each and 16 MiB in all, shapes to 8
// dimensions, before they are copied, so a small file cannot ask for gigabytes.
BOOST_AUTO_TEST_CASE(pickles_that_repeat_a_memoized_value) {
  const std::pair<std::string, std::string> cases[] = {
      {repeated_tensor_pickle(std::string(1025, 'k'), 1, 0),
       "big.pt: data.pkl: a tensor name of 1025 bytes (more than 1024): kkk"},
      {repeated_tensor_pickle(std::string(1000, 'k'), 1, 20000),
       "big.pt: data.pkl: tensor names of more than 16 MiB in all"},
      {repeated_tensor_pickle("w", 9, 0), "big.pt: data.pkl: a tensor of rank 9 (more than 8)"}};
  for (const auto& c : cases)
    BOOST_CHECK_EXCEPTION(
        gptvk::read_state_dict_pickle("big.pt", std::as_bytes(std::span(c.first.data(), c.first.size()))),
        gptvk::InputError, [&](const gptvk::InputError& e) {
          BOOST_TEST_INFO(e.what());
          return std::string(e.what()).find(c.second) == 0 && std::string(e.what()).size() < 200;
        });
  // Below the bounds the same pickle reads: 1,000 pairs of one 1000-byte name, rank 8.
  const std::string fits = repeated_tensor_pickle(std::string(1000, 'k'), 8, 1000);
  const auto tensors = gptvk::read_state_dict_pickle("fits.pt", std::as_bytes(std::span(fits.data(), fits.size())));
  BOOST_TEST(tensors.size() == 1001u);
  BOOST_TEST(tensors.front().second.size == std::vector<uint64_t>(8, 1), boost::test_tools::per_element());
}

// A torch.save zip whose stored bytes are damaged: one bit of a storage (its CRC-32 no longer
// matches), or a local header naming another entry (the directory's offsets then point into
// the wrong bytes). Both would otherwise load and run with exit status 0.
BOOST_AUTO_TEST_CASE(a_damaged_torch_zip) {
  const fs::path torch = kSource / "tests/fixtures/formats/torch";
  const std::string good = read_text(torch / "gpt2_f16.pt");
  auto forward = [&](const std::string& bytes) {
    write_text(dir / "bad.pt", bytes);
    return run_cli({"forward", "--config", (torch / "gpt2_f16.toml").string(), "--weights", (dir / "bad.pt").string(),
                    "--ids", "1,2", "--out", (dir / "out.npy").string()});
  };
  const auto span = std::as_bytes(std::span(good.data(), good.size()));
  const gptvk::ZipArchive zip = gptvk::ZipArchive::parse("gpt2_f16.pt", span);
  std::span<const std::byte> storage;
  BOOST_REQUIRE(zip.find("gpt2_f16/data/0", storage) && storage.size() > 100);
  std::string flipped = good;
  flipped[zip.offset_of(storage) + 100] ^= 0x40;
  check(forward(flipped), {1, {"bad.pt: entry 'gpt2_f16/data/0' fails its CRC-32 check: the file is damaged"}});
  std::string renamed = good;
  const size_t local_name = renamed.find("gpt2_f16/data/0");  // local headers come before the directory
  renamed[local_name + 14] = '9';
  check(forward(renamed), {1, {"bad.pt: entry 'gpt2_f16/data/0': its local header names another entry"}});
}

// A legacy (non-zip) torch.save file has no checksums: what can be checked is that the
// storages' records agree with the pickle and stay inside the file. Cut short, an element
// count that disagrees, a key no tensor names, a big-endian writer: each one line, exit 1.
BOOST_AUTO_TEST_CASE(a_damaged_legacy_torch_file) {
  const fs::path torch = kSource / "tests/fixtures/formats/torch";
  const std::string good = read_text(torch / "gpt2_lmhead_legacy.pt");
  auto forward = [&](const std::string& bytes) {
    write_text(dir / "bad.pt", bytes);
    return run_cli({"forward", "--config", (torch / "gpt2_lmhead_legacy.toml").string(), "--weights",
                    (dir / "bad.pt").string(), "--ids", "1,2", "--out", (dir / "out.npy").string()});
  };
  const auto span = std::as_bytes(std::span(good.data(), good.size()));
  const gptvk::LegacyTorchFile file = gptvk::read_legacy_torch("gpt2_lmhead_legacy.pt", span);
  BOOST_REQUIRE(file.storages.size() > 2);
  const auto& [key, first] = *std::min_element(file.storages.begin(), file.storages.end(),
                                               [](const auto& a, const auto& b) { return a.second.data() < b.second.data(); });
  const size_t record = size_t(first.data() - span.data()) - 8;  // the first storage's element count
  check(forward(good.substr(0, good.size() - 100)), {1, {"bad.pt: storage", "elements run past the end of the file: truncated"}});
  std::string miscounted = good;
  poke<uint64_t>(miscounted, record, first.size() / 2 + 1);
  check(forward(miscounted), {1, {"bad.pt: storage " + key + " holds " + std::to_string(first.size() / 2 + 1) +
                                  " elements by its record, " + std::to_string(first.size() / 2) + " by the pickle"}});
  std::string unnamed = good;
  const size_t listed = unnamed.rfind("X" + std::string(1, char(key.size())) + std::string(3, '\0') + key, record);
  BOOST_REQUIRE(listed != std::string::npos);  // the key list, the last pickle
  unnamed[listed + 5] = unnamed[listed + 5] == '1' ? '2' : '1';
  check(forward(unnamed), {1, {"bad.pt: storage", "is listed, but no tensor names it"}});
  std::string big_endian = good;
  const size_t flag = big_endian.find("little_endian");
  BOOST_REQUIRE(flag != std::string::npos && big_endian[flag + 15] == '\x88');  // BINPUT n, NEWTRUE
  big_endian[flag + 15] = '\x89';
  check(forward(big_endian), {1, {"bad.pt: system info (the pickle at byte 21): written on a big-endian machine"}});
}

BOOST_AUTO_TEST_CASE(an_empty_or_short_file_as_model) {
  write_text(dir / "empty.bin", "");
  write_text(dir / "abc.txt", "abc");
  for (const char* name : {"empty.bin", "abc.txt"}) {
    const std::string path = (dir / name).string();
    const bool empty = std::string(name) == "empty.bin";
    check(run_cli({"forward", "-m", path, "--ids", "1", "--out", (dir / "out.npy").string()}),
          {1, {name, "not GGUF, a Hugging Face snapshot folder or a TOML config", empty ? "an empty file" : "61 62 63"}});
  }
}

// serve refuses a tokenizer of another vocabulary size, as generate does, rather than
// answering every request with an error about ids.
BOOST_AUTO_TEST_CASE(serve_with_a_tokenizer_that_is_not_the_models) {
  const std::string config = fixture_with("", "");
  const fs::path tok = kSource / "models/gpt2-tokenizer";
  write_text(config, read_text(config) + "\n[tokenizer]\nvocab = \"" + (tok / "encoder.json").string() +
                         "\"\nmerges = \"" + (tok / "vocab.bpe").string() + "\"\n");
  check(run_cli({"serve", "--config", config, "--port", "0"}, {}, 30),
        {1, {"the tokenizer", "has 50257 tokens but model.vocab_size is 311"}});
}

BOOST_AUTO_TEST_SUITE_END()
