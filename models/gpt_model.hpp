// A GPT model on the device: its weights, KV cache and activation buffers, and the one
// piece of code that turns a config into a graph of ops (build_graph, models/gpt_graph.cpp;
// also a batched decode step's over several models, models/decode_batch.hpp). Prefill runs a
// prompt chunk by chunk through the GEMM path; decode replays one recorded graph per token
// (mat-vec path) whose sampler leaves the next token id on the device.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/graph.hpp"
#include "engine/plan.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/sample.hpp"
#include "engine/vk/buffer.hpp"
#include "models/config.hpp"
#include "models/kv_pool.hpp"
#include "models/weights.hpp"

namespace gptvk {

// The keys' and values' shape of a model of this config: heads, head size, context, dtype.
inline ops::AttentionShape attention_shape_of(const ModelConfig& cfg) {
  return {cfg.n_heads, cfg.head_dim(), cfg.context_length, cfg.kv_f16()};
}

namespace ops {
class SamplingState;
}

class GptModel {
 public:
  // Takes the weights; allocates the KV cache and activations for chunks of up to
  // `max_chunk` tokens (prompts longer than that are prefilled chunk by chunk).
  GptModel(vk::Context& ctx, ModelConfig cfg, ModelWeights weights, uint32_t max_chunk = 256);
  // Shares weights with other models (each with its own KV cache, activations and graphs):
  // several sequences over one copy of the weights, e.g. a server's slots. Models sharing
  // weights must be used from one thread. With `kv`, the KV cache is slot `slot` of that
  // pool (make_slot_models); else a pool of one slot of its own.
  GptModel(vk::Context& ctx, ModelConfig cfg, std::shared_ptr<ModelWeights> weights, uint32_t max_chunk = 256,
           std::shared_ptr<KvPool> kv = nullptr, uint32_t slot = 0);
  ~GptModel();

  const ModelConfig& config() const { return cfg_; }
  const ExecutionPlan& plan() const { return plan_; }  // the device-dependent choices (engine/plan.hpp)
  // The weights, for filling after construction: the graphs hold their buffers, not their
  // values, so pipelines can be warmed up (warm_up) before the values are written. Write
  // them before the first step runs: on GPUs that step also derives the folded
  // LayerNorms' vectors from them (compute_folded_norms).
  ModelWeights& weights() { return w_; }
  const std::shared_ptr<ModelWeights>& shared_weights() const { return weights_; }
  vk::Context& context() const { return ctx_; }
  uint32_t max_chunk() const { return max_chunk_; }

  // Runs `ids` at positions [pos, pos + n) and fills the KV cache. With `all_logits`,
  // returns the [n][vocab] logits of every position; otherwise returns nothing.
  std::vector<float> prefill(std::span<const uint32_t> ids, uint32_t pos, bool all_logits);
  // The same, returning the [n - first][vocab] logits of positions [first, n) only: the LM
  // head leaves out the rows before (perplexity's windows score their last stride).
  std::vector<float> prefill_logits_from(std::span<const uint32_t> ids, uint32_t pos, size_t first);

  // Runs `ids` at positions [pos, pos + n) like prefill and returns the logits of the last
  // position only: the last layer computes the others' keys and values and nothing more.
  std::vector<float> last_logits(std::span<const uint32_t> ids, uint32_t pos);
  // One decode step with a given token at `pos` (teacher forcing); returns its logits.
  std::vector<float> decode_logits(uint32_t token, uint32_t pos);

