// The bad-input matrix, continued (tests/support/cli_matrix.hpp has the rules every row
// checks): output that cannot be written, inputs that never end, block or change, files
// that are not what they claim, strict numbers from flags and the environment, and the
// context and vocabulary rules. Suite names and section rules carry each bad-input case's number.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/sanitizers.hpp"
#include "tests/support/cli_matrix.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk::test::matrix;
using gptvk::test::CliOptions;
using gptvk::test::Stdout;

namespace {

const fs::path kDefaultConfig = kSource / "models/default/config.toml";  // V 50257, ctx 256, GPT-2 tokenizer

// A run that must succeed with exactly one warning on stderr containing `says`.
void check_warned(const CliResult& r, const std::vector<std::string>& says) {
  BOOST_TEST_INFO("command: " << r.command);
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(!r.timed_out, "hung: still running after " << r.seconds << " s");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.rfind("gpt-vk: warning: ", 0) == 0);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, "expected one warning line");
  for (const auto& s : says) BOOST_TEST(r.err.find(s) != std::string::npos, "warning lacks '" << s << "'");
}

struct IoRows : Rows {
  // "the the the ...": `n` tokens of the GPT-2 tokenizer (" the" is one token, id 262).
  static std::string prompt_of(size_t n) {
    std::string p = "the";
    for (size_t i = 1; i < n; ++i) p += " the";
    return p;
  }
  // The pipeline cache file `devices -v` names for the cache directory dir/cache.
  std::string cache_file() {
    fs::create_directories(dir / "cache");
    CliResult r = run_cli({"devices", "-v"}, {"GPTVK_CACHE_DIR=" + (dir / "cache").string()});
    size_t at = r.out.find("pipeline cache: ");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, "devices -v names no cache: " << r.out);
    std::string path = r.out.substr(at + 16);
    return path.substr(0, path.find('\n'));
  }
  CliResult devices_with_cache() {
    return run_cli({"devices", "-v"}, {"GPTVK_CACHE_DIR=" + (dir / "cache").string()});
  }
};

}  // namespace

// ---------------------------------------------------------------- 1: text lost silently
BOOST_FIXTURE_TEST_SUITE(case01_output_cannot_be_written, IoRows)

