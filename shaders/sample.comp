#version 450
#extension GL_GOOGLE_include_directive : require
// Next-token sampler: one workgroup picks one token from logits[VOCAB] and only its id leaves
// the device. Order (tests/reference/sample.cpp is the same in plain C++):
//   logits / temperature -> top-k -> softmax -> top-p -> min-p -> renormalise ->
//   inverse CDF at u,
// u from Philox4x32-10 (key = seed, counter = step_rng), tokens taken in id order.
// min-p is a third threshold on the same order: logit >= max logit + ln(min_p) (probability
// at temperature 1). It comes after top-p's search, so the nucleus is measured on the
// top-k survivors' whole distribution (as transformers and llama.cpp measure it), and since
// every filter keeps the tokens from its threshold up, keeping what all three keep is
// raising the floor to the highest of them. Greedy ignores it: the top token always passes.
// No sort: top-k and top-p are thresholds on the float order key of the logits (dividing by a
// positive temperature keeps the order), found by an 8-way search: each pass counts (top-k)
// or weighs (top-p) the tokens at or above 8 candidate keys at once and narrows the
// interval to the largest candidate that still holds enough, until the tokens left inside
// share one key. Ties at a threshold are all kept (top-k may keep more than k). The passes
// walk lists: each invocation lists its tokens from a floor up (list_tokens(), one lean
// pass over the vocabulary, where a floor that few tokens pass is known), or inside the
// interval after the first one or two whole passes; every pass drops what falls outside.
// The pick is a prefix sum: every invocation sums a contiguous chunk of weights (at
// temperature alone while it finds the logits' range: ONE_PASS), an exclusive scan places
// the chunks, and the chunk holding u * total scans its elements.
// temperature == 0 is greedy: the lowest index of the largest logit.
// BATCH 1: workgroup j draws with counter step_rng + j into ids[j] and leaves the step
// buffer alone (tests and many-candidate draws). BATCH 2 (rows): workgroup b samples row b
// of logits [rows][VOCAB] with the parameters and counter of row b of the table bound
// where the step buffer is, into ids[b] (a batched decode step's sequences, each with its
// own sampler; FILTERS is then the union of the rows' stages and each row tests its own
// parameters, uniformly over the workgroup). BATCH 0: ids[0] gets the token and the step
// advances (pos += 1, rng += 1) so a recorded decode graph replays unchanged, and with
// HISTORY the token is appended to the sequence's history.
//! variant subgroup USE_SUBGROUP
//! variant shared
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint VOCAB = 1;
layout(constant_id = 2) const uint SLOTS = 1;           // see common/sample_reduce.glsl
layout(constant_id = 3) const uint BATCH = 0;
layout(constant_id = 4) const uint SCRATCH_STRIDE = 1;  // words of scratch per workgroup
// The stages the push constants below will use (the host derives it from the same
// parameters): bit 0 sampling (temperature > 0; else greedy), bit 1 top-k, bit 2 top-p,
// bit 3 min-p (never with BATCH 2: the row table has no field for it).
// The rest is dead code the driver never compiles (lavapipe's JIT of the whole sampler
// dominated a cold start).
layout(constant_id = 5) const uint FILTERS = 7;
const bool SAMPLING = (FILTERS & 1u) != 0u;
const bool TOP_K = (FILTERS & 2u) != 0u;
const bool TOP_P = (FILTERS & 4u) != 0u;
const bool MIN_P = (FILTERS & 8u) != 0u && BATCH != 2u;
// Temperature alone: the range pass also sums each chunk's weights (online, against the
// chunk's running maximum), so the draw reads the logits once more only in its owner's chunk.
// Not with min-p, whose floor (relative to the top logit) that pass does not know yet.
const bool ONE_PASS = SAMPLING && !TOP_K && !TOP_P && !MIN_P;
// 1: append the token to the sequence's history (binding 4), which the sampling controls
// (shaders/sample_controls.comp) read; 0: binding 4 is a placeholder left alone.
layout(constant_id = 6) const uint HISTORY = 0;