  // Sampling parameters used by prefill_and_sample / decode_next (re-records their graphs).
  void set_sampling(const ops::SamplingParams& params);
  // Prefills the prompt at position 0 and samples the first new token on the device.
  uint32_t prefill_and_sample(std::span<const uint32_t> prompt);
  // The same in steps, so that a caller can run other work between them (a scheduler's
  // decode steps): prompt_chunks(n) are the [begin, end) token ranges prefill_and_sample
  // runs an n-token prompt in, the last one sampling; run each but the last with
  // prefill(prompt[begin, end), begin, false), then the last with
  // sample_after_prefill(prompt, its begin). Same graphs, same results.
  std::vector<std::pair<uint32_t, uint32_t>> prompt_chunks(size_t n) const;
  // The next prompt starts past its first `tokens` tokens (a whole number of chunks), whose
  // keys and values this model's KV cache already holds: the previous prompt run here began
  // with the same tokens and ran those chunks (a server's prompt cache, runtime/scheduler).
  // Its remaining chunks then run as prompt_chunks gives them, with the same results as
  // running the whole prompt.
  void reuse_prompt_prefix(uint32_t tokens);
  // reuse_prompt_prefix with the keys and values of those tokens copied from `other` (over
  // the same weights and chunk size), whose cache holds them from a prompt's whole chunks:
  // the same bits as this model's own chunks would compute.
  void copy_prompt_prefix(const GptModel& other, uint32_t tokens);
  uint32_t sample_after_prefill(std::span<const uint32_t> prompt, uint32_t prefilled);
  // Exact hits of a prompt cache (runtime/scheduler.hpp): DecodeBatch::keep_first_logits
  // keeps the logits a prompt's first token was drawn from beside its keys and values, and a
  // later sequence with that prompt draws from them (DecodeBatch::sample_kept) without
  // running it. This copies `other`'s (same weights and chunk size) keys and values of
  // positions [0, tokens) and its kept logits here, for such a sequence. The caller vouches
  // that they belong together (other's position may already stand before them: a
  // sequence set to draw from them has not moved it yet).
  void copy_kept_prompt(const GptModel& other, uint32_t tokens);
  // Embeds the last sampled token at the next position, runs the model and samples again:
  // one submit, 4 bytes back.
  uint32_t decode_next();
  uint32_t position() const { return pos_; }  // tokens in the KV cache
  // The logits [vocab] the last prefill_and_sample / decode_next sampled from, downloaded
  // (for log-probabilities; the model's own, before any sampling control).
  std::vector<float> last_step_logits() const;

  // Compiles the pipelines that prefill_and_sample() of a `prompt_tokens`-token prompt will
  // use, without running anything (Graph::warm_up): lavapipe
  // compiles each pipeline at its first dispatch, on its queue thread, so this lets that
  // work (most of a cold start) overlap what the host does next, e.g. writing the weights,
  // which no shader reads until those calls. Call after set_sampling (which re-records the
  // sampling graphs).
  void warm_up(uint32_t prompt_tokens);

  // Per-op GPU times (`--profile`): graphs recorded after this call carry timestamps.
  void set_profile(bool on) { profile_ = on; }
  // Times of the graphs the last prefill, prefill_and_sample, decode_logits or decode_next
  // call ran (every chunk of a prompt, nothing older), summed over layers by op name.
  std::vector<OpTime> profile_summary() const;