BOOST_AUTO_TEST_CASE(generate_to_full_disk) {
  CliResult r = run_cli({"generate", "--prompt", "It is", "--max-tokens", "5", "--seed", "1"}, {}, 10.0,
                        {.stdout_to = Stdout::DevFull});
  check(r, {1, {"cannot write to standard output", "No space left on device"}});
}
BOOST_AUTO_TEST_CASE(generate_into_closed_pipe_stops_at_once) {
  // The prompt's own text is the first write: nothing is generated into a dead pipe.
  CliResult r = run_cli({"generate", "--prompt", "It is", "--max-tokens", "200", "--seed", "1"}, {}, 10.0,
                        {.stdout_to = Stdout::ClosedPipe});
  check(r, {1, {"cannot write to standard output", "Broken pipe"}});
  BOOST_TEST(r.err.find("generated") == std::string::npos);
}
BOOST_AUTO_TEST_CASE(generate_stops_at_the_first_token_a_dead_pipe_refuses) {
  // An empty prompt writes nothing itself: the first generated token's write fails, and
  // the remaining 199 are never generated (no summary line, well under the time limit).
  CliResult r = run_cli({"generate", "--prompt", "", "--max-tokens", "200", "--seed", "1"}, {}, 10.0,
                        {.stdout_to = Stdout::ClosedPipe});
  check(r, {1, {"cannot write to standard output", "Broken pipe"}});
  BOOST_TEST(r.err.find("generated") == std::string::npos);
}
BOOST_AUTO_TEST_CASE(generate_json_stops_at_the_first_step_after_its_reader_left) {
  // --json writes each batch at its end: the dead pipe is seen between steps, not after all
  // 16 x 250 tokens are generated, which would run past the 10 s limit.
  CliResult r = run_cli({"generate", "--prompt", "It is", "--max-tokens", "250", "--num-samples", "16", "--json",
                         "--logit-bias", "50256=-100"},
                        {}, 10.0, {.stdout_to = Stdout::ClosedPipe});
  check(r, {1, {"cannot write to standard output", "Broken pipe"}, 2});  // after the seed line
}
BOOST_AUTO_TEST_CASE(devices_to_full_disk) {
  check(run_cli({"devices"}, {}, 10.0, {.stdout_to = Stdout::DevFull}),
        {1, {"cannot write to standard output", "No space left on device"}});
}
BOOST_AUTO_TEST_CASE(help_to_full_disk) {
  check(run_cli({"--help"}, {}, 10.0, {.stdout_to = Stdout::DevFull}), {1, {"cannot write to standard output"}});
  check(run_cli({"generate", "--help"}, {}, 10.0, {.stdout_to = Stdout::DevFull}),
        {1, {"cannot write to standard output"}});
}
// A bad device index or setting is a usage error before the list is printed, as elsewhere.
BOOST_AUTO_TEST_CASE(devices_checks_the_device_before_printing) {
  CliResult r = run_cli({"devices", "--device", "99"});
  check(r, {2, {"--device 99 does not exist"}});
  BOOST_TEST(r.out.empty());
  r = run_cli({"devices"}, {"GPTVK_DEVICE=x"});
  check(r, {2, {"GPTVK_DEVICE must be a device index"}});
  BOOST_TEST(r.out.empty());
  // A good index is checked too, and the list stays one line a device (-v adds the rest).
  r = run_cli({"devices", "--device", "0"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out.find("0: ") == 0);
  BOOST_TEST(r.out.find("chosen:") == std::string::npos);
}
BOOST_AUTO_TEST_CASE(perplexity_to_full_disk) {
  std::string text = dir.write("text.txt", "It is a truth universally acknowledged.");
  CliResult r = run_cli({"perplexity", "--config", kDefaultConfig.string(), "--file", text}, {}, 10.0,
                        {.stdout_to = Stdout::DevFull});
  check(r, {1, {"cannot write to standard output", "No space left on device"}, 2});  // after the windows line
}
// generate's --logprobs table goes to stderr: output asked for, so losing it fails the run.
BOOST_AUTO_TEST_CASE(logprobs_table_to_full_stderr) {
  std::vector<std::string> args = {"generate", "--config", kDefaultConfig.string(), "--prompt", "Hi", "--max-tokens",
                                   "2", "--temperature", "0"};
  CliResult plain = run_cli(args, {}, 10.0, {.stderr_dev_full = true});
  BOOST_TEST(plain.exit_code == 0, "a lost summary line is no lost output");
  args.insert(args.end(), {"--logprobs", "2"});
  CliResult working = run_cli(args, {}, 10.0);
  BOOST_TEST(working.exit_code == 0, working.err);  // so the failure below is the table's
  BOOST_TEST(working.err.find("id\ttext\tlogprob\ttop\n") != std::string::npos, working.err);
  CliResult table = run_cli(args, {}, 10.0, {.stderr_dev_full = true});
  BOOST_TEST(table.exit_code == 1);
  BOOST_TEST(!table.signaled);
}
BOOST_AUTO_TEST_CASE(bench_to_full_disk) {
  CliResult r = run_cli({"bench", "--config", kDefaultConfig.string(), "--prompt-tokens", "4", "--gen-tokens", "1",
                         "--repeats", "1"},
                        {}, 10.0, {.stdout_to = Stdout::DevFull});
  check(r, {1, {"cannot write to standard output", "No space left on device"}, 4});  // after the timing lines
}
BOOST_AUTO_TEST_CASE(tokenize_into_closed_pipe) {
  check(run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--text", "hi"}, {}, 10.0,
                {.stdout_to = Stdout::ClosedPipe}),
        {1, {"cannot write to standard output", "Broken pipe"}});
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- 2, 12: safetensors headers
BOOST_FIXTURE_TEST_SUITE(case02_12_safetensors_headers, IoRows)

// Raw header text, for what a JSON object cannot hold (a key twice) or would take long to build.
std::string with_header(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  return out + header + data;
}

BOOST_AUTO_TEST_CASE(duplicate_tensor_name) {
  Safetensors st = Safetensors::read(kFixture / "model.safetensors");
  nlohmann::json again = st.header["wte.weight"];
  again["dtype"] = "BF16";  // same offsets: half as many elements would fit, so only the name gives it away
  again["shape"] = {311, 128};
  std::string h = st.header.dump();
  h.insert(h.size() - 1, ",\"wte.weight\":" + again.dump());
  std::string path = dir.write("dup.safetensors", with_header(h, st.data));
  check(forward(fixture_with("", ""), path), {1, {"dup.safetensors", "tensor 'wte.weight' is listed twice"}});
}
BOOST_AUTO_TEST_CASE(header_over_100_mib) {
  std::string bytes(8, '\0');
  uint64_t len = 101ull << 20;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  std::string path = dir.write("huge.safetensors", bytes + "{}");
  fs::resize_file(path, 8 + len + 16);  // sparse: the file holds the header it claims
  check(forward(fixture_with("", ""), path), {1, {"huge.safetensors", "header of 105906176 bytes", "100 MiB"}});
}
BOOST_AUTO_TEST_CASE(deeply_nested_header) {
  std::string h = std::string(100000, '[') + std::string(100000, ']');
  h = "{\"a\":" + h + "}";
  std::string path = dir.write("deep.safetensors", with_header(h, ""));
  check(forward(fixture_with("", ""), path), {1, {"deep.safetensors", "nests deeper than a safetensors header"}});
}
BOOST_AUTO_TEST_CASE(too_many_tensors) {
  std::string h = "{";
  for (int i = 0; i <= 65536; ++i)
    h += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  std::string path = dir.write("many.safetensors", with_header(h + "}", ""));
  check(forward(fixture_with("", ""), path), {1, {"many.safetensors", "more than 65536 tensors"}});
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- 4, 5, 6: inputs that never end or block
BOOST_FIXTURE_TEST_SUITE(case04_05_06_special_inputs, IoRows)

BOOST_AUTO_TEST_CASE(endless_inputs_refused) {
  check(run_cli({"perplexity", "--config", kDefaultConfig.string(), "--file", "/dev/zero"}),
        {1, {"cannot read --file /dev/zero", "a character device, not a regular file"}});
  check(run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", "/dev/zero"}),
        {1, {"cannot read --file /dev/zero", "a character device"}});
  check(forward("/dev/zero"), {1, {"/dev/zero: cannot open config file", "a character device"}});
  check(run_cli({"tokenize", "--config", config(fixture_config + "\n[tokenizer]\nvocab = \"/dev/zero\"\nmerges = \"m\"\n"),
                 "--text", "hi"}),
        {1, {"cannot read /dev/zero", "a character device"}});
}
// Model files are regular files; a FIFO there is refused without blocking. A text flag
// reads a pipe as bash's `<(command)` gives it (/dev/fd/N), and a FIFO whose writer opens
// it after gpt-vk does (`producer > fifo & gpt-vk --file fifo` races so): a FIFO with no
// writer reads as empty, so gpt-vk waits up to 2 s for one, then says it found none.
BOOST_AUTO_TEST_CASE(fifos_never_block) {
  std::string fifo = (dir / "fifo").string();
  BOOST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  check(forward(fifo), {1, {"fifo: cannot open config file", "a FIFO, not a regular file"}});
  check(forward(fixture_with("", ""), fifo), {1, {"fifo: cannot open weights file", "a FIFO"}});
  check(run_cli({"tokenize", "--config", config(fixture_config + "\n[tokenizer]\nvocab = \"fifo\"\nmerges = \"fifo\"\n"),
                 "--text", "hi"}),
        {1, {"cannot read " + fifo, "a FIFO"}});
  check(run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", fifo}),
        {1, {"cannot read --file " + fifo, "a FIFO that no process opened for writing within 2 s"}});
  // The writer opens the FIFO 0.3 s after gpt-vk (a non-blocking open fails until a reader
  // has it open, so the thread never blocks on a gpt-vk that did not come).
  std::thread writer([&] {
    ::usleep(300000);
    for (int tries = 0; tries < 1000; ++tries, ::usleep(10000)) {
      const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (w < 0) continue;
      BOOST_TEST(::write(w, "Hello world", 11) == 11);
      ::close(w);
      return;
    }
  });
  CliResult late = run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", fifo});
  writer.join();
  BOOST_TEST(late.exit_code == 0, late.err);
  BOOST_TEST(late.out == "15496 995\n");
  int p[2];
  BOOST_REQUIRE(pipe(p) == 0);  // no O_CLOEXEC: gpt-vk inherits the reading end
  BOOST_REQUIRE(write(p[1], "Hello world", 11) == 11);
  close(p[1]);
  CliResult r = run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", "/dev/fd/" + std::to_string(p[0])});
  close(p[0]);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "15496 995\n");
  // An anonymous pipe whose writer is gone and wrote nothing is an empty text, at once.
  BOOST_REQUIRE(pipe(p) == 0);
  close(p[1]);
  CliResult empty = run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", "/dev/fd/" + std::to_string(p[0])});
  close(p[0]);
  BOOST_TEST(empty.exit_code == 0, empty.err);
  BOOST_TEST(empty.out == "\n");  // not the FIFO's wait and error
}
BOOST_AUTO_TEST_CASE(filesystem_errors_are_bad_input) {
  fs::create_symlink(dir / "loop_b", dir / "loop_a");
  fs::create_symlink(dir / "loop_a", dir / "loop_b");
  check(forward(fixture_with("", ""), (dir / "loop_a").string()),
        {1, {"loop_a", "Too many levels of symbolic links"}});
  check(forward(fixture_with("", ""), (dir / std::string(300, 'w')).string()), {1, {"File name too long"}});
  check(forward((dir / "loop_a").string()), {1, {"loop_a", "Too many levels of symbolic links"}});
}
BOOST_AUTO_TEST_CASE(directories_refused) {
  check(run_cli({"perplexity", "--config", kDefaultConfig.string(), "--file", dir.path.string()}),
        {1, {"cannot read --file " + dir.path.string(), "a directory, not a regular file"}});
  check(run_cli({"tokenize", "--config", gpt2_tokenizer_config(), "--file", dir.path.string()}), {1, {"a directory"}});
}
// The cache only saves start-up time: whatever sits at its path, the command runs on.
BOOST_AUTO_TEST_CASE(broken_pipeline_cache_is_skipped) {
  std::string cache = cache_file();
  BOOST_REQUIRE(mkfifo(cache.c_str(), 0600) == 0);
  check_warned(devices_with_cache(), {"ignoring the pipeline cache", cache, "a FIFO"});
  fs::remove(cache);
  fs::create_directory(cache);
  check_warned(devices_with_cache(), {"ignoring the pipeline cache", "a directory"});
  fs::remove(cache);
  fs::create_symlink("/dev/zero", cache);
  check_warned(devices_with_cache(), {"ignoring the pipeline cache", "a character device"});
  fs::remove(cache);
  fs::create_symlink(cache, cache);
  check_warned(devices_with_cache(), {"ignoring the pipeline cache", "Too many levels of symbolic links"});
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- 8: forward --out is atomic
BOOST_FIXTURE_TEST_SUITE(case08_atomic_output, IoRows)

BOOST_AUTO_TEST_CASE(full_disk_keeps_the_old_file) {
  std::string out = dir.write("out.npy", "the previous logits");
  // 3 x 311 float32 logits need 3.7 KB; the file size limit stops the write at 1 KB.
  CliResult r = run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1,2,3", "--out", out}, {}, 10.0,
                        {.file_size_limit = 1024});
  check(r, {1, {"cannot write " + out, "File too large"}});
  BOOST_TEST(read_text(out) == "the previous logits");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.path().filename() != "config.toml";
  BOOST_TEST(files == 1u, "a temporary file was left behind");
}
BOOST_AUTO_TEST_CASE(out_to_a_device_is_written_in_place) {
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", "/dev/full"}),
        {1, {"cannot write /dev/full", "No space left on device"}});
  struct stat st {};
  BOOST_TEST((stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)), "/dev/full was replaced");
}
BOOST_AUTO_TEST_CASE(out_is_a_directory) {
  check(run_cli({"forward", "--config", fixture_with("", ""), "--ids", "1", "--out", dir.path.string()}),
        {1, {"cannot write", "a directory"}});
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- 9, 10, 14: strict numbers
BOOST_FIXTURE_TEST_SUITE(case09_10_14_strict_numbers, IoRows)

BOOST_AUTO_TEST_CASE(seed_out_of_range) {
  for (const char* seed : {"-1", "18446744073709551616", "12345678901234567890123456", "", "1e3", " 5"})
    check(run_cli({"generate", "--prompt", "x", "--seed", seed}),
          {2, {"--seed", "0 to 18446744073709551615", std::string("got '") + seed + "'"}});
}
BOOST_AUTO_TEST_CASE(seed_without_a_value) {
  check(run_cli({"generate", "--prompt", "x", "--seed"}), {2, {"--seed"}});
}
// Large seeds are used whole: 2^63 and 2^63 + 1 must be different seeds.
BOOST_AUTO_TEST_CASE(large_seeds_differ) {
  auto run = [](const char* seed) {
    return run_cli({"generate", "--prompt", "It is", "--max-tokens", "24", "--temperature", "1.5", "--top-k", "0",
                    "--seed", seed});
  };
  CliResult a = run("9223372036854775808"), b = run("9223372036854775809"), a2 = run("9223372036854775808");
  BOOST_TEST(a.exit_code == 0);
  BOOST_TEST(b.exit_code == 0);
  BOOST_TEST(a.out == a2.out, "same seed, different text");
  BOOST_TEST(a.out != b.out, "different seeds, same text");
  BOOST_TEST(run("18446744073709551615").exit_code == 0);
}
BOOST_AUTO_TEST_CASE(gptvk_device) {
  for (const char* v : {"1abc", "-1", "", "99999999999999999999"})
    check(run_cli({"devices", "-v"}, {std::string("GPTVK_DEVICE=") + v}),
          {2, {"GPTVK_DEVICE must be a device index", std::string("'") + v + "'"}, 2});  // after the device list
  check(run_cli({"devices", "-v"}, {"GPTVK_DEVICE=7"}), {2, {"GPTVK_DEVICE=7 names no device"}, 2});
}
BOOST_AUTO_TEST_CASE(gptvk_validation) {
  check(run_cli({"devices", "-v"}, {"GPTVK_VALIDATION=maybe"}),
        {2, {"GPTVK_VALIDATION is 0, 1, true, false, yes or no", "'maybe'"}, 2});
  check(run_cli({"devices", "-v"}, {"GPTVK_VALIDATION_GPU=2"}),
        {2, {"GPTVK_VALIDATION_GPU is 0, 1, true, false, yes or no", "'2'"}, 2});
  check(run_cli({"devices"}, {"GPTVK_VALIDATION_GPU=maybe"}), {2, {"GPTVK_VALIDATION_GPU is", "'maybe'"}, 2});
  for (const char* v : {"0", "false", "no", "1", "yes", "TRUE"}) {
    const CliResult r = run_cli({"devices", "-v"}, {std::string("GPTVK_VALIDATION=") + v});
    BOOST_TEST(r.exit_code == 0, v);
    const bool on = std::string("1 yes TRUE").find(v) != std::string::npos;
    BOOST_TEST(r.out.find(on ? "\nvalidation: Khronos layer\n" : "\nvalidation: off\n") != std::string::npos, v << ": " << r.out);
  }
  const CliResult gpu = run_cli({"devices", "-v"}, {"GPTVK_VALIDATION=0", "GPTVK_VALIDATION_GPU=1"});
  BOOST_TEST(gpu.out.find("\nvalidation: Khronos layer with shader checks\n") != std::string::npos, gpu.out);
}
BOOST_AUTO_TEST_CASE(gptvk_force_sizes) {
  auto devices = [](const std::string& force) { return run_cli({"devices", "-v"}, {"GPTVK_FORCE=" + force}); };
  check(devices("shared=-1"), {2, {"bad size '-1' for shared"}, 2});
  check(devices("shared=4294967296"), {2, {"shared=4294967296 is out of range (1K to 2G)"}, 2});
  check(devices("max_range=1K"), {2, {"max_range=1K is out of range (1M to 1024G)"}, 2});
  check(devices("max_range=99999999999999G"), {2, {"out of range"}, 2});
}
// A device whose storage binding holds the scratch of fewer draws than generate's 16 at a
// time (1 MiB: 5 of GPT-2's vocabulary) decodes its samples in smaller groups, with the
// same text, where the sixth row's binding failed after the first token had been printed.
BOOST_AUTO_TEST_CASE(samples_decode_in_groups_a_small_binding_holds) {
  const std::vector<std::string> args = {"generate", "--prompt", "hi", "--max-tokens", "3", "--seed", "1",
                                         "--num-samples", "7", "--json"};
  const CliResult small = run_cli(args, {"GPTVK_FORCE=max_range=1M"});
  const CliResult usual = run_cli(args);
  BOOST_TEST(small.exit_code == 0, small.err);
  BOOST_TEST(usual.exit_code == 0, usual.err);
  auto without_timings = [](const std::string& out) {
    std::string kept;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      j.erase("timings");
      kept += j.dump() + "\n";
    }
    return kept;
  };
  BOOST_TEST(std::count(small.out.begin(), small.out.end(), '\n') == 7);
  BOOST_TEST(without_timings(small.out) == without_timings(usual.out));
}
// GPTVK_FORCE=gpu picks a GPU's kernels; the device stays the type it is.
BOOST_AUTO_TEST_CASE(gptvk_force_gpu_keeps_the_device_type) {
  auto chosen = [](const std::string& out) {
    const size_t c = out.find("chosen: ");
    return c == std::string::npos ? std::string() : out.substr(c, out.find(" MiB", c) - c);
  };
  CliResult plain = run_cli({"devices", "-v"}), gpu = run_cli({"devices", "-v"}, {"GPTVK_FORCE=gpu"});
  BOOST_TEST(gpu.exit_code == 0);
  BOOST_TEST(!chosen(plain.out).empty(), plain.out);
  BOOST_TEST(chosen(gpu.out) == chosen(plain.out));
  BOOST_TEST(gpu.out.find("plan: a GPU's kernels") != std::string::npos, gpu.out);
}
BOOST_AUTO_TEST_CASE(temperature_and_device_bounds_are_readable) {
  CliResult t = run_cli({"generate", "--prompt", "x", "--temperature", "-1"});
  check(t, {2, {"--temperature", "must be a number >= 0, got -1"}});
  BOOST_TEST(t.err.find("308") == std::string::npos);
  CliResult d = run_cli({"devices", "--device", "-1"});
  check(d, {2, {"--device", "must be a device index", "'-1'"}});
  BOOST_TEST(d.err.find("308") == std::string::npos);
}
BOOST_AUTO_TEST_CASE(config_is_a_directory) {
  check(forward(dir.path.string()), {1, {"cannot open config file", "a directory, not a regular file"}});
}
// An empty HOME must not put the cache in ./.cache of the working directory.
BOOST_AUTO_TEST_CASE(empty_home_means_no_cache) {
  CliResult r = run_cli({"devices", "-v"}, {"HOME="}, 10.0, {.unset_env = {"GPTVK_CACHE_DIR", "XDG_CACHE_HOME"}});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out.find("pipeline cache: none") != std::string::npos, r.out);
  BOOST_TEST(r.err.find("gpt-vk: warning: no pipeline cache") != std::string::npos, r.err);
  BOOST_TEST(!fs::exists(".cache/gpt-vk"));
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- 11, 13: vocabulary and context rules
BOOST_FIXTURE_TEST_SUITE(case11_13_model_rules, IoRows)