// Fixed per recorded graph (SamplingParams); push constants so a new seed needs no new
// pipeline. Unused with BATCH 2, which reads RowParams instead.
layout(push_constant) uniform Params {
  float temperature;  // 0: greedy
  uint top_k;         // 0 or >= VOCAB: off
  float top_p;        // >= 1: off; > 0
  uint seed_lo;
  uint seed_hi;
  float log_min_p;    // ln(min_p); read only with MIN_P
} P;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };
#define STEP_BINDING 2
#include "common/step.glsl"
// BATCH 2: the parameters of row b at row_params[b] (ops::SampleRow), bound where the
// step buffer is in the other modes (two views of one binding; each mode uses only its own).
struct RowParams {
  float temperature;
  uint top_k;
  float top_p;
  uint seed_lo;
  uint seed_hi;
  uint rng_step;
  uint same_as;  // 0: row b's own logits; r + 1: row r's (a twin prompt's, models/decode_batch.hpp)
  uint pad1;
};
layout(std430, binding = STEP_BINDING) readonly buffer RowTable { RowParams row_params[]; };
// Per workgroup: the candidate lists (entry e of invocation l at l + e * size, below VOCAB
// since l owns tokens l, l + size, ... and lists only those). Each invocation reads only
// the entries it wrote.
layout(std430, binding = 3) buffer Scratch { uint scratch[]; };
// history[0]: tokens in the sequence, n; history[1 + i]: token i (ops::SamplingState).
layout(std430, binding = 4) buffer History { uint history[]; };

#include "common/philox.glsl"
#include "common/sample_reduce.glsl"

uint lid;
uint wbase;  // this workgroup's scratch
float max_logit;
uint listed = 0;                // length of this invocation's candidate list
bool lists_hold_floor = false;  // the lists hold every token from the next search's floor up
// Top-p's target mass, when list_tokens() found it (else the first search pass does).
float top_p_target = 0.0;

// The temperature (P's or the row's), read once in main(): on lavapipe a push-constant
// read inside a loop is a gather over the lanes.
float temperature;
// This draw's other parameters: P's, or (BATCH 2) its row's, which main() copies here. The
// other modes read P where they use it: through globals they draw and JIT-compile slower on
// lavapipe (bench/PERFORMANCE.md, "Start to first token").
RowParams row;
uint top_k() { return BATCH == 2u ? row.top_k : P.top_k; }
float top_p() { return BATCH == 2u ? row.top_p : P.top_p; }
uvec2 seed() { return BATCH == 2u ? uvec2(row.seed_lo, row.seed_hi) : uvec2(P.seed_lo, P.seed_hi); }
// precise: a token's weight is computed afresh wherever it is needed (each top-p pass, the
// pick's chunk sums, the owner's walk), and every computation must give the same bits.
// Computing it again costs lavapipe less than storing every weight to scratch and reading
// it back (its storage-buffer stores and loads are per-lane loops).
float weight_of(float x) {
  precise float w = exp((x - max_logit) / temperature);
  return w;
}

// Logit i of the row this workgroup draws from (BATCH 2) or of the one vector (else).
uint logits_row;  // BATCH 2: the row of logits this workgroup draws from (main() sets it)
float logit(uint i) { return logits[BATCH == 2u ? logits_row * VOCAB + i : i]; }

// One token's part in a search pass over the key interval [cand[0], hi]: a token inside
// counts for the candidates at or below its key, one above for all of them. Tokens from
// list_from up are listed for the next pass, except that one above leaves the lists unless
// `keep_above`, its share kept in `above`. `inside` tracks the largest key inside and the
// complement of the smallest.
void tally(uint i, uint k, float f, uint hi, uint cand[NSUM], uint list_from, const bool keep_above,
           inout float acc[NSUM], inout float above, inout uvec2 inside) {
  if (k > hi && !keep_above) {
    above += f;
  } else if (k >= cand[0] && f > 0.0) {
    for (uint j = 0; j < NSUM; ++j) acc[j] += k >= cand[j] ? f : 0.0;
    if (k <= hi) inside = max(inside, uvec2(k, ~k));
    if (k >= list_from) {
      scratch[wbase + listed * gl_WorkGroupSize.x + lid] = i;
      ++listed;
    }
  }
}

