// Encode throughput of gpt-vk's tokenizer, for bench/peers/tokenizer_bench.sh.
// Usage: tokenizer_bench VOCAB MERGES TEXT_FILE [WARM_REPEATS]
// Prints one line of key=value pairs: load_ms, bytes, tokens, cold_mb_s (first pass: an
// empty word cache, as the reference's first pass), warm_mb_s (best later pass), both in
// CPU time, their wall-clock versions, and ids_fnv (FNV-1a over the ids as decimal text
// separated by spaces, to compare with the reference's ids without writing them out).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/vocab_files.hpp"

namespace {

// CPU time of this thread: on a machine shared with other jobs, wall time measures the
// other jobs too. (On an idle machine the two agree.) Wall time is reported as well.
double clock_seconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Stopwatch {
  double cpu0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID), wall0 = clock_seconds(CLOCK_MONOTONIC);
  double cpu() const { return clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0; }
  double wall() const { return clock_seconds(CLOCK_MONOTONIC) - wall0; }
};

std::string ids_fnv(const std::vector<uint32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string s = (i ? " " : "") + std::to_string(ids[i]);
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s VOCAB MERGES TEXT_FILE [WARM_REPEATS]\n", argv[0]);
    return 2;
  }
  int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  try {
    std::string text = gptvk::tokenizer::read_file_bytes(argv[3]);
    Stopwatch load_time;
    gptvk::Tokenizer tok = gptvk::Tokenizer::load(argv[1], argv[2]);
    double load_s = load_time.cpu();

    Stopwatch cold_time;
    std::vector<uint32_t> ids = tok.encode(text);
    double cold_s = cold_time.cpu(), cold_wall = cold_time.wall();
    double warm_s = 1e30, warm_wall = 1e30;
    for (int r = 0; r < repeats; ++r) {
      Stopwatch warm_time;
      std::vector<uint32_t> again = tok.encode(text);
      warm_s = std::min(warm_s, warm_time.cpu());
      warm_wall = std::min(warm_wall, warm_time.wall());
      if (again != ids) {
        std::fprintf(stderr, "tokenizer_bench: a repeated encode gave different ids\n");
        return 1;
      }
    }
    double mb = double(text.size()) / 1e6;
    if (repeats <= 0) warm_s = warm_wall = 0;
    std::printf("load_ms=%.1f bytes=%zu tokens=%zu cold_mb_s=%.3f warm_mb_s=%.3f cold_wall_mb_s=%.3f "
                "warm_wall_mb_s=%.3f ids_fnv=%s\n",
                load_s * 1e3, text.size(), ids.size(), mb / cold_s, mb / warm_s, mb / cold_wall, mb / warm_wall,
                ids_fnv(ids).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
