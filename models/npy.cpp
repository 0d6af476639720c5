#include "models/npy.hpp"

#include <cstring>
#include <fstream>
#include <regex>

#include "engine/error.hpp"
#include "engine/files.hpp"

namespace gptvk {

void write_npy(const std::string& path, const std::vector<uint64_t>& shape, const float* data) {
  std::string dims;
  uint64_t count = 1;
  for (uint64_t d : shape) {
    dims += std::to_string(d) + ", ";
    count *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(3, 4)" but "(3,)"
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + header length (2) + header, padded with spaces to 64 bytes, ends in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  uint16_t len = static_cast<uint16_t>(header.size());
  std::string preamble = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  // Atomic: a failed write (full disk) leaves any previous file at `path` (or at the end of
  // a link there) as it was; /dev/stdout goes to the descriptor itself (files::write_output).
  files::write_output(path, {preamble, header, {reinterpret_cast<const char*>(data), count * 4}},
                      "cannot write " + path + ": ");
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path);
  char pre[10];
  if (!in.read(pre, 10) || std::memcmp(pre, "\x93NUMPY", 6) != 0) throw InputError(path + " is not a .npy file");
  uint32_t hlen = 0;
  if (pre[6] == 1) {
    hlen = static_cast<uint8_t>(pre[8]) | (static_cast<uint8_t>(pre[9]) << 8);
  } else {
    char more[2];
    if (!in.read(more, 2)) throw InputError(path + ": truncated header");
    hlen = static_cast<uint8_t>(pre[8]) | (static_cast<uint8_t>(pre[9]) << 8) |
           (static_cast<uint8_t>(more[0]) << 16) | (static_cast<uint8_t>(more[1]) << 24);
  }
  std::string header(hlen, '\0');
  if (!in.read(header.data(), hlen)) throw InputError(path + ": truncated header");
  if (header.find("'<f4'") == std::string::npos) throw InputError(path + ": not little-endian float32");
  if (header.find("'fortran_order': False") == std::string::npos) throw InputError(path + ": not C order");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'shape': \\(([0-9, ]*)\\)"))) throw InputError(path + ": no shape");
  NpyArray a;
  std::string dims = m[1];
  std::regex num("[0-9]+");
  uint64_t count = 1;
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it) {
    a.shape.push_back(std::stoull(it->str()));
    count *= a.shape.back();
  }
  a.data.resize(count);
  if (!in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(count * 4)))
    throw InputError(path + ": truncated data");
  return a;
}

}  // namespace gptvk
