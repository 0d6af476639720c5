// How the linear tests (tests/test_linear*.cpp) name a kernel and label a case in their
// failure messages: "<context> <kernel> <dtype> T=<tokens> in=<K> out=<N>".
#pragma once
#include <cstdint>
#include <sstream>
#include <string>

#include "engine/dtype.hpp"
#include "engine/ops/linear.hpp"

namespace gptvk::test {

inline const char* kernel_name(ops::LinearKernel k) {
  using ops::LinearKernel;
  switch (k) {
    case LinearKernel::Auto: return "auto";
    case LinearKernel::MatVec: return "matvec";
    case LinearKernel::MatVecWide: return "matvec_wide";
    case LinearKernel::MatVecTexel: return "matvec_texel";
    case LinearKernel::MatVecRows: return "matvec_rows";
    case LinearKernel::MatVecRowsHeld: return "matvec_rows_held";
    case LinearKernel::MatVecCols: return "matvec_cols";
    case LinearKernel::GemmRegisters: return "gemm_reg";
    case LinearKernel::GemmRegistersWide: return "gemm_reg_wide";
    case LinearKernel::GemmTiled: return "gemm_tiled";
    case LinearKernel::GemmCoopMat: return "gemm_coopmat";
    case LinearKernel::MatVecRowsBatch: return "matvec_rows_batch";
    case LinearKernel::MatVecColsBatch: return "matvec_cols_batch";
  }
  return "?";
}

inline std::string describe_linear(const std::string& context, ops::LinearKernel k, DType dt, uint32_t T, uint32_t K,
                                   uint32_t N) {
  std::ostringstream s;
  s << context << " " << kernel_name(k) << " " << dtype_name(dt) << " T=" << T << " in=" << K << " out=" << N;
  return s.str();
}

}  // namespace gptvk::test
