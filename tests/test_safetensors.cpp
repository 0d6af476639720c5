// The safetensors reader: values written by SafetensorsWriter read back bit for bit in
// each loadable dtype, and every kind of broken file is an InputError naming the file
// and the cause (and the tensor, where one is to blame), never a crash.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "models/safetensors.hpp"
#include "tests/support/safetensors_writer.hpp"

using namespace gptvk;

namespace {

using test::temp_dir;

std::string write_bytes(const std::string& bytes, const std::string& name = "t.safetensors") {
  return test::write_temp_file(name, bytes);
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file from a hand-written header (for headers the writer would never produce).
std::string raw_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

// Opening `bytes` must fail with an InputError naming the file and containing `parts`.
void expect_rejected(const std::string& bytes, const std::vector<std::string>& parts) {
  std::string path = write_bytes(bytes);
  try {
    SafetensorsFile::open(path);
    BOOST_ERROR("opened a broken file; expected an error containing '" << parts.front() << "'");
  } catch (const InputError& e) {
    std::string msg = e.what();
    BOOST_TEST_INFO("message: " << msg);
    BOOST_TEST(msg.find(path) != std::string::npos);
    for (const auto& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "missing '" << p << "'");
  }
}

std::vector<uint16_t> random_bits16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = static_cast<uint16_t>(rng());
  return v;
}

// Two F32 tensors a [2,3] and b [4]: a well-formed file to corrupt.
std::string good_file() {
  SafetensorsWriter w;
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10};
  w.add("a", DType::F32, {2, 3}, a.data());
  w.add("b", DType::F32, {4}, b.data());
  return w.bytes();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors)

BOOST_AUTO_TEST_CASE(round_trip_every_dtype_bit_exact) {
  std::mt19937 rng(1);
  std::vector<float> f32(7 * 5);
  for (auto& x : f32) x = std::uniform_real_distribution<float>(-3, 3)(rng);
  f32[0] = -0.0f;
  f32[1] = 1e-40f;  // subnormal survives untouched
  auto f16 = random_bits16(3 * 9, 2), bf16 = random_bits16(11, 3);
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.add("layer.0.f32", DType::F32, {7, 5}, f32.data());
  w.add("f16", DType::F16, {3, 1, 9}, f16.data());
  w.add("bf16", DType::BF16, {11}, bf16.data());
  w.add("scalar", DType::F32, {}, f32.data());  // rank 0: one element
  w.add("empty", DType::F16, {0, 4}, nullptr);
  std::string path = write_bytes(w.bytes());

  SafetensorsFile f = SafetensorsFile::open(path);
  BOOST_TEST(f.path() == path);
  BOOST_TEST(f.tensors().size() == 5u);
  BOOST_TEST(f.metadata().at("format") == "pt");

  const TensorInfo& t32 = f.get("layer.0.f32");
  BOOST_TEST((t32.dtype == DType::F32));
  BOOST_TEST(t32.supported);
  BOOST_TEST(t32.shape == (std::vector<uint64_t>{7, 5}), boost::test_tools::per_element());
  BOOST_TEST(t32.elements() == 35u);
  BOOST_TEST(t32.shape_str() == "[7, 5]");
  auto d32 = f.data(t32);
  BOOST_REQUIRE(d32.size() == f32.size() * 4);
  BOOST_TEST(std::memcmp(d32.data(), f32.data(), d32.size()) == 0);

  const TensorInfo& t16 = f.get("f16");
  BOOST_TEST((t16.dtype == DType::F16));
  BOOST_TEST(t16.shape == (std::vector<uint64_t>{3, 1, 9}), boost::test_tools::per_element());
  BOOST_REQUIRE(f.data(t16).size() == f16.size() * 2);
  BOOST_TEST(std::memcmp(f.data(t16).data(), f16.data(), f16.size() * 2) == 0);

  const TensorInfo& tb = f.get("bf16");
  BOOST_TEST((tb.dtype == DType::BF16));
  BOOST_REQUIRE(f.data(tb).size() == bf16.size() * 2);
  BOOST_TEST(std::memcmp(f.data(tb).data(), bf16.data(), bf16.size() * 2) == 0);

  BOOST_TEST(f.get("scalar").elements() == 1u);
  BOOST_TEST(f.data(f.get("scalar")).size() == 4u);
  BOOST_TEST(f.get("empty").bytes() == 0u);

  // Dropping a tensor's pages from the mapping does not lose its data.
  f.release(t32);
  BOOST_TEST(std::memcmp(f.data(t32).data(), f32.data(), f32.size() * 4) == 0);

  // The file stays mapped when the object moves.
  SafetensorsFile moved = std::move(f);
  BOOST_TEST(std::memcmp(moved.data(moved.get("bf16")).data(), bf16.data(), bf16.size() * 2) == 0);
}

// The writer pads its header to 8 bytes; files from elsewhere may not be padded, so data
// can sit at any byte offset.
BOOST_AUTO_TEST_CASE(unpadded_header_reads_back) {
  std::vector<float> v = {1.5f, -2.25f, 3.0f};
  std::string data(reinterpret_cast<const char*>(v.data()), 12);
  std::string header = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  BOOST_REQUIRE(header.size() % 4 != 0);
  SafetensorsFile f = SafetensorsFile::open(write_bytes(raw_file(header, data)));
  BOOST_TEST(std::memcmp(f.data(f.get("x")).data(), v.data(), 12) == 0);
}

