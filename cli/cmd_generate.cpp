// `gpt-vk generate`: prints the prompt, then the generated text as each token arrives (or,
// with --json, one JSON object per completion). The loop is runtime/generator's; sampling
// and its controls run on the device, and per token only the chosen id comes back.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <span>

#include "cli/commands.hpp"
#include "cli/generate_io.hpp"
#include "cli/interrupt.hpp"
#include "cli/model_rules.hpp"
#include "cli/model_session.hpp"
#include "cli/number_checks.hpp"
#include "cli/output.hpp"
#include "cli/strict_flags.hpp"
#include "engine/error.hpp"
#include "engine/ops/sample.hpp"
#include "models/decode_batch.hpp"
#include "runtime/generator.hpp"

namespace gptvk::cli {

namespace {

// A failed write (full disk, closed pipe) throws: generation stops at once.
void emit(const std::string& bytes) { write_stdout(bytes); }

// What stopped generation, as the stderr summary says it.
std::string finish_message(FinishReason r, uint32_t context) {
  switch (r) {
    case FinishReason::EndOfText: return "stopped at an end-of-text token";
    case FinishReason::StopString: return "stopped at a --stop string";
    case FinishReason::ContextFull: return "stopped: the context of " + std::to_string(context) + " tokens is full";
    case FinishReason::Cancelled: return "interrupted";
    default: return "reached --max-tokens";
  }
}

struct Flags {
  ModelFlags model;
  std::vector<std::string> prompts;  // --prompt, repeatable
  std::string prompt_file;
  uint32_t max_tokens = 100;
  ops::SamplingParams sampling{0.8f, 40, 0.95f, 0};
  std::optional<uint64_t> seed;  // none: random
  std::vector<std::string> logit_bias, stop;
  uint32_t num_samples = 1;
  std::optional<uint32_t> logprobs;  // K; 0 lists each token's own log-probability alone
  bool special = false, no_echo = false, json = false;
};

constexpr const char* kHelp =
    "generate text: prints the prompt, then the continuation as it is produced.\n"
    "Stops after --max-tokens tokens, at <|endoftext|> (or the model file's eos), at a --stop\n"
    "string, or when the model's context is full (said on stderr). Ctrl-C stops early and\n"
    "keeps the text so far.\n"
    "Sampling, in this order (transformers' and llama.cpp's): --logit-bias -> penalties on the\n"
    "biased logits (--repeat-penalty, --frequency-penalty, --presence-penalty, over the last\n"
    "--repeat-last-n tokens of prompt + generated text) -> --temperature -> --top-k -> --top-p\n"
    "(the nucleus of what top-k kept) -> --min-p (of what top-p kept; at temperature 1) -> draw.\n"
    "--temperature 0 takes the most likely token after the bias and penalties.";

void add_flags(CLI::App* cmd, Flags& f) {
  cmd->add_option("-p,--prompt", f.prompts,
                  "text to continue (UTF-8; invalid bytes are encoded byte by byte); - reads stdin; repeat it for "
                  "several prompts, which run as one batch and print in order")
      ->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-f,--prompt-file", f.prompt_file,
                  "read the prompt from this file (its bytes as they are; - reads stdin); a file named *.jsonl holds\n"
                  "one prompt per non-blank line, run as one batch: a JSON string, or {\"prompt\": TEXT} with\n"
                  "optional \"max_tokens\" and \"seed\" for that prompt alone");
  cmd->add_option("-n,--max-tokens", f.max_tokens,
                  "most tokens to generate (at most the context length; the default is cut to a shorter one)")
      ->capture_default_str()->transform(whole_number_in(1, 1 << 30));
  auto& s = f.sampling;
  cmd->add_option("--temperature,--temp", s.temperature, "sampling temperature; 0 = greedy (argmax)")
      ->capture_default_str()->transform(number_at_least(0));
  cmd->add_option("--top-k", s.top_k, "sample among the K most likely tokens; 0 = off")
      ->capture_default_str()->transform(whole_number_in(0, 1 << 30));
  cmd->add_option("--top-p", s.top_p, "nucleus sampling: smallest set of tokens with probability >= P; 1 = off")
      ->capture_default_str()->transform(probability_above_zero());
  cmd->add_option("--min-p", s.min_p,
                  "drop tokens less probable than P times the most probable one (at temperature 1, after top-p); "
                  "0 = off")
      ->capture_default_str()->transform(number_in(0, 1));
  cmd->add_option("--repeat-penalty", s.repeat_penalty,
                  "divide positive (multiply negative) logits + bias of tokens in the window by this; 1 = off")
      ->capture_default_str()->transform(number_at_least(0, true));
  cmd->add_option("--repeat-last-n", s.repeat_last_n,
                  "the penalties' window: the last N tokens of prompt + generated text; 0 = off, -1 = all")
      ->capture_default_str()->transform(whole_number_in(-1, 1 << 30));
  cmd->add_option("--frequency-penalty", s.frequency_penalty,
                  "subtract this times a token's count in the window from its logit (OpenAI's formula)")
      ->capture_default_str()->transform(number_in(-100, 100));
  cmd->add_option("--presence-penalty", s.presence_penalty,
                  "subtract this from the logit of every token in the window (OpenAI's formula)")
      ->capture_default_str()->transform(number_in(-100, 100));
  cmd->add_option("--logit-bias", f.logit_bias, "ID=BIAS: add BIAS to token ID's logit (repeatable; -100 bans it)")
      ->allow_extra_args(false);
  add_seed_option(cmd, f.seed,
                  "random seed, 0 to 2^64-1; same seed, same output on the same device (default: random);\n"
                  "sample i of --num-samples uses seed + i");
  cmd->add_option("--stop", f.stop, "stop at the first occurrence of this text, which is not printed (repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::Validator([](const std::string& s) { return s.empty() ? "needs a non-empty text" : ""; },
                             "TEXT"));
  cmd->add_option("--num-samples", f.num_samples,
                  "N continuations of each prompt, decoded together (16 at a time), sample i seeded seed + i")
      ->capture_default_str()->transform(whole_number_in(1, 1000));
  cmd->add_flag("--no-echo", f.no_echo, "print only the continuation, not the prompt");
  cmd->add_option("--logprobs", f.logprobs,
                  "each token's log-probability and the K most likely alternatives (0: none; the model's own\n"
                  "distribution, before penalties and temperature): JSON fields with --json, else a\n"
                  "tab-separated table on stderr after each completion (id, text, logprob, id:logprob...;\n"
                  "\\\\, \\t, \\n, \\r and \\0 (a NUL byte) escaped in text)")
      ->transform(whole_number_in(0, 100));
  cmd->add_flag("--json", f.json,
                "one JSON object per completion per line: text (the continuation), tokens, finish_reason\n"
                "(stop/length/cancelled), index, prompt_index, seed, prompt_tokens, timings; logprobs with\n"
                "--logprobs");
  cmd->add_flag("--special", f.special,
                "read <|endoftext|> and the model's other special tokens in the prompt as tokens, not text");
}