// NSUM increasing keys from lo, all but the top few in [lo, hi]: NSUM / 2 evenly spaced in
// key space, so every pass shrinks the interval at least about fourfold whatever the values
// (at most 16 passes), merged with NSUM / 2 evenly spaced in value space, so that logits
// crowded in a narrow band, as a model's are, narrow much faster than that. NSUM stays small
// for lavapipe's JIT of the sampler at a cold start.
void candidates(uint lo, uint hi, out uint cand[NSUM]) {
  const uint H = NSUM / 2u;
  uint step = (hi - lo) / H;
  float vlo = key_value(lo), span = key_value(hi) - vlo;  // span may overflow to inf: clamped
  for (uint j = 0; j < H; ++j) {
    cand[j] = lo + j * step;
    cand[H + j] = clamp(order_key(vlo + span * (float(j + 1u) / float(H + 1u))), lo, hi);
  }
  // Both halves are sorted, so no element is more than H places from its place.
  for (uint r = 0; r < H; ++r)
    for (uint j = 0; j + 1u < NSUM; ++j) {
      uint a = min(cand[j], cand[j + 1u]), b = max(cand[j], cand[j + 1u]);
      cand[j] = a;
      cand[j + 1u] = b;
    }
  // Strictly increasing: a repeat moves up by one (above hi only when hi - lo < NSUM - 1,
  // where such candidates simply never hold enough).
  for (uint j = 1; j < NSUM; ++j) cand[j] = max(cand[j], cand[j - 1u] + 1u);
}

