// `gpt-vk bench`: prefill and decode throughput. Each repeat prefills --prompt-tokens
// random tokens and then decodes --gen-tokens more with greedy sampling on the device;
// the first run warms up (pipelines, graph recording) and is not counted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "cli/bench_batch.hpp"
#include "cli/bench_report.hpp"
#include "cli/commands.hpp"
#include "cli/model_rules.hpp"
#include "cli/model_session.hpp"
#include "cli/number_checks.hpp"
#include "cli/profile_table.hpp"
#include "engine/error.hpp"
#include "engine/interpose/yielding_waits.hpp"

namespace gptvk::cli {

namespace {

// One sequence: each repeat prefills the same random prompt, then decodes gen_tokens
// greedily; the first repeat warms up. Prints the rates' lines on stderr, then with
// `profile` the per-op tables of the last prefill and decode step.
BenchRates run_single_bench(ModelSession& s, const BenchSetup& setup, bool profile) {
  const auto& cfg = s.cfg;
  std::mt19937 rng(42);
  std::vector<uint32_t> prompt(setup.prompt_tokens);
  for (auto& t : prompt) t = rng() % cfg.vocab_size;
  s.model->set_sampling({0.0f, 0, 1.0f, 0});
  s.model->set_profile(profile);

  BenchRates rates;
  std::vector<OpTime> prefill_profile;
  using clock = std::chrono::steady_clock;
  for (uint32_t r = 0; r <= setup.repeats; ++r) {
    auto t0 = clock::now();
    s.model->prefill_and_sample(prompt);
    auto t1 = clock::now();
    if (profile) prefill_profile = s.model->profile_summary();
    for (uint32_t i = 0; i < setup.gen_tokens; ++i) s.model->decode_next();
    auto t2 = clock::now();
    if (r == 0) continue;  // warm-up
    rates.prefill.push_back(setup.prompt_tokens / std::chrono::duration<double>(t1 - t0).count());
    if (setup.gen_tokens) rates.decode.push_back(setup.gen_tokens / std::chrono::duration<double>(t2 - t1).count());
  }
  print_bench_lines(setup, {rates}, false);
  if (profile) {
    print_profile_table("prefill", prefill_profile);
    if (setup.gen_tokens) print_profile_table("decode (one token)", s.model->profile_summary());
  }
  return rates;
}

// --batch: batch sizes 1 to 256 separated by commas, every item present ("1,,8" is refused,
// where CLI11's own list splitting would drop the empty item).
std::vector<uint32_t> batch_sizes(const std::string& list) {
  std::vector<uint32_t> sizes;
  for (size_t start = 0;;) {
    const size_t end = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, end - start);
    const std::string why = whole_number_in(1, 256)(item);
    if (!why.empty()) throw UsageError("--batch " + list + ": " + (item.empty() ? "an empty item" : why));
    sizes.push_back(static_cast<uint32_t>(std::stoul(item)));
    if (end == list.size()) return sizes;
    start = end + 1;
  }
}

// The default lengths (128-token prompt, 64 decoded) shortened to fit a model with a
// shorter context, as generate shortens its default --max-tokens; a length the user gave is
// kept (require_context_room then says what does not fit; a length that fills the context
// alone is refused here).
void fit_default_lengths(uint32_t& prompt, uint32_t& gen, bool prompt_given, bool gen_given, uint32_t context) {
  if (prompt + std::max(gen, 1u) <= context || (prompt_given && gen_given)) return;
  if (!prompt_given && !gen_given) {
    prompt = std::max(1u, context * 2 / 3);
    gen = context - prompt;
  } else if (!gen_given && prompt < context) {
    gen = context - prompt;
  } else if (!prompt_given && gen < context) {
    prompt = context - std::max(gen, 1u);
  } else {  // the length given fills the context alone: said without the other's default
    throw InputError((prompt_given ? "--prompt-tokens " + std::to_string(prompt) : "--gen-tokens " + std::to_string(gen)) +
                     " leaves no room for " + (prompt_given ? "a generated token" : "a prompt") +
                     " in the model's context of " + std::to_string(context) + " tokens");
  }
  std::fprintf(stderr, "gpt-vk: the model's context is %u tokens: --prompt-tokens %u --gen-tokens %u\n", context,
               prompt, gen);
}

struct BenchFlags {
  ModelFlags model;
  uint32_t prompt_tokens = 128, gen_tokens = 64, repeats = 5;
  bool profile = false, json = false;
  std::string batch = "1";  // --batch, parsed by batch_sizes()
  std::string batch_kernels = "exact";
};

// The run's setup, also said on stderr before anything is measured.
BenchSetup describe_run(const ModelSession& s, const BenchFlags& f, const std::vector<uint32_t>& batches) {
  const ModelConfig& cfg = s.cfg;
#if GPTVK_YIELDING_WAITS
  const char* waits = yielding_waits::enabled() ? ", yielding waits" : "";
#else
  const char* waits = "";
#endif
  std::fprintf(stderr, "gpt-vk: %s on %s, %s weights%s%s, loaded in %.2f s\n", cfg.name.c_str(),
               s.ctx->info().name.c_str(), dtype_name(cfg.dtype), cfg.kv_f16() ? ", f16 KV cache" : "", waits,
               s.load_seconds);
  const bool batched = batches != std::vector<uint32_t>{1};
  return {.model = cfg.name,
          .device = s.ctx->info().name,
          .dtype = dtype_name(cfg.dtype),
          .batch_kernels = batched ? f.batch_kernels : "",
          .kv_f16 = cfg.kv_f16(),
          .random_weights = s.random_weights,
          .load_seconds = s.load_seconds,
          .prompt_tokens = f.prompt_tokens,
          .gen_tokens = f.gen_tokens,
          .repeats = f.repeats};
}

// Every batch size's rates: a lone sequence's own step for --batch 1, else run_batch_bench.
std::vector<BenchRates> measure(ModelSession& s, const BenchFlags& f, const std::vector<uint32_t>& batches,
                                const BenchSetup& setup) {
  if (batches == std::vector<uint32_t>{1}) return {run_single_bench(s, setup, f.profile)};
  const uint32_t most = *std::max_element(batches.begin(), batches.end());
  if (most > s.model->max_chunk())
    throw UsageError("--batch " + std::to_string(most) + " exceeds the " + std::to_string(s.model->max_chunk()) +
                     " rows a step takes");
  return run_batch_bench(
      s, {f.prompt_tokens, f.gen_tokens, f.repeats, batches, f.batch_kernels == "exact", f.profile}, setup);
}

}  // namespace