// A prompt as its samples run it: its ids and the text echoed for it, the first sample's
// seed and the length limit.
struct PromptRun {
  std::vector<uint32_t> ids;
  std::string text;
  uint64_t first_seed = 0;
  uint32_t max_tokens = 0;
};

// One completion to run: its prompt, its sample's seed, its output index and prompt's index.
struct Job {
  const PromptRun* prompt = nullptr;
  uint64_t seed = 0;
  uint32_t index = 0, prompt_index = 0;
};

// Every prompt's --num-samples completions, output in that order, each made when it runs:
// 10,000 prompts of 1,000 samples hold 10,000 prompts, not 10 million copies of them.
struct Jobs {
  std::vector<PromptRun> prompts;
  uint32_t samples = 1;
  size_t size() const { return prompts.size() * samples; }
  Job at(size_t k) const {
    const size_t p = k / samples;
    return {&prompts[p], prompts[p].first_seed + k % samples, static_cast<uint32_t>(k), static_cast<uint32_t>(p)};
  }
};

// Completions that decode together: each batched step gives every unfinished one its next
// token (models/decode_batch.hpp: the same tokens each would get alone).
constexpr uint32_t kSamplesPerBatch = 16;

void print_summary(const Generator& gen, const ModelSession& s) {
  const auto& t = gen.timings();
  // A decode rate needs two tokens: the first comes with the prompt's pass.
  char decode[64] = "";
  if (t.generated_tokens > 1) std::snprintf(decode, sizeof decode, " at %.1f tok/s", t.decode_tok_s());
  std::fprintf(stderr, "gpt-vk: %s; load %.2f s, prompt %u tokens at %.1f tok/s, generated %u token%s%s\n",
               finish_message(gen.finish_reason(), s.cfg.context_length).c_str(), s.load_seconds, t.prompt_tokens,
               t.prefill_tok_s(), t.generated_tokens, t.generated_tokens == 1 ? "" : "s", decode);
}

