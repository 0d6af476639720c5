// A one-line progress bar on stderr, drawn only when stderr is a terminal (never in logs or
// pipes), cleared when done.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace gptvk::cli {

class ProgressBar {
 public:
  explicit ProgressBar(const char* label) : label_(label), on_(isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() { clear(); }
  void update(uint64_t done, uint64_t total) {
    if (!on_ || total == 0) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const int width = 30, filled = static_cast<int>(width * done / total);
    char bar[width + 1];
    for (int i = 0; i < width; ++i) bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    const double eta = done ? secs * double(total - done) / double(done) : 0;
    std::fprintf(stderr, "\r%s [%s] %3d%%  %llu/%llu tokens  eta %.0f s ", label_, bar, int(100 * done / total),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), eta);
    std::fflush(stderr);
    drawn_ = true;
  }
  void clear() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  const char* label_;
  bool on_, drawn_ = false;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace gptvk::cli