// The largest key t with F(t) >= target, where F(t) sums f_i over the tokens with key >= t.
// Top-k (by_mass false): f_i = 1, target = top_k, so t is the k-th largest key; the lists
// keep every token from the interval up, so they end up holding all the tokens top-k keeps.
// Top-p (by_mass true): f_i = the weight of token i if its key is >= lo (else 0), target =
// top_p * (sum of all f_i), so t is the smallest logit the nucleus needs; after top-k it
// starts from top-k's lists instead of the whole vocabulary. From list_tokens()' floor,
// the target is top_p times the total it summed, below the floor included. Requires
// F(lo) >= target and every key <= hi, and keeps that
// invariant on [lo, hi] while narrowing it. main() runs both filters through one call
// site in a loop, so the driver compiles this once (two inlined copies lengthened lavapipe's
// JIT at a cold start; one call site costs nothing measurable per token).
uint search_threshold(uint lo, uint hi, const bool by_mass) {
  // A first whole pass lists the tokens in the top quarter of the logit range [lo, hi].
  float vlo = key_value(lo);
  uint list_from_first = clamp(order_key(vlo + (key_value(hi) - vlo) * 0.75), lo, hi);
  float target = by_mass ? top_p_target : float(top_k());
  float above = 0.0;
  // Whether a pass walks the lists rather than the whole vocabulary: from the start when
  // they hold every token from lo up (list_tokens(), or top-p after top-k), after the first
  // pass when its interval lies within what it listed (the top quarter of the logit range),
  // else after the second.
  bool walk = lists_hold_floor;
  const uint lo_first = lo;
  for (uint pass = 0; lo < hi; ++pass) {
    uint cand[NSUM];
    candidates(lo, hi, cand);
    float acc[NSUM];
    for (uint j = 0; j < NSUM; ++j) acc[j] = 0.0;
    uvec2 inside = uvec2(0u);
    // One loop for every kind of pass, so the driver compiles tally() once: a whole pass
    // walks the vocabulary (this invocation's tokens), a list pass this invocation's list,
    // compacted in place (entry `listed` <= e is free to write). Top-p weighs each token it
    // visits. Four specialised loops lengthened lavapipe's JIT at a cold start; this one
    // costs a little more per draw instead, as lavapipe evaluates the weighing under a mask
    // in top-k's passes too (bench/PERFORMANCE.md, "Start to first token").
    bool first_full = pass == 0u && !walk;
    uint list_from = first_full ? list_from_first : 0u;
    uint n = walk ? listed : (VOCAB + gl_WorkGroupSize.x - 1u - lid) / gl_WorkGroupSize.x;
    if (!walk) above = 0.0;
    listed = 0;
    for (uint e = 0; e < n; ++e) {
      uint i = lid + e * gl_WorkGroupSize.x;
      if (walk) i = scratch[wbase + i];
      float x = logit(i);
      uint k = order_key(x);
      float f = by_mass ? (k >= lo_first ? weight_of(x) : 0.0) : 1.0;
      tally(i, k, f, hi, cand, list_from, !by_mass, acc, above, inside);
    }
    // F(lo) >= target > F(hi + 1) (by induction, up to rounding): once every token weighing
    // in the interval has one key, that key is the threshold. Top-k's lists then hold every
    // token from lo up, unless this was the first whole pass (it listed only the top).
    inside = wg_max_u2(inside);
    if (inside.x == ~inside.y) {
      if (!by_mass) lists_hold_floor = !first_full || list_from_first == lo_first;
      return inside.x;
    }
    for (uint j = 0; j < NSUM; ++j) acc[j] += above;
    wg_sums(acc);
    // acc[0] is F(lo); on the first pass that is the total weight.
    if (by_mass && pass == 0u && top_p_target == 0.0) target = top_p() * acc[0];
    // The largest candidate still holding the target (F(cand[0]) >= target by the
    // invariant) and the one above it, found with constant indices only: an array indexed
    // by a variable moves to per-invocation scratch memory on lavapipe.
    uint new_lo = cand[0], new_hi = min(hi, cand[1] - 1u);
    for (uint j = 1u; j < NSUM; ++j)
      if (acc[j] >= target) {
        new_lo = cand[j];
        new_hi = j + 1u < NSUM ? min(hi, cand[min(j + 1u, NSUM - 1u)] - 1u) : hi;
      }
    hi = new_hi;
    lo = min(new_lo, hi);
    walk = walk || !first_full || lo >= list_from_first;
    if (!by_mass) lists_hold_floor = walk;
  }
  return lo;
}

// Lists this invocation's tokens with key >= list_floor: one lean whole pass, so that the
// searches walk only lists. With `weigh` it also returns the total weight of the tokens
// from lo up and the part of it below list_floor.
void list_tokens(uint lo, uint list_floor, const bool weigh, out float total, out float below) {
  total = 0.0;
  below = 0.0;
  listed = 0;
  for (uint i = lid; i < VOCAB; i += gl_WorkGroupSize.x) {
    float x = logit(i);
    uint k = order_key(x);
    if (weigh) {
      float w = k >= lo ? weight_of(x) : 0.0;
      total += w;
      below += k < list_floor ? w : 0.0;
    }
    if (k >= list_floor) {
      scratch[wbase + listed * gl_WorkGroupSize.x + lid] = i;
      ++listed;
    }
  }
  float sums[NSUM];
  for (uint j = 0; j < NSUM; ++j) sums[j] = j == 0u ? total : j == 1u ? below : 0.0;
  wg_sums(sums);
  total = sums[0];
  below = sums[1];
}