// Decodes until every generator has finished, one batched step for all that are due; each
// step's text goes to `out(i, piece)`.
template <typename Out>
void decode_together(std::vector<std::unique_ptr<Generator>>& gens, const std::vector<GptModel*>& models,
                     DecodeBatch& batch, Out out) {
  for (bool running = true; running;) {
    check_stdout_reader();
    std::vector<GptModel*> rows;
    std::vector<Generator*> due;
    for (size_t i = 0; i < gens.size(); ++i) {
      if (SigintFlag::raised() && !gens[i]->finished()) gens[i]->cancel();
      if (gens[i]->decode_due()) rows.push_back(models[i]), due.push_back(gens[i].get());
    }
    if (!rows.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<uint32_t> next = batch.decode_next(rows);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (size_t b = 0; b < due.size(); ++b) due[b]->decoded(next[b], dt);
    }
    running = false;
    for (size_t i = 0; i < gens.size(); ++i) {
      if (gens[i]->finished()) continue;
      out(i, gens[i]->next().text);
      running = running || !gens[i]->finished();
    }
  }
}

// `jobs`, one per model, decoding as one batch. The first streams its text as it comes; the
// others' output follows it, in order, so stdout reads as if they ran one after another.
void run_batch(ModelSession& s, const Tokenizer& tok, std::span<const Job> jobs, const Flags& f,
               const std::vector<GptModel*>& models) {
  std::vector<std::unique_ptr<Generator>> gens;
  std::vector<std::string> texts(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    GenerationOptions run;
    run.sampling = f.sampling;
    run.sampling.seed = jobs[i].seed;
    run.max_tokens = jobs[i].prompt->max_tokens;
    run.stop = f.stop;
    // The generator lists K >= 1 alternatives whenever it lists logprobs; K = 0 shows none.
    run.logprobs = f.logprobs ? std::max(1u, *f.logprobs) : 0;
    if (i == 0 && !f.json && !f.no_echo) emit(jobs[i].prompt->text);
    gens.push_back(std::make_unique<Generator>(*models[i], tok));
    gens.back()->begin(jobs[i].prompt->ids, run);
  }
  // The prompts in bursts, each with its own results (runtime/generator.hpp).
  DecodeBatch batch;
  std::vector<Generator*> started;
  for (auto& g : gens) started.push_back(g.get());
  run_prompts_together(batch, started);
  decode_together(gens, models, batch, [&](size_t i, const std::string& piece) {
    if (i == 0 && !f.json) emit(piece);
    else texts[i] += piece;
  });
  for (size_t i = 0; i < gens.size(); ++i) {
    if (f.json) {
      emit(completion_json(*gens[i], tok, jobs[i].index, jobs[i].prompt_index, jobs[i].seed, f.logprobs) + "\n");
    } else {
      if (i > 0 && !f.no_echo) emit(jobs[i].prompt->text);
      emit(texts[i] + "\n");
      if (f.logprobs) write_stderr(logprobs_table(*gens[i], tok, *f.logprobs));
    }
    print_summary(*gens[i], s);
  }
}

// Runs every job, kSamplesPerBatch at a time, until Ctrl-C (a SigintFlag the caller holds);
// returns the process's exit code.
int run_jobs(ModelSession& s, const Tokenizer& tok, const Jobs& jobs, const Flags& f) {
  // One job runs on the session's model; several on models sharing its weights whose KV
  // caches are the slots of one pool (one attention dispatch a layer for the batch).
  std::vector<std::unique_ptr<GptModel>> slots;
  std::vector<GptModel*> models = {s.model.get()};
  const size_t width = std::min<size_t>({jobs.size(), kSamplesPerBatch, ops::sampler_rows_per_binding(*s.ctx, s.cfg.vocab_size)});
  if (width > 1) {
    slots = make_slot_models(*s.ctx, s.cfg, s.model->shared_weights(), static_cast<uint32_t>(width),
                             s.model->max_chunk());
    models.clear();
    for (auto& m : slots) {
      m->set_sampling(f.sampling);
      models.push_back(m.get());
    }
  }
  size_t first = 0;
  for (; first < jobs.size() && !SigintFlag::raised(); first += width) {
    std::vector<Job> batch;
    for (size_t k = first; k < std::min(first + width, jobs.size()); ++k) batch.push_back(jobs.at(k));
    run_batch(s, tok, batch, f, {models.begin(), models.begin() + long(batch.size())});
  }
  if (first < jobs.size())
    std::fprintf(stderr, "gpt-vk: interrupted: %zu completion%s not started\n", jobs.size() - first,
                 jobs.size() - first == 1 ? "" : "s");
  // --json gives a line for every completion, the ones Ctrl-C kept from starting too.
  for (; f.json && first < jobs.size(); ++first) {
    const Job job = jobs.at(first);
    emit(unstarted_completion_json(job.index, job.prompt_index, job.seed,
                                   static_cast<uint32_t>(job.prompt->ids.size()), f.logprobs) +
         "\n");
  }
  return SigintFlag::raised() ? SigintFlag::kExitCode : 0;
}