BOOST_AUTO_TEST_CASE(tokenizer_smaller_than_model) {
  // GPT-2's 50257-token tokenizer on the fixture's 311-id model.
  fs::path tok = kSource / "models/gpt2-tokenizer";
  std::string cfg = config(read_text(fixture_with("", "")) + "\n[tokenizer]\nvocab = \"" +
                           (tok / "encoder.json").string() + "\"\nmerges = \"" + (tok / "vocab.bpe").string() + "\"\n");
  CliResult r = run_cli({"generate", "--config", cfg, "--prompt", "hi", "--max-tokens", "2"});
  check(r, {1, {"has 50257 tokens but model.vocab_size is 311"}});
  BOOST_TEST(r.out.empty());
}
BOOST_AUTO_TEST_CASE(prompt_fills_the_context_but_one) {
  // 255 prompt tokens + 1 generated = the default model's context of 256.
  CliResult r = run_cli({"generate", "--prompt", prompt_of(255), "--max-tokens", "5", "--temperature", "0"});
  BOOST_TEST_INFO("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.err.find("the context of 256 tokens is full") != std::string::npos);
  BOOST_TEST(r.err.find("prompt 255 tokens") != std::string::npos);
  BOOST_TEST(r.err.find("generated 1 token\n") != std::string::npos);
}
BOOST_AUTO_TEST_CASE(prompt_as_long_as_the_context) {
  check(run_cli({"generate", "--prompt", prompt_of(256), "--max-tokens", "1"}),
        {1, {"the prompt is 256 tokens", "with 1 generated token", "context of 256 tokens"}});
}
BOOST_AUTO_TEST_CASE(bench_follows_the_same_rule) {
  // The decode steps feed --gen-tokens tokens after the prompt: 70 + 4 > 73 (70 + 3 fits).
  check(run_cli({"bench", "--config", fixture_with("", ""), "--prompt-tokens", "70", "--gen-tokens", "4"}),
        {1, {"--prompt-tokens 70 is 70 tokens", "with 4 generated tokens", "context of 73 tokens"}});
  // Prefill alone may fill the context: the token it samples is not fed.
  check(run_cli({"bench", "--config", fixture_with("", ""), "--prompt-tokens", "74", "--gen-tokens", "0"}),
        {1, {"--prompt-tokens 74 is 74 tokens, more than the model's context of 73 tokens"}});
  const CliResult full = run_cli({"bench", "--config", fixture_with("", ""), "--prompt-tokens", "73", "--gen-tokens",
                                  "0", "--repeats", "1"});
  BOOST_TEST(full.exit_code == 0, full.err);
  BOOST_TEST(full.out.find("decode_tok_s=nan") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- an address-space limit
// Under `ulimit -v` the Vulkan driver fails without naming the cause, or crashes: a limit
// below what any model command needs is refused up front, and a model that cannot fit under
// it gets the usual "needs X MiB, has Y" naming the limit (cli/address_space.hpp). Not
// under AddressSanitizer or ThreadSanitizer, whose shadow memory needs an unlimited address
// space.
#if !defined(GPTVK_ASAN) && !defined(GPTVK_TSAN)
BOOST_FIXTURE_TEST_SUITE(address_space_limit, IoRows)

constexpr long kMiB = 1 << 20;

BOOST_AUTO_TEST_CASE(a_limit_below_the_drivers_need_is_refused_up_front) {
  CliResult r = run_cli({"generate", "--prompt", "Hi", "--max-tokens", "2", "--seed", "1"}, {}, 60.0,
                        {.address_space_limit = 512 * kMiB});
  check(r, {1, {"the address-space limit (ulimit -v) is 512 MiB, below the 768 MiB", "ulimit -v unlimited"}});
  BOOST_TEST(!r.signaled);
  // tokenize opens no device: it runs under the same limit.
  CliResult t = run_cli({"tokenize", "--text", "Hello world"}, {}, 60.0, {.address_space_limit = 512 * kMiB});
  BOOST_TEST(t.exit_code == 0, t.err);
  BOOST_TEST(t.out == "15496 995\n");
}
// A GPU's memory is not this process's address space: the case is a CPU device's.
BOOST_AUTO_TEST_CASE(a_model_larger_than_the_limit_says_so,
                     *gptvk::test::device_has([](gptvk::vk::Context& c) { return c.info().is_cpu(); },
                                              "is not a CPU device")) {
  // GPT-2 XL's random f16 weights: 2973 MiB, whatever the host has, against 1 GiB of address space.
  CliResult r = run_cli({"bench", "--config", (kSource / "configs/gpt2-xl.toml").string(), "--prompt-tokens", "4",
                         "--gen-tokens", "1", "--repeats", "1"},
                        {}, 60.0, {.address_space_limit = 1024 * kMiB});
  check(r, {1, {"model needs 2973 MiB of device memory", "within the address-space limit (ulimit -v) of 1024 MiB"}, 2});
}

// serve starts --parallel + --queue + 128 HTTP worker threads, each stack 8 MiB of address
// space under the usual `ulimit -s`: 932 of them do not fit in 1 GiB. A thread that cannot
// start must not leave the others waiting on a destroyed condition variable, with serve hung
// silent and deaf to SIGTERM (server/worker_pool.hpp): whichever resource runs out first,
// serve exits with the limit named.
BOOST_AUTO_TEST_CASE(serve_out_of_address_space_exits_naming_the_limit) {
  CliResult r = run_cli({"serve", "--port", "0", "--queue", "800"}, {}, 60.0, {.address_space_limit = 1024 * kMiB});
  check(r, {1, {"ulimit -v, is 1024 MiB"}});
}

// One word of 40 MB ("aaa..."), which the tokenizer cannot split, takes ~1.4 GB to merge:
// refused at once, naming the word and what it needs, where the merge would otherwise run
// out of memory (without a limit: the OOM killer's SIGKILL). A word of 1.5 MB is checked
// too, fits, and gives the ids it gives without a limit.
BOOST_AUTO_TEST_CASE(a_word_too_long_to_tokenize_in_the_memory_free) {
  CliResult r = run_cli({"tokenize", "--file", dir.write("long.txt", std::string(40'000'000, 'a'))}, {}, 60.0,
                        {.address_space_limit = 1024 * kMiB});
  check(r, {1, {"a word of 40000000 bytes with nothing the tokenizer splits at", "needs about 1373 MiB to tokenize"}});
  const std::string word = dir.write("word.txt", std::string(1'500'000, 'a'));
  const CliResult limited = run_cli({"tokenize", "--file", word}, {}, 60.0, {.address_space_limit = 1024 * kMiB});
  const CliResult unlimited = run_cli({"tokenize", "--file", word}, {}, 60.0);
  BOOST_TEST(limited.exit_code == 0, limited.err);
  BOOST_TEST(unlimited.exit_code == 0, unlimited.err);
  BOOST_TEST(limited.out.size() > 100000u);
  BOOST_TEST((limited.out == unlimited.out));
}

BOOST_AUTO_TEST_SUITE_END()
#endif