// A floor that few tokens pass, listed in one lean pass, saves the searches' heavier whole
// passes; returns the floor the searches start from (kmin where none holds). Top-k (k at
// most the invocations): each invocation's largest key (kmax here) is a token of its own,
// so the k-th largest key is at least the smallest of those. Top-p alone: a floor c =
// ln(VOCAB / (1 - p)) - 3 below the top logit (in units of the temperature). The tokens
// below it weigh under (1 - p) e^3 together (the top token weighs 1), at most 1 - p of the
// total wherever that is e^3 or more. The lean pass sums what they do weigh, and the search
// starts from the floor only where that is at most 1 - p of the total (else from kmin, as
// without the pass). On a model's logits the floor lists a few percent of the vocabulary.
uint lean_floor(bool top_k_on, uint kmin, uint kmax) {
  uint smallest_max = ~wg_max_u(~kmax);
  float c = log(float(VOCAB) / (1.0 - top_p())) - 3.0;
  uint list_floor = max(kmin, top_k_on ? smallest_max : order_key(max_logit - temperature * c));
  float total, below;
  list_tokens(kmin, list_floor, TOP_P, total, below);
  if (!top_k_on && below > (1.0 - top_p()) * total) return kmin;
  lists_hold_floor = true;
  if (!top_k_on) top_p_target = top_p() * total;
  return list_floor;
}

// Adds w to a compensated (Kahan) sum: the pick's running sums cover up to the whole
// vocabulary of similar weights, where a plain float sum drifts by 1e-5 of the total.
void kahan_add(inout precise float sum, inout precise float carry, float w) {
  precise float y = w - carry;
  precise float t = sum + y;
  carry = (t - sum) - y;
  sum = t;
}

