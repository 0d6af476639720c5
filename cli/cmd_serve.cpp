// `gpt-vk serve`: the OpenAI-compatible HTTP server (server/http_server.hpp) over a pool of
// --parallel KV slots that share the model's weights (runtime/scheduler.hpp). Binds first
// (GET /health answers 503 while the model loads), prints "gpt-vk: listening on
// http://HOST:PORT" on stderr once ready, and on SIGTERM or SIGINT stops taking requests,
// lets running ones finish (cancelling what is left after a grace period) and exits 0
// (cli/stop_signals.hpp: a signal while loading, or a second one, exits at once).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "cli/commands.hpp"
#include "cli/model_session.hpp"
#include "cli/number_checks.hpp"
#include "cli/stop_signals.hpp"
#include "engine/byte_size.hpp"
#include "engine/error.hpp"
#include "models/decode_batch.hpp"
#include "runtime/scheduler.hpp"
#include "server/http_server.hpp"

namespace gptvk::cli {

namespace {

// After the grace period, how long the HTTP threads get to finish writing; a client that
// trickles a request holds its thread past any such wait, so the process exits without it.
constexpr auto kHttpStopWait = std::chrono::seconds(3);

// The slots: the session's model and parallel - 1 more over the same weights, after checking
// that their KV caches and activations fit beside the weights.
std::vector<std::unique_ptr<GptModel>> make_slots(ModelSession& s, uint32_t parallel, uint32_t chunk) {
  const uint64_t weights = weights_device_bytes(s.cfg), per_slot = slot_device_bytes(*s.ctx, s.cfg, chunk);
  auto need = [&](uint32_t slots) {  // the batch's sampler keeps rows for 16 slots or more
    return weights + slots * per_slot + DecodeBatch::device_bytes(*s.ctx, s.cfg, slots, chunk);
  };
  const uint64_t have = model_memory_bytes(*s.ctx);
  if (have && need(1) > have)  // not even one slot: no --parallel to suggest
    throw InputError("the model needs about " + mib_ceil(need(1)) + " of device memory for one slot (" +
                     mib_ceil(weights) + " weights + " + mib_ceil(need(1) - weights) + "); the device has " +
                     mib_ceil(have) + model_memory_note(*s.ctx));
  if (have && need(parallel) > have) {
    uint32_t fits = 1, fails = parallel;  // need(fits) <= have < need(fails): bisect to the most that fit
    while (fails - fits > 1) {
      const uint32_t mid = fits + (fails - fits) / 2;
      (need(mid) <= have ? fits : fails) = mid;
    }
    throw UsageError("--parallel " + std::to_string(parallel) + " needs about " + mib_ceil(need(parallel)) +
                     " of device memory (" + mib_ceil(weights) + " weights + " +
                     mib_ceil((need(parallel) - weights) / parallel) + " per slot); the device has " + mib_ceil(have) +
                     model_memory_note(*s.ctx) + ": use at most --parallel " + std::to_string(fits));
  }
  // Their KV caches are the slots of one pool (a batched step's attention is then one
  // dispatch a layer on CPU devices); the session's own model makes way for them.
  auto shared = s.model->shared_weights();
  s.model.reset();
  return make_slot_models(*s.ctx, s.cfg, std::move(shared), parallel, chunk);
}

constexpr const char* kRequestFieldsHelp =
    "Request fields (both endpoints; server/README.md): max_tokens, temperature (0..2), top_p,\n"
    "top_k, seed, stop, n, stream, stream_options.include_usage, presence_penalty and\n"
    "frequency_penalty (-2..2), logit_bias ({\"<token id>\": -100..100}), repeat_penalty (> 0),\n"
    "repeat_last_n (-1 = all, 0 = off, default 64), min_p (0..1); the controls apply in\n"
    "generate's order. /v1/completions: prompt, logprobs (0..5), echo (with max_tokens 0: the\n"
    "prompt scored, nothing generated). /v1/chat/completions:\n"
    "messages, max_completion_tokens, logprobs (true) with top_logprobs (0..20).";

struct ServeFlags {
  ModelFlags model;
  server::ServerOptions http;
  uint32_t parallel = 4;
  uint32_t queue = 64;
  uint32_t prefill_chunk = kDefaultMaxChunk;
  std::string batch_kernels = "exact";
  bool no_prompt_cache = false;
  uint32_t shutdown_grace_s = 10;
};

// What the scheduler does: slots, queue, chunks, kernels and the prompt cache.
void add_scheduling_flags(CLI::App* cmd, ServeFlags& f) {
  cmd->add_option("--parallel", f.parallel, "sequences generated at once (KV slots, checked against device memory)")
      ->capture_default_str()->transform(whole_number_in(1, 1024));
  cmd->add_option("--queue", f.queue, "most sequences waiting for a slot when all are busy; beyond, requests get HTTP 429")
      ->capture_default_str()->transform(whole_number_in(0, 100000));
  cmd->add_option("--prefill-chunk", f.prefill_chunk,
                  "prompt tokens per forward step; between two decode steps at most this many prompt tokens\n"
                  "run, so a long prompt delays the running streams by one chunk at a time")
      ->capture_default_str()->transform(whole_number_in(1, 4096));
  cmd->add_option("--batch-kernels", f.batch_kernels,
                  "exact: every sequence's logits are those of its lone run, bit for bit (on GPUs a step\n"
                  "runs the one-token mat-vecs over every row, and prompts one by one);\n"
                  "gemm: batched steps and prompt bursts through the prompts' GEMMs on every device,\n"
                  "logits within rounding of a lone run")
      ->capture_default_str()->check(CLI::IsMember({"exact", "gemm"}));
  cmd->add_flag("--no-prompt-cache", f.no_prompt_cache,
                "keep no prompt's keys and values for later ones; by default a slot keeps those of the last prompt\n"
                "it ran (and, run again while idle, of its reply), and a prompt that begins with whole\n"
                "--prefill-chunk chunks of them, or of a running sequence's prompt, skips those (copied\n"
                "from the slot that has them; the same results; usage.prompt_tokens_details.cached_tokens\n"
                "counts them), and a prompt that ran whole before draws its first token from the logits\n"
                "kept from that run (unless it uses penalties, logit bias or min-p). Equal prompts arriving\n"
                "together (n choices) run once either way");
}

// What the HTTP side does beyond the address: key, CORS, timeouts.
void add_http_flags(CLI::App* cmd, ServeFlags& f) {
  // An empty key (--api-key "$KEY" with KEY unset) would serve without one: refused.
  cmd->add_option("--api-key", f.http.api_key, "require 'Authorization: Bearer KEY' on every route but /health and the page (GET /, /app.js)")
      ->check(CLI::Validator([](const std::string& s) { return s.empty() ? "needs a non-empty key" : ""; }, "KEY"));
  cmd->add_option("--cors-origin", f.http.cors_origins,
                  "let web pages of this origin (scheme://host[:port]; repeatable; * for every origin) read\n"
                  "the answers: CORS headers on every answer, preflights answered (default: no origin)")
      ->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator([](const std::string& o) { return server::cors_origin_problem(o); }, "ORIGIN"));
  cmd->add_option("--request-timeout", f.http.request_timeout_s,
                  "seconds a request's head and body may take to arrive, from its first byte; a slower\n"
                  "client gets HTTP 408 and its connection closed")
      ->capture_default_str()->transform(whole_number_in(1, 3600));
  cmd->add_option("--shutdown-grace", f.shutdown_grace_s,
                  "seconds the running requests get to finish after SIGTERM or Ctrl-C; those still running\n"
                  "then end with an error (HTTP 503, or an error event in a stream), and the exit waits at\n"
                  "most 3 s more for connections. A second signal meanwhile exits at once (exit code 1)")
      ->capture_default_str()->transform(whole_number_in(0, 3600));
}

// Binds, loads the model, serves until SIGTERM or SIGINT, then drains.
int serve(Common& common, ServeFlags& f) {
  StopSignals stop_signals;  // first: before any thread starts
  // Every request waiting for its completion or streaming it holds an HTTP thread (a
  // connection between requests, or with its head still arriving, does not); the spare
  // threads keep /health, /metrics and the 429s answered beside as many of those as the
  // slots and queue admit. Idle threads cost only address space, but not without bound.
  constexpr size_t kSpareThreads = 128, kMaxThreads = 2048;
  if (f.parallel + f.queue + kSpareThreads > kMaxThreads)
    throw UsageError("--parallel " + std::to_string(f.parallel) + " with --queue " + std::to_string(f.queue) +
                     " admits more requests than the server has threads for (each running or waiting request "
                     "holds one): at most " + std::to_string(kMaxThreads - kSpareThreads) + " in all");
  f.http.threads = f.parallel + f.queue + kSpareThreads;
  server::HttpServer http(f.http);
  int port = 0;
  try {
    port = http.start();
  } catch (const std::exception& e) {
    throw InputError(e.what());
  }
  auto s = open_model(common, f.model, {.max_chunk = f.prefill_chunk, .samples = true});
  Tokenizer tok = load_model_tokenizer(s.cfg);
  Scheduler scheduler(make_slots(s, f.parallel, f.prefill_chunk), tok, f.queue, f.batch_kernels == "exact", 0,
                      !f.no_prompt_cache);
  http.set_ready(scheduler, tok, {s.cfg.name, s.cfg.context_length});
  // An IPv6 address goes in brackets in a URL (http://[::1]:8080).
  const bool ipv6 = f.http.host.find(':') != std::string::npos;
  std::fprintf(stderr, "gpt-vk: listening on http://%s%s%s:%d\n", ipv6 ? "[" : "", f.http.host.c_str(), ipv6 ? "]" : "",
               port);
  std::fflush(stderr);

  stop_signals.serving();
  const int sig = stop_signals.wait_first();
  std::fprintf(stderr, "gpt-vk: %s: finishing running requests, then exiting\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  http.drain();
  scheduler.shutdown(std::chrono::seconds(f.shutdown_grace_s));
  if (!http.stop(kHttpStopWait)) {
    std::fprintf(stderr, "gpt-vk: a client connection is still open after the grace period; exiting without it\n");
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

}  // namespace

Action add_serve(CLI::App& app, Common& common) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server: POST /v1/completions and /v1/chat/completions (streamed as\n"
      "server-sent events), GET /v1/models, /health, /metrics, POST /tokenize, /detokenize, and a\n"
      "web page at GET / (completion and chat in the browser).\n"
      "Prints 'gpt-vk: listening on http://HOST:PORT' on stderr when ready; SIGTERM or Ctrl-C\n"
      "finishes the running requests (cancelling what is left after --shutdown-grace) and exits 0.");
  add_model_flags(cmd, f->model);
  cmd->add_option("--host", f->http.host, "address to listen on (loopback unless told otherwise)")
      ->capture_default_str()
      ->check(CLI::Validator([](std::string& h) { return h.empty() ? "an empty address" : ""; }, "ADDRESS"));
  cmd->add_option("--port", f->http.port, "TCP port; 0 picks a free one")->capture_default_str()->transform(whole_number_in(0, 65535));
  add_scheduling_flags(cmd, *f);
  add_http_flags(cmd, *f);
  cmd->footer(kRequestFieldsHelp);
  return [&common, f] { return serve(common, *f); };
}

}  // namespace gptvk::cli
