// Split-K's second pass (GPUs; common/linear_gemm_tiled.glsl with SPLIT_K > 1): y[t][o] =
// (residual) + act(sum over the splits of x[s * T + t][o] + bias[o]), x being the first
// pass's partial sums (already unscaled: rows of Y_STRIDE floats, a block of T rows per
// split). One invocation per output, the splits added in order: the same sum every run.
layout(constant_id = 7) const uint SPLITS = 2;

void main() {
  read_push_constants();
  uint o = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  if (o >= ROWS || t >= TOKENS) return;
  float v = 0.0;
  for (uint s = 0u; s < SPLITS; ++s) v += load_x1((s * TOKENS + t) * Y_STRIDE + o);
  finish_y(t, o, v);
}
