// Wide kernel (GPUs, shaders/attention.comp): one workgroup of many invocations per
// (head, query), in two phases with the scores in shared memory, so that all of a step's
// key loads, then all of its value loads, are in flight at once. (The subgroup kernel walks
// its keys a block at a time, one subgroupAdd per key: on an H100, GPT-2 XL's decode spent
// 25 us per layer in it, over a quarter of the token.)
//   1. Invocation i takes keys i, i + WG, ...: the whole dot product q . k_j with q from
//      shared memory, the score to sh_s[j]. Then the workgroup's max M, p_j = exp(s_j - M)
//      in place, and the workgroup's sum L of the p_j.
//   2. Invocation (g, e), e < HDV, g < G = WG / HDV, sums p_j v_j[e] over the keys
//      j = g, g + G, ... (consecutive invocations read consecutive elements of a value
//      row); the G partial sums of each element meet in shared memory, divided by L.
// Shared memory: CONTEXT scores, the query, WG floats for the reductions and G * HDV
// partial sums (engine/ops/attention.cpp checks the device's limit and HDV <= WG).
//
// SPLIT (decode, flash-decoding): a head's keys are split between SPLITS workgroups
// (grid z), each a contiguous run, so that a few heads still fill a GPU's multiprocessors
// (GPT-2 XL's 25 heads would use 25 of an H100's 132). Each writes its unnormalised sums
// with its max M and sum L to `part`; the last of a head's workgroups to arrive (counted in
// `arrivals`, zero at the start of every run) rescales them to the common max and writes
// the head's output.

const uint WG = gl_WorkGroupSize.x;
const uint G = WG / HDV;  // key streams of phase 2

shared float sh_s[CONTEXT];
shared VT sh_q[HDV];
shared float sh_red[WG];  // one per subgroup; sized for any subgroup size
shared VT sh_part[G * HDV];

// Workgroup-wide max / sum of one value per invocation (every invocation gets the result).
float wg_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) sh_red[gl_SubgroupID] = v;
  barrier();
  float r = sh_red[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) r = max(r, sh_red[s]);
  barrier();  // sh_red is reused
  return r;
}
float wg_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) sh_red[gl_SubgroupID] = v;
  barrier();
  float r = 0.0;
  for (uint s = 0u; s < gl_NumSubgroups; ++s) r += sh_red[s];
  barrier();
  return r;
}

#if SPLIT
layout(constant_id = 9) const uint SPLITS = 2;
// [head][split]: the split's HD unnormalised sums, then its M and L.
layout(std430, binding = 5) coherent buffer Partials { float part[]; };
layout(std430, binding = 6) coherent buffer Arrivals { uint arrivals[]; };  // [head]
shared bool sh_last;

uint part_base(uint h, uint split) { return (h * SPLITS + split) * (HD + 2u); }
VT part_at(uint base, uint d) {
#if VEC == 4
  return vec4(part[base + 4u * d], part[base + 4u * d + 1u], part[base + 4u * d + 2u], part[base + 4u * d + 3u]);
#else
  return part[base + d];
#endif
}
void part_put(uint base, uint d, VT v) {
  for (uint c = 0u; c < VEC; ++c) part[base + d * VEC + c] = COMP(v, c);
}

// Called by every invocation once this workgroup's sums are in `part`: the last of head
// h's workgroups to arrive writes the head's output from all of them.
void merge_splits(uint h, uint o) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationID.x == 0u) sh_last = atomicAdd(arrivals[h], 1u) == SPLITS - 1u;
  barrier();
  if (!sh_last) return;
  memoryBarrierBuffer();
  float m = NEG_BIG;
  for (uint s = 0u; s < SPLITS; ++s) m = max(m, part[part_base(h, s) + HD]);
  float den = 0.0;
  for (uint s = 0u; s < SPLITS; ++s) den += exp(part[part_base(h, s) + HD] - m) * part[part_base(h, s) + HD + 1u];
  for (uint d = gl_LocalInvocationID.x; d < HDV; d += WG) {
    VT num = VT(0.0);
    for (uint s = 0u; s < SPLITS; ++s) num += exp(part[part_base(h, s) + HD] - m) * part_at(part_base(h, s), d);
    out_[o + d] = num / den;
  }
}
#endif

// Score of key j: this step's keys (j >= pos0 with APPEND) come from qkv, the rest from the cache.
float score(uint j, uint pos0, uint h) {
  float s = 0.0;
  if (APPEND && j >= pos0)
    for (uint e = 0u; e < HDV; ++e) s += VDOT(sh_q[e], key_at(j, pos0, h, e, true));
  else
    for (uint e = 0u; e < HDV; ++e) s += VDOT(sh_q[e], key_at(j, pos0, h, e, false));
  return s;
}

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  uint pos0 = step_pos;
  uint n_keys = min(pos0 + t + 1u, CONTEXT);
  uint lid = gl_LocalInvocationID.x;
#ifdef CHAINED
  chain_wait(pc.chain_wait_slot, pc.chain_need);
#endif
  // Keys k0..k1-1 are this workgroup's (sh_s[j - k0] holds key j's score).
#if SPLIT
  uint split = gl_WorkGroupID.z, per = (n_keys + SPLITS - 1u) / SPLITS;
  uint k0 = min(split * per, n_keys), k1 = min(k0 + per, n_keys);
  if (split == 0u) append_slice(h, t, pos0, lid);
#else
  uint k0 = 0u, k1 = n_keys;
  append_slice(h, t, pos0, lid);
#endif
  for (uint e = lid; e < HDV; e += WG) sh_q[e] = qkv[t * 3u * CV + h * HDV + e] * SCALE;
  barrier();

  float mx = NEG_BIG;
  for (uint j = k0 + lid; j < k1; j += WG) {
    float s = score(j, pos0, h);
    sh_s[j - k0] = s;
    mx = max(mx, s);
  }
  float big = wg_max(mx);
  float part_sum = 0.0;
  for (uint j = k0 + lid; j < k1; j += WG) {
    float p = exp(sh_s[j - k0] - big);
    sh_s[j - k0] = p;
    part_sum += p;
  }
  float l = wg_sum(part_sum);  // its barriers also publish every sh_s[j - k0]

  uint e = lid % HDV, g = lid / HDV;
  if (g < G) {
    VT acc = VT(0.0);
    uint cached = APPEND ? clamp(pos0, k0, k1) : k1;
    uint j = k0 + g;
    for (; j < cached; j += G) acc += sh_s[j - k0] * value_at(j, pos0, h, e, false);
    for (; j < k1; j += G) acc += sh_s[j - k0] * value_at(j, pos0, h, e, true);
    sh_part[g * HDV + e] = acc;
  }
  barrier();
  uint o = t * CV + h * HDV;
#if SPLIT
  uint base = part_base(h, split);
  for (uint d = lid; d < HDV; d += WG) {
    VT sum = VT(0.0);
    for (uint k = 0u; k < G; ++k) sum += sh_part[k * HDV + d];
    part_put(base, d, sum);
  }
  if (lid == 0u) {
    part[base + HD] = big;
    part[base + HD + 1u] = l;
  }
  merge_splits(h, o);
#else
  float inv = 1.0 / l;
  for (uint d = lid; d < HDV; d += WG) {
    VT sum = VT(0.0);
    for (uint k = 0u; k < G; ++k) sum += sh_part[k * HDV + d];
    out_[o + d] = sum * inv;
  }
#endif
#ifdef CHAINED
  chain_signal(pc.chain_signal_slot);
#endif
}
