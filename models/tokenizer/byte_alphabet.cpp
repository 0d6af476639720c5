#include "models/tokenizer/byte_alphabet.hpp"

#include <array>

namespace gptvk::tokenizer {

namespace {

constexpr bool printable(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x144> to_byte{};  // the highest character used is U+0143
  constexpr Tables() {
    for (auto& v : to_byte) v = -1;
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) to_cp[b] = printable(b) ? b : next++;
    for (uint32_t b = 0; b < 256; ++b) to_byte[to_cp[b]] = int16_t(b);
  }
};

constexpr Tables kTables;
static_assert(kTables.to_cp[' '] == 0x120 && kTables.to_cp[0xFF] == 0xFF && kTables.to_cp[0xAD] == 0x143);

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return kTables.to_cp[b]; }

int code_point_to_byte(uint32_t c) { return c < kTables.to_byte.size() ? kTables.to_byte[c] : -1; }

}  // namespace gptvk::tokenizer