Action add_bench(CLI::App& app, Common& common) {
  auto f = std::make_shared<BenchFlags>();
  auto* cmd = app.add_subcommand(
      "bench",
      "prefill and decode throughput (tokens/s); deterministic random weights when neither --weights nor the "
      "config's weights file exists");
  add_model_flags(cmd, f->model);
  cmd->add_option("-p,--prompt-tokens", f->prompt_tokens, "prompt length: the context depth decode starts at")
      ->capture_default_str()->transform(whole_number_in(1, 1 << 30));
  cmd->add_option("-n,--gen-tokens", f->gen_tokens,
                  "tokens decoded after the prompt; 0 measures prefill only (decode_tok_s=nan)")
      ->capture_default_str()->transform(whole_number_in(0, 1 << 30));
  cmd->add_option("-r,--repeats", f->repeats, "measured runs after one warm-up run")
      ->capture_default_str()->transform(whole_number_in(1, 1 << 30));
  cmd->add_flag("--profile", f->profile, "print per-op GPU time of the last prefill and decode step");
  cmd->add_option("--batch", f->batch,
                  "B sequences decoding together, 1 to 256 (a list such as 1,8,16 measures each in turn); "
                  "decode_tok_s is the aggregate of the last B");
  cmd->add_option("--batch-kernels", f->batch_kernels,
                  "with --batch, as serve's: exact (every row's logits those of its lone run; on GPUs the\n"
                  "one-token mat-vecs over every row) or gemm (the prompts' GEMMs)")
      ->capture_default_str()->check(CLI::IsMember({"exact", "gemm"}));
  cmd->add_flag("--json", f->json,
                "stdout: one JSON object instead of the prefill_tok_s=... line: model, device, dtype, kv_cache,\n"
                "batch_kernels (null for --batch 1), random_weights, load_s, the lengths and repeats, per batch\n"
                "size every repeat's prefill and decode tok/s (median, min, max, runs; decode the aggregate; null\n"
                "with --gen-tokens 0), and prefill_tok_s and decode_tok_s: the last batch size's medians");
  auto* prompt_flag = cmd->get_option("--prompt-tokens");
  auto* gen_flag = cmd->get_option("--gen-tokens");
  auto* kernels_flag = cmd->get_option("--batch-kernels");
  return [&common, f, prompt_flag, gen_flag, kernels_flag] {
    const std::vector<uint32_t> batches = batch_sizes(f->batch);
    // A lone sequence always runs its own step: a kernel choice there would be ignored.
    if (kernels_flag->count() > 0 && std::ranges::all_of(batches, [](uint32_t b) { return b == 1; }))
      throw UsageError("--batch-kernels applies to batched steps: give --batch 2 or more (a list such as 1,8)");
    auto s = open_model(common, f->model, {.allow_random = true, .samples = true});
    const auto& cfg = s.cfg;
    fit_default_lengths(f->prompt_tokens, f->gen_tokens, prompt_flag->count() > 0, gen_flag->count() > 0,
                        cfg.context_length);
    // The decode steps feed --gen-tokens tokens after the prompt (the first is the one
    // prefill samples, which needs no room of its own).
    require_context_room(f->prompt_tokens, f->gen_tokens, cfg.context_length,
                         "--prompt-tokens " + std::to_string(f->prompt_tokens));
    const BenchSetup setup = describe_run(s, *f, batches);
    const std::vector<BenchRates> rates = measure(s, *f, batches, setup);
    print_bench_result(setup, rates, f->json);
    return 0;
  };
}

}  // namespace gptvk::cli
