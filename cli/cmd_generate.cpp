// `gpt-vk generate`: prints the prompt, then the generated text as each token arrives.
// Sampling runs on the device; per token only the chosen id (4 bytes) comes back.
#include <csignal>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>

#include "cli/commands.hpp"
#include "cli/model_rules.hpp"
#include "cli/model_session.hpp"
#include "cli/output.hpp"
#include "cli/strict_flags.hpp"
#include "engine/error.hpp"

namespace gptvk::cli {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

// A failed write (full disk, closed pipe) throws: generation stops at once.
void emit(const std::string& bytes) { write_stdout(bytes); }

}  // namespace

Action add_generate(CLI::App& app, Common& common) {
  struct Flags {
    ModelFlags model;
    std::string prompt;
    uint32_t max_tokens = 100;
    float temperature = 0.8f, top_p = 0.95f;
    uint32_t top_k = 40;
    std::optional<uint64_t> seed;  // none: random
    bool special = false;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "generate",
      "generate text: prints the prompt, then the continuation as it is produced.\n"
      "Stops after --max-tokens tokens, at <|endoftext|>, or when the model's context is full\n"
      "(said on stderr). Ctrl-C stops early and keeps the text so far.");
  add_model_flags(cmd, f->model, "bundled");
  cmd->add_option("--prompt", f->prompt, "text to continue (UTF-8; invalid bytes are encoded byte by byte)")
      ->required();
  cmd->add_option("--max-tokens", f->max_tokens, "most tokens to generate (at most the context length)")
      ->capture_default_str()->check(at_least_one());
  cmd->add_option("--temperature", f->temperature, "sampling temperature; 0 = greedy (argmax)")
      ->capture_default_str()->check(non_negative_real());
  cmd->add_option("--top-k", f->top_k, "sample among the K most likely tokens; 0 = off")->capture_default_str();
  cmd->add_option("--top-p", f->top_p, "nucleus sampling: smallest set of tokens with probability >= P; 1 = off")
      ->capture_default_str()->check(probability_above_zero());
  add_seed_option(cmd, f->seed, "random seed, 0 to 2^64-1; same seed, same output on the same device (default: random)");
  cmd->add_flag("--special", f->special, "treat <|endoftext|> in the prompt as the special token, not text");
  return [&common, f] {
    uint64_t seed = f->seed ? *f->seed : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());
    ops::SamplingParams sampling{f->temperature, f->top_k, f->top_p, seed};
    OpenOptions options;
    options.sampling = &sampling;
    options.defer_weights = true;
    auto s = open_model(common, f->model, options);
    // Where the device memory is host-mapped (lavapipe) the weights load while the prompt is
    // tokenized and the model's graphs are built; elsewhere after, in load_weights().
    s.start_loading_weights();
    const auto& cfg = s.cfg;
    if (f->max_tokens > cfg.context_length)
      throw InputError("--max-tokens " + std::to_string(f->max_tokens) + " exceeds the model's context of " +
                       std::to_string(cfg.context_length) + " tokens");
    Tokenizer tok = load_tokenizer(cfg);
    require_tokenizer_fits(tok, cfg);
    auto prompt = tok.encode(f->prompt, f->special);
    auto eot = tok.eot_id();
    // An empty prompt starts from <|endoftext|>, as GPT-2 was trained to begin documents.
    if (prompt.empty()) {
      if (!eot) throw InputError("the prompt is empty and the vocabulary has no <|endoftext|> to start from");
      prompt.push_back(*eot);
    }
    require_context_room(prompt.size(), 1, cfg.context_length, "the prompt");
    // The seed matters only when sampling draws (greedy decoding never does).
    if (!f->seed && f->temperature > 0) std::fprintf(stderr, "gpt-vk: seed %llu\n", static_cast<unsigned long long>(seed));
    s.model->set_sampling(sampling);
    // The prompt's pipelines compile (on lavapipe, most of a cold start) while the weights load.
    s.model->warm_up(static_cast<uint32_t>(prompt.size()));
    s.load_weights();

    g_interrupted = 0;
    auto previous = std::signal(SIGINT, on_sigint);
    emit(f->prompt);
    StreamDecoder out(tok);
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    uint32_t token = s.model->prefill_and_sample(prompt);
    auto t1 = clock::now();
    uint32_t generated = 0;
    std::string why = "reached --max-tokens";
    while (true) {
      if (eot && token == *eot) {
        why = "stopped at <|endoftext|>";
        break;
      }
      emit(out.feed(token));
      ++generated;
      if (g_interrupted) {
        why = "interrupted";
        break;
      }
      if (generated >= f->max_tokens) break;
      if (context_full(prompt.size(), generated, cfg.context_length)) {
        why = "stopped: the context of " + std::to_string(cfg.context_length) + " tokens is full";
        break;
      }
      token = s.model->decode_next();
    }
    auto t2 = clock::now();
    emit(out.flush() + "\n");
    std::signal(SIGINT, previous);
    double prefill_s = std::chrono::duration<double>(t1 - t0).count();
    double decode_s = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr,
                 "gpt-vk: %s; load %.2f s, prompt %zu tokens at %.1f tok/s, generated %u tokens at %.1f tok/s\n",
                 why.c_str(), s.load_seconds, prompt.size(), prompt.size() / prefill_s, generated,
                 generated > 1 ? (generated - 1) / decode_s : 0.0);
    return g_interrupted ? 130 : 0;
  };
}

}  // namespace gptvk::cli
