// Wide kernel (GPUs, shaders/attention.comp): one workgroup of many invocations per
// (head, query), in two phases with the scores in shared memory, so that all of a step's
// key loads, then all of its value loads, are in flight at once. (The subgroup kernel walks
// its keys a block at a time, one subgroupAdd per key, which left attention a large share
// of a GPU's decode step: bench/PERFORMANCE.md, "GPUs".)
//   1. Invocation i takes keys i, i + WG, ...: the whole dot product q . k_j with q from
//      shared memory, the score to sh_s[j]. Then the workgroup's max M, p_j = exp(s_j - M)
//      in place, and the workgroup's sum L of the p_j.
//   2. Invocation (g, e), e < HDV, g < G = WG / HDV, sums p_j v_j[e] over the keys
//      j = g, g + G, ... (consecutive invocations read consecutive elements of a value
//      row); the G partial sums of each element meet in shared memory, divided by L.
// Shared memory: CONTEXT scores, the query, WG floats for the reductions and G * HDV
// partial sums (engine/ops/attention.cpp checks the device's limit and HDV <= WG).

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
  append_slice(h, t, pos0, lid);
  for (uint e = lid; e < HDV; e += WG) sh_q[e] = qkv[t * 3u * CV + h * HDV + e] * SCALE;
  barrier();

  float mx = NEG_BIG;
  for (uint j = lid; j < n_keys; j += WG) {
    float s = score(j, pos0, h);
    sh_s[j] = s;
    mx = max(mx, s);
  }
  float big = wg_max(mx);
  float part_sum = 0.0;
  for (uint j = lid; j < n_keys; j += WG) {
    float p = exp(sh_s[j] - big);
    sh_s[j] = p;
    part_sum += p;
  }
  float l = wg_sum(part_sum);  // its barriers also publish every sh_s[j]

  uint e = lid % HDV, g = lid / HDV;
  if (g < G) {
    VT acc = VT(0.0);
    uint cached = APPEND ? min(pos0, n_keys) : n_keys;
    uint j = g;
    for (; j < cached; j += G) acc += sh_s[j] * value_at(j, pos0, h, e, false);
    for (; j < n_keys; j += G) acc += sh_s[j] * value_at(j, pos0, h, e, true);
    sh_part[g * HDV + e] = acc;
  }
  barrier();
  uint o = t * CV + h * HDV;
  float inv = 1.0 / l;
  for (uint d = lid; d < HDV; d += WG) {
    VT sum = VT(0.0);
    for (uint k = 0u; k < G; ++k) sum += sh_part[k * HDV + d];
    out_[o + d] = sum * inv;
  }
}
