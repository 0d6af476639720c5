// Activations selected by a specialization constant (engine/ops/activation.hpp), so the
// choice costs no branch at run time. Include after declaring `const uint ACT`.
#define ACT_NONE 0u
#define ACT_GELU_TANH 1u
#define ACT_GELU_ERF 2u
#define ACT_RELU 3u

// erf by Abramowitz-Stegun 7.1.26 refined: max abs error ~1.2e-7, enough for f32 GELU.
float erf_approx(float x) {
  float s = sign(x);
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.5 * a);
  float y = 1.0 - t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
                t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
                t * (-0.82215223 + t * 0.17087277)))))))));
  return s * y;
}

float activate(float x, uint act) {
  if (act == ACT_GELU_TANH) {
    // tanh(u) written via exp so large |u| cannot overflow to NaN.
    float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    float e = exp(-2.0 * abs(u));
    float th = sign(u) * (1.0 - e) / (1.0 + e);
    return 0.5 * x * (1.0 + th);
  }
  if (act == ACT_GELU_ERF) return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476));
  if (act == ACT_RELU) return max(x, 0.0);
  return x;
}