BOOST_AUTO_TEST_CASE(missing_and_unsupported_tensors_named_on_use) {
  SafetensorsWriter w;
  std::vector<float> a = {1, 2};
  w.add("a", DType::F32, {2}, a.data());
  w.add_raw("h.0.attn.bias", "I64", {2}, std::string(16, '\0'));  // a buffer nothing loads
  w.add_raw("mask", "BOOL", {3}, std::string(3, '\1'));
  std::string path = write_bytes(w.bytes());
  SafetensorsFile f = SafetensorsFile::open(path);  // other dtypes do not stop the file loading
  BOOST_TEST(f.find("nope") == nullptr);
  BOOST_TEST(f.contains("a"));
  BOOST_REQUIRE(f.find("h.0.attn.bias"));
  BOOST_TEST(!f.find("h.0.attn.bias")->supported);
  BOOST_TEST(f.find("h.0.attn.bias")->dtype_name == "I64");
  try {
    f.get("h.0.attn.bias");
    BOOST_ERROR("read an I64 tensor as weights");
  } catch (const InputError& e) {
    std::string msg = e.what();
    BOOST_TEST(msg.find(path) != std::string::npos);
    BOOST_TEST(msg.find("'h.0.attn.bias'") != std::string::npos);
    BOOST_TEST(msg.find("I64") != std::string::npos);
  }
  try {
    f.get("wte.weight");
    BOOST_ERROR("found a tensor that is not there");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("'wte.weight' not found") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(empty_short_and_missing_files) {
  expect_rejected("", {"empty file"});
  expect_rejected("abc", {"3-byte file"});
  expect_rejected(le64(0).substr(0, 7), {"7-byte file"});
  try {
    SafetensorsFile::open((temp_dir() / "nope.safetensors").string());
    BOOST_ERROR("opened a file that does not exist");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("nope.safetensors: cannot open") != std::string::npos);
  }
  BOOST_CHECK_THROW(SafetensorsFile::open(temp_dir().string()), InputError);  // a directory
}

BOOST_AUTO_TEST_CASE(truncated_files) {
  std::string good = good_file();
  BOOST_REQUIRE_NO_THROW(SafetensorsFile::open(write_bytes(good)));
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  // Cut inside the header: the declared header length runs past the end.
  expect_rejected(good.substr(0, 8 + header_len / 2), {"header length", "runs past the end of the file"});
  expect_rejected(good.substr(0, 8), {"header length"});
  // Cut inside the data: the last tensor's bytes run past the end.
  expect_rejected(good.substr(0, good.size() - 1), {"'b'", "runs past the end", "truncated"});
  expect_rejected(good.substr(0, 8 + header_len + 4), {"runs past the end", "truncated"});
}

BOOST_AUTO_TEST_CASE(header_length_beyond_file) {
  std::string good = good_file();
  expect_rejected(le64(1ull << 40) + good.substr(8), {"header length 1099511627776", "runs past the end"});
  expect_rejected(le64(~0ull) + good.substr(8), {"header length", "runs past the end"});
}

BOOST_AUTO_TEST_CASE(malformed_json) {
  expect_rejected(raw_file("{\"a\": {\"dtype\": \"F32\",", ""), {"malformed JSON"});
  expect_rejected(raw_file("not json at all", ""), {"malformed JSON"});
  expect_rejected(raw_file("[1, 2, 3]", ""), {"not an object"});
  expect_rejected(raw_file(R"({"a": 5})", ""), {"'a'", "not an object"});
  expect_rejected(raw_file(R"({"__metadata__": [1]})", ""), {"__metadata__"});
  expect_rejected(raw_file(R"({"__metadata__": {"k": 1}})", ""), {"__metadata__", "'k'"});
  // Missing or mistyped fields.
  expect_rejected(raw_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')), {"'a'", "dtype"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", std::string(4, '\0')), {"'a'", "shape"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
                  {"'a'", "shape"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", std::string(4, '\0')),
                  {"'a'", "shape"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", std::string(4, '\0')), {"'a'", "data_offsets"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", std::string(4, '\0')),
                  {"'a'", "data_offsets"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", std::string(4, '\0')),
                  {"'a'", "data_offsets"});
}

BOOST_AUTO_TEST_CASE(offsets_out_of_range_or_overlapping) {
  std::string data(32, '\0');
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[10],"data_offsets":[0,40]}})", data),
                  {"'a'", "runs past the end of the data area (32 bytes)"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[32,36]}})", data), {"'a'", "runs past"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", data), {"'a'", "reversed"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                           data),
                  {"'b' overlaps tensor 'a'"});
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                           R"("b":{"dtype":"F16","shape":[2],"data_offsets":[12,16]}})",
                           data),
                  {"overlaps"});
  // Adjacent tensors and a zero-sized one at a shared offset are fine.
  BOOST_CHECK_NO_THROW(
      SafetensorsFile::open(write_bytes(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                                 R"("z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                                                 R"("b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})",
                                                 data))));
}

BOOST_AUTO_TEST_CASE(dtype_and_shape_must_match_the_bytes) {
  std::string data(64, '\0');
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[3,3],"data_offsets":[0,32]}})", data),
                  {"'w'", "[3, 3]", "36 bytes", "32 bytes"});
  expect_rejected(raw_file(R"({"w":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})", data),
                  {"'w'", "needs 8 bytes"});
  expect_rejected(raw_file(R"({"w":{"dtype":"BF16","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})", data),
                  {"'w'", "overflows"});
  expect_rejected(raw_file(R"({"w":{"dtype":"Q4_K","shape":[4],"data_offsets":[0,16]}})", data),
                  {"'w'", "unknown dtype 'Q4_K'"});
  // Known non-float dtypes are checked for size too.
  expect_rejected(raw_file(R"({"ids":{"dtype":"I64","shape":[3],"data_offsets":[0,16]}})", data),
                  {"'ids'", "needs 24 bytes"});
}

BOOST_AUTO_TEST_SUITE_END()