 private:
  // What a step's graph ends with: the logits of every position, of the last one, a token
  // sampled from those, or nothing past the layers (a prompt chunk that only fills the KV
  // cache: no final norm of its own, no LM head).
  enum class Head { AllLogits, LastLogits, LastSample, KvOnly };
  // logits_from (AllLogits): the first row the LM head computes; its logits go to row 0.
  Graph& graph(uint32_t T, Head head, uint32_t logits_from = 0);
  // A step over several models' sequences (DecodeBatch), run on this model's activations.
  struct BatchStep {
    std::span<GptModel* const> seqs;
    // Empty: a decode step, one token of each sequence (T = seqs.size() rows). Else a burst
    // of prompts: lens[b] >= 2 tokens of seqs[b] (ids and step written), T their sum; or
    // lens[b] == 0 for a twin, whose prompt is that of seqs[twin_of[b]] at the same
    // position: it runs no rows of its own and samples from that one's row of logits
    // (twins come after every prompt that runs; DecodeBatch copies their keys and values).
    std::span<const uint32_t> lens;
    std::span<const uint32_t> twin_of;
    bool exact_rows = false;  // each row's arithmetic that of the sequence's own step
    // The row table (an ops::RowEntry per row, written before each run) of one attention
    // dispatch a layer over the rows' shared KvPool: a decode step's rows, or a burst's
    // prompts where burst_row_attention; or none.
    View rows;
    View row_ids;  // with the row table: each row's token id (one embedding dispatch)
    // One sampler dispatch for every row (ops::sample_rows): its table (written before each
    // run), the ids it writes and its scratch; or none (a sampler each, with its controls).
    View sample_table, sample_ids, sample_scratch;
  };
  std::unique_ptr<Graph> build_graph(uint32_t T, Head head, const BatchStep* batch = nullptr, uint32_t logits_from = 0);
  friend class DecodeBatch;
  struct GraphBuild;  // build_graph's steps and the state they share (models/gpt_graph.cpp)
  void write_ids(std::span<const uint32_t> ids, uint32_t pos);
  // Before a prompt's last chunk runs and samples (sample_after_prefill, or a burst of
  // DecodeBatch): checks that its earlier chunks ran and its ids, and sets the sampler's
  // history (penalties) to the prompt.
  void begin_last_chunk(std::span<const uint32_t> prompt, uint32_t prefilled);
  // Runs ids at [pos, pos + n) in chunks of max_chunk_ tokens: every chunk but the last only
  // fills the KV cache, the last ends with `head`. last_run_ then holds every chunk's graph.
  void run_chunks(std::span<const uint32_t> ids, uint32_t pos, Head head);
  size_t chunks_before_last(size_t n) const;  // tokens of an n-token run before its last chunk
  // After a batched step that sampled every row in one dispatch: this sequence's token
  // (`token`) goes where its own sampler would have put it, the step state advances as that
  // sampler advances it, and the token joins its history.
  void took_batch_sample(uint32_t token);
  // Runs the step graph of T tokens (ids and step state written), first computing the
  // folded LayerNorms' vectors if the graph uses them and they are not made yet; returns
  // the graph that ran.
  Graph& run(uint32_t T, Head head, uint32_t logits_from = 0);
  // Whether row `row` of a [*][cols] float buffer starts at an offset a view may bind at
  // (the device's storage-buffer offset alignment).
  bool row_aligned(uint32_t row, uint32_t cols) const;
  // Whether a burst's prompt of `len` rows attends in the burst's one dispatch a layer
  // (ops::kv_append_attention_rows) with the arithmetic of its own prompt step: that step
  // takes the texel kernel in every layer (not the tiled passes, the matrix units or the
  // last row alone).
  bool burst_row_attention(uint32_t len) const;
  // The first row an AllLogits step can start its LM head at, at or before `want`.
  uint32_t aligned_logit_row(uint32_t want) const;
  // The folded LayerNorms' vectors (W gamma, W beta + b), made on first need: the first run
  // of a graph that folds them (a one-token step, or a batched step with exact rows).
  void ensure_folded_norms();
  void compute_folded_norms();
  vk::Buffer& logits_all();  // [max_chunk][vocab], allocated on first use
  vk::Buffer& kept_logits();  // [vocab], allocated on first use
  void check_ids(std::span<const uint32_t> ids, uint32_t pos) const;
  ops::AttentionShape attention_shape() const { return attention_shape_of(cfg_); }
  // Throws std::logic_error (`what` names the caller) unless `other` runs this model's
  // weights on this device in chunks of the same size: its keys and values are this one's.
  void require_same_model(const GptModel& other, const char* what) const;

  vk::Context& ctx_;
  ModelConfig cfg_;
  std::shared_ptr<ModelWeights> weights_;  // possibly shared with other models
  ModelWeights& w_;                        // *weights_
  uint32_t max_chunk_;
  ExecutionPlan plan_;  // the device-dependent kernel and fusion choices (engine/plan.hpp)
  ops::SamplingParams sampling_;
  uint64_t sampling_version_ = 0;  // set_sampling calls so far: batched graphs recorded before are stale
  bool profile_ = false;
  uint32_t pos_ = 0;