// This invocation's chunk of the vocabulary: a contiguous run of ids, in id order across
// the invocations (the draw's prefix sum needs that order).
uint chunk_begin() { return min(lid * ((VOCAB + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x), VOCAB); }
uint chunk_end() { return min(chunk_begin() + (VOCAB + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x, VOCAB); }

// The weight of this invocation's chunk's kept tokens (key >= floor_key).
float chunk_weight(uint floor_key) {
  precise float s = 0.0, carry = 0.0;
  for (uint i = chunk_begin(); i < chunk_end(); ++i) {
    float x = logit(i);
    // A loop of at most one trip, not an if: lavapipe runs an if's body under a mask for
    // every token, but branches around a loop that no lane enters, and after top-k or top-p
    // most tokens are not kept.
    for (bool kept = order_key(x) >= floor_key; kept; kept = false) kahan_add(s, carry, weight_of(x));
  }
  return s;
}

// Adds token x to a chunk's weight kept against the chunk's running maximum m (not yet the
// row's): a larger x rescales what was summed. One exp a token either way.
void add_online(float x, float t, inout float m, inout precise float s, inout precise float carry) {
  bool up = x > m;
  float e = exp((up ? m - x : x - m) / t);
  if (up) {
    s *= e;
    carry *= e;
  }
  kahan_add(s, carry, up || x == m ? 1.0 : e);
  m = max(m, x);
}

// Inverse CDF over the kept tokens (key >= floor_key) in id order at u in [0, 1), given the
// weight s of this invocation's chunk; returns the id on every invocation.
uint draw_token(float s, uint floor_key, float u) {
  uint begin = chunk_begin(), end = chunk_end();
  float total;
  float bound = wg_exclusive_scan(s, total);
  float target = u * total;
  // The last nonempty chunk that starts at or below the target holds it; the first nonempty
  // chunk starts at 0, so there always is one (rounding cannot leave a gap).
  uint owner = wg_max_u(s > 0.0 && bound <= target ? lid + 1 : 0u) - 1u;
  uint pick = 0;
  if (lid == owner) {
    // First kept token whose running sum passes the target; the chunk's last kept token if
    // rounding leaves the target at the chunk's very end.
    precise float run = bound, run_carry = 0.0;
    for (uint i = begin; i < end; ++i) {
      float x = logit(i);
      float w = order_key(x) < floor_key ? 0.0 : weight_of(x);
      if (w > 0.0) {
        kahan_add(run, run_carry, w);
        pick = i;
        if (target < run) break;
      }
    }
  }
  return wg_max_u(lid == owner ? pick : 0u);
}

void main() {
  lid = gl_LocalInvocationID.x;
  uint draw = BATCH != 0 ? gl_WorkGroupID.x : 0u;
  wbase = draw * SCRATCH_STRIDE;
  uint counter;
  if (BATCH == 2u) {
    row = row_params[draw];
    logits_row = row.same_as == 0u ? draw : row.same_as - 1u;
    temperature = row.temperature;
    counter = row.rng_step;
  } else {
    temperature = P.temperature;
    counter = step_rng + draw;
  }

  // One pass: the key range, and each invocation's lowest index holding its largest key
  // (and with ONE_PASS its chunk's weight against the chunk's own maximum, which needs the
  // chunk in order; else every WG-th token, the order a GPU's loads coalesce in).
  uint kmax = 0u, nkmin = 0u, nidx = 0u;  // key 0 is below every non-NaN float
  float chunk_max = uintBitsToFloat(0xFF800000u);  // -inf
  float online_t = temperature > 0.0 ? temperature : 1.0;  // a greedy row (BATCH 2) ignores the sums
  precise float online_s = 0.0, online_carry = 0.0;
  uint first = ONE_PASS ? chunk_begin() : lid, stride = ONE_PASS ? 1u : gl_WorkGroupSize.x;
  for (uint i = first; i < (ONE_PASS ? chunk_end() : VOCAB); i += stride) {
    float x = logit(i);
    uint k = order_key(x);
    if (k > kmax || i == first) {  // strictly larger: the lowest index wins ties
      kmax = k;
      nidx = ~i;
    }
    nkmin = max(nkmin, ~k);
    if (ONE_PASS) add_online(x, online_t, chunk_max, online_s, online_carry);
  }
  uint wg_kmax = wg_max_u(kmax);
  uint kmin = ~wg_max_u(nkmin);

  uint token;
  if (!SAMPLING || temperature == 0.0) {
    token = ~wg_max_u(kmax == wg_kmax ? nidx : 0u);
  } else {
    max_logit = key_value(wg_kmax);
    uint floor_key = kmin;
    bool top_k_on = TOP_K && top_k() > 0u && top_k() < VOCAB;
    bool top_p_on = TOP_P && top_p() < 1.0;
    if (top_k_on ? top_k() <= gl_WorkGroupSize.x : top_p_on) floor_key = lean_floor(top_k_on, kmin, kmax);
    for (uint m = 0u; m < 2u; ++m) {  // top-k, then top-p on what it kept
      bool by_mass = m == 1u;
      bool on = by_mass ? top_p_on : top_k_on;
      if (on) floor_key = search_threshold(floor_key, wg_kmax, by_mass);
    }
    // The same float sum as the host's reference (max logit + ln(min_p)); no larger than
    // wg_kmax, so the top token stays.
    if (MIN_P) floor_key = max(floor_key, order_key(max_logit + P.log_min_p));
    // A chunk summed online holds its weight scaled to the chunk's maximum; rescaled to the
    // row's, it differs from summing weight_of() by rounding only (the owner's walk in
    // draw_token() keeps the last kept token of its chunk where that leaves the target).
    float s = ONE_PASS ? (online_s - online_carry) * exp((chunk_max - max_logit) / temperature) : chunk_weight(floor_key);
    token = draw_token(s, floor_key, philox_uniform(seed(), counter));
  }

  if (BATCH != 0) {
    if (lid == 0u) ids[draw] = token;
  } else {
    barrier();  // every invocation has read step_rng before it changes
    if (lid == 0u) {
      ids[0] = token;
      step_pos = step_pos + 1u;
      step_rng = counter + 1u;
      if (HISTORY != 0u) {
        uint n = history[0];
        if (n + 1u < uint(history.length())) {
          history[1u + n] = token;
          history[0] = n + 1u;
        }
      }
    }
  }
}