// Each prompt's ids (an empty one starts from <|endoftext|>) and each of its --num-samples
// samples, sample i seeded seed + i (the prompt's own seed and max_tokens where its JSON line
// gives them); output indices in that order.
Jobs make_jobs(const Tokenizer& tok, const std::vector<PromptSpec>& prompts, const Flags& f, uint64_t seed,
               uint32_t context) {
  require_special_token(tok, f.special);
  // A completion's index (its --json line's "index") is 32-bit.
  if (prompts.size() * f.num_samples > UINT32_MAX)
    throw InputError(std::to_string(prompts.size()) + " prompts of " + std::to_string(f.num_samples) +
                     " samples are more than 2^32 completions");
  Jobs jobs;
  jobs.samples = f.num_samples;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const PromptSpec& spec = prompts[p];
    auto ids = tok.encode_document(spec.text, f.special);
    // An empty prompt starts from <|endoftext|>, as GPT-2 was trained to begin documents
    // (or from the model file's bos token).
    if (ids.empty()) {
      if (!tok.start_id())
        throw InputError(spec.where() + " is empty and the vocabulary has no <|endoftext|> to start from");
      ids.push_back(*tok.start_id());
    }
    require_context_room(ids.size(), 1, context, spec.where());
    const uint32_t max_tokens = spec.max_tokens.value_or(f.max_tokens);  // --max-tokens was checked already
    if (max_tokens > context)
      throw InputError(spec.where() + ": \"max_tokens\" " + std::to_string(max_tokens) +
                       " exceeds the model's context of " + std::to_string(context) + " tokens");
    const uint64_t first_seed = spec.seed.value_or(seed);  // sample i: first_seed + i
    // GPT-1's tokens carry the space after a word ("the</w>" is "the "), which the prompt's
    // text may lack at its end: the echo adds it, as decoding prompt and continuation
    // together does. (GPT-2's text is its tokens' bytes, so this never adds anything there.)
    std::string echo = spec.text;
    if (tok.token_bytes(ids.back()).ends_with(' ') && !echo.empty() && !std::isspace(uint8_t(echo.back())))
      echo += ' ';
    jobs.prompts.push_back({std::move(ids), std::move(echo), first_seed, max_tokens});
  }
  return jobs;
}

}  // namespace

Action add_generate(CLI::App& app, Common& common) {
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("generate", kHelp);
  add_model_flags(cmd, f->model);
  add_flags(cmd, *f);
  return [&common, f, cmd] {
    const bool has_prompt = cmd->get_option("--prompt")->count() > 0;
    const bool has_file = cmd->get_option("--prompt-file")->count() > 0;
    const std::vector<PromptSpec> prompts =
        read_prompts(has_prompt ? &f->prompts : nullptr, has_file ? &f->prompt_file : nullptr);
    for (const auto& b : f->logit_bias) f->sampling.logit_bias.push_back(parse_logit_bias(b));
    const uint64_t seed = f->seed ? *f->seed : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());
    f->sampling.seed = seed;
    ops::check_sampling_params(f->sampling);
    OpenOptions options;
    options.sampling = &f->sampling;
    options.defer_weights = true;
    auto s = open_model(common, f->model, options);
    // Where the device memory is host-mapped (lavapipe) the weights load while the prompt is
    // tokenized and the model's graphs are built; elsewhere after, in load_weights().
    s.start_loading_weights();
    const auto& cfg = s.cfg;
    // The default of 100 fits the model's context when the context is shorter (the run stops
    // when the context is full); only a value the user gave is refused for not fitting.
    if (cmd->get_option("--max-tokens")->count() == 0) f->max_tokens = std::min(f->max_tokens, cfg.context_length);
    if (f->max_tokens > cfg.context_length)
      throw InputError("--max-tokens " + std::to_string(f->max_tokens) + " exceeds the model's context of " +
                       std::to_string(cfg.context_length) + " tokens");
    Tokenizer tok = load_model_tokenizer(cfg);
    const Jobs jobs = make_jobs(tok, prompts, *f, seed, cfg.context_length);
    // Ctrl-C from here on ends the run with what it has (before, it kills the process).
    const SigintFlag sigint;
    // The seed matters only when sampling draws (greedy decoding never does) and some prompt
    // has no seed of its own.
    const bool seed_used = std::ranges::any_of(prompts, [](const PromptSpec& p) { return !p.seed; });
    if (!f->seed && f->sampling.temperature > 0 && seed_used)
      std::fprintf(stderr, "gpt-vk: seed %llu\n", static_cast<unsigned long long>(seed));
    s.model->set_sampling(f->sampling);
    // The prompt's pipelines compile (on lavapipe, most of a cold start) while the weights load.
    s.model->warm_up(static_cast<uint32_t>(jobs.prompts[0].ids.size()));
    s.load_weights();
    return run_jobs(s, tok, jobs, *f);
  };
}

}  // namespace gptvk::cli