  vk::Buffer ids_, step_;            // host-visible: token ids of the step, StepState
  vk::Buffer step_last_;             // host-visible: StepState at the step's last position (build_graph's last_row_only)
  vk::Buffer x_, h_, h_last_, qkv_, att_, ff_, logits_last_, sample_scratch_;
  vk::Buffer logits_all_;            // logits_all()
  vk::Buffer kept_logits_;           // kept_logits(): a prompt's first-token logits, kept (copy_kept_prompt)
  // Where last_step_logits() reads: logits_last_, or after a batched step this sequence's
  // row of the batch's logits (valid until the next step of any of its sequences).
  View step_logits_;
  std::unique_ptr<ops::SamplingState> sampling_state_;  // the sequence's token history for the sampling controls
  // Arrival counters of the dispatches whose last workgroup finishes a LayerNorm after a
  // residual add (ops::NormAfter) or the greedy pick after the LM head (ops::PickAfter).
  vk::Buffer arrival_counters_;
  vk::Buffer pick_partials_;         // ops::PickAfter: each LM-head workgroup's best logit
  std::shared_ptr<KvPool> kv_;       // the KV cache: slot kv_slot_ of the pool
  uint32_t kv_slot_ = 0;
  View k_cache(uint32_t l) const { return kv_->keys(l, kv_slot_); }
  View v_cache(uint32_t l) const { return kv_->values(l, kv_slot_); }
  // Every layer's keys and values of positions [begin, end), from `other`'s cache to this one's.
  std::vector<KvCopy> kv_copies_from(const GptModel& other, uint32_t begin, uint32_t end) const;
  vk::Buffer scores_;                // CPU devices: prefill attention's scores (ops::kv_append_attention_tiled)
  // The plan's folded LayerNorms (GPUs, pre-LN models, one token): those before qkv, fc and
  // the LM head folded into their mat-vecs (ops::NormBefore), saving a dispatch each. Per site, W gamma
  // and W beta + b, computed from the weights at the first run that uses them (the weights
  // are written after construction).
  struct FoldedNorm {
    vk::Buffer row_gamma, shift;
  };
  bool folded_ready_ = false;
  std::vector<FoldedNorm> folded_;  // [2l]: layer l's qkv (ln1), [2l + 1]: its fc (ln2); last: LM head (ln_f)
  std::map<std::tuple<uint32_t, Head, uint32_t>, std::unique_ptr<Graph>> graphs_;  // (T, head, logits_from)
  std::vector<Graph*> last_run_;
};

// InputError naming the first id of `ids` outside a vocabulary of `vocab` tokens.
void check_token_ids(std::span<const uint32_t> ids, uint32_t vocab);

// n models over one set of weights whose KV caches are the slots of one KvPool: a server's
// slots, or several prompts decoding as one batch (DecodeBatch then attends for all of them
// in one dispatch a layer where the device can).
std::vector<std::unique_ptr<GptModel>> make_slot_models(vk::Context& ctx, const ModelConfig& cfg,
                                                        std::shared_ptr<ModelWeights> weights, uint32_t n,
                                                        uint32_t max_chunk = 256);
// The device bytes one of those slots comes to beside the shared weights: its keys and
// values in the pool, the buffers its GptModel allocates for chunks of `max_chunk` tokens
// (those allocated on first use included: every position's logits, kept logits, a logit
// bias), less the scratch its graphs may hold (GPUs' split-K products: a few MiB). Kept
// beside the constructor, whose buffers it adds up, for `serve` to check that --parallel
// slots (and their DecodeBatch::device_bytes) fit before making them.
// Drivers round an allocation's size up (to 4 to 64 KiB); the estimate allows this much a buffer.
constexpr uint64_t kAllocationRounding = 64 << 10;
uint64_t slot_device_bytes(const vk::Context& ctx, const ModelConfig& cfg, uint32_t max_chunk);

}  // namespace gptvk
