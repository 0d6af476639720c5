// f16 weight rows are stored scaled by a power of two: row r holds h * 2^s_r, where h are the
// f16 weights (exactly what a cast to f16 gives) and s_r in [0, kF16MaxRowShift] is the
// largest shift that keeps the row's largest magnitude finite. Every kernel multiplies its
// result by the row's 2^-s_r (Matrix::row_scales), so results are those of the unscaled
// weights bit for bit: scaling by a power of two is exact in both directions.
//
// Why: with s_r = 10 every f16 subnormal (down to 2^-24) becomes a normal number, so the CPU
// kernels can turn a half into f32 bits with two integer operations (sign to bit 31,
// exponent and mantissa to bits 27..13: the value times 2^-112) instead of the F16C
// conversion, whose vpmovdw/vcvtph2ps shuffle port bounds lavapipe's mat-vec. Without the
// shift, f16 subnormals would become f32 subnormals there, and x86 takes a ~100-cycle
// microcode assist for every vector multiply that has one as input.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gptvk {

constexpr int kF16MaxRowShift = 10;  // 2^-24 (smallest f16 subnormal) * 2^10 = 2^-14 (smallest normal)

// The shift row `h` (n f16 values) gets: the largest s <= kF16MaxRowShift with
// max|h| * 2^s <= 65504 (0 for a row holding inf or NaN).
int f16_row_shift(const uint16_t* h, size_t n);

// h * 2^shift, exactly, for finite h where the result is finite (subnormals normalised).
uint16_t f16_times_pow2(uint16_t h, int shift);

// Scales n values in place by 2^shift (f16_times_pow2 on each).
void f16_scale_row(uint16_t* h, size_t n, int shift);

}  // namespace gptvk
