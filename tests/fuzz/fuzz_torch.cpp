// libFuzzer target: torch.save files, zips and the legacy format (models/zip_archive.cpp,
// torch_pickle.cpp, torch_source.cpp): the zip directory, the restricted unpickler, the
// legacy format's storage records, tensor byte ranges.
// The checks live in targets.hpp so the corpus replay test runs the same ones.
#include "tests/fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gptvk::fuzz::check_torch({data, size});
  return 0;
}
