#include "models/zip_archive.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "engine/error.hpp"
#include "engine/files.hpp"

namespace gptvk {

namespace {
constexpr uint32_t kEocd = 0x06054b50, kEocd64 = 0x06064b50, kLocator64 = 0x07064b50, kCentral = 0x02014b50,
                   kLocal = 0x04034b50;
constexpr uint64_t kMaxEntries = 1 << 20;
}  // namespace

class ZipReader {
 public:
  explicit ZipReader(ZipArchive& z) : z_(z), b_(z.bytes_) {}

  void run() {
    const uint64_t eocd = find_eocd();
    uint64_t count = u16(eocd + 10), cd_size = u32(eocd + 12), cd_offset = u32(eocd + 16);
    if (eocd >= 20 && u32(eocd - 20) == kLocator64) {  // zip64: the real numbers are elsewhere
      const uint64_t rec = u64(eocd - 20 + 8);
      if (u32(rec) != kEocd64) fail("the zip64 end record is not where its locator says");
      count = u64(rec + 32);
      cd_size = u64(rec + 40);
      cd_offset = u64(rec + 48);
    }
    if (count > kMaxEntries || cd_offset > b_.size() || cd_size > b_.size() - cd_offset)
      fail("the central directory (" + std::to_string(count) + " entries at byte " + std::to_string(cd_offset) +
           ") runs past the end of the file: truncated");
    uint64_t p = cd_offset;
    for (uint64_t i = 0; i < count; ++i) p = central_entry(p, cd_offset + cd_size);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(z_.path_ + ": " + what); }
  void need(uint64_t at, uint64_t n) const {
    if (at > b_.size() || n > b_.size() - at) fail("zip structure at byte " + std::to_string(at) + " runs past the end of the file: truncated");
  }
  uint64_t le(uint64_t at, int n) const {
    need(at, uint64_t(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | std::to_integer<uint64_t>(b_[at + uint64_t(i)]);
    return v;
  }
  uint64_t u16(uint64_t at) const { return le(at, 2); }
  uint64_t u32(uint64_t at) const { return le(at, 4); }
  uint64_t u64(uint64_t at) const { return le(at, 8); }

  uint64_t find_eocd() const {
    if (b_.size() < 22) fail("too short for a zip archive: truncated");
    const uint64_t lowest = b_.size() >= 22 + 65535 ? b_.size() - 22 - 65535 : 0;
    for (uint64_t at = b_.size() - 22 + 1; at-- > lowest;)
      if (u32(at) == kEocd) return at;
    fail("no zip end-of-central-directory record: truncated");
  }

  // One central directory entry at `p` (the directory ends at `end`); returns the next.
  uint64_t central_entry(uint64_t p, uint64_t end) {
    if (p + 46 > end || u32(p) != kCentral) fail("bad zip central directory entry at byte " + std::to_string(p));
    const uint64_t flags = u16(p + 8), method = u16(p + 10), crc = u32(p + 16);
    uint64_t csize = u32(p + 20), usize = u32(p + 24), local = u32(p + 42);
    const uint64_t name_len = u16(p + 28), extra_len = u16(p + 30), comment_len = u16(p + 32);
    need(p + 46, name_len + extra_len + comment_len);
    std::string name(reinterpret_cast<const char*>(b_.data() + p + 46), name_len);
    // zip64 extra field: the 64-bit sizes and offset, for the fields that say 0xFFFFFFFF.
    for (uint64_t e = p + 46 + name_len, stop = e + extra_len; e + 4 <= stop;) {
      const uint64_t id = u16(e), len = u16(e + 2);
      if (e + 4 + len > stop) fail("entry '" + name + "': bad extra field");
      if (id == 1) {
        uint64_t q = e + 4;
        auto take = [&](uint64_t& field) {
          if (field != 0xFFFFFFFFu) return;
          if (q + 8 > e + 4 + len) fail("entry '" + name + "': short zip64 field");
          field = u64(q);
          q += 8;
        };
        take(usize);
        take(csize);
        take(local);
      }
      e += 4 + len;
    }
    if (flags & 1) fail("entry '" + name + "' is encrypted");
    if (method != 0)
      fail("entry '" + name + "' is compressed (method " + std::to_string(method) +
           "); torch.save stores entries uncompressed");
    if (csize != usize) fail("entry '" + name + "': stored sizes differ");
    need(local, 30);
    if (u32(local) != kLocal) fail("entry '" + name + "': no local header where the directory says");
    const uint64_t local_name = u16(local + 26);
    need(local + 30, local_name);
    if (std::string_view(reinterpret_cast<const char*>(b_.data() + local + 30), local_name) != name)
      fail("entry '" + name + "': its local header names another entry");
    const uint64_t data = local + 30 + local_name + u16(local + 28);
    need(data, usize);
    if (!z_.entries_.emplace(name, b_.subspan(data, usize)).second) fail("entry '" + name + "' appears twice");
    z_.crcs_.emplace(name, static_cast<uint32_t>(crc));
    return p + 46 + name_len + extra_len + comment_len;
  }

  ZipArchive& z_;
  std::span<const std::byte> b_;
};

ZipArchive ZipArchive::parse(const std::string& path, std::span<const std::byte> bytes) {
  ZipArchive z;
  z.path_ = path;
  z.bytes_ = bytes;
  ZipReader(z).run();
  return z;
}

ZipArchive ZipArchive::open(const std::string& path) {
  files::MappedFile file = files::map_regular(path);
  ZipArchive z = parse(path, file.bytes);
  z.mapping_ = std::move(file.keep);
  return z;
}

void ZipArchive::check_crc(std::string_view name) const {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  return;  // a fuzzer's mutations would almost all stop here, short of the parsers behind it
#endif
  const std::span<const std::byte> bytes = entries_.find(name)->second;
  uLong crc = crc32(0, nullptr, 0);
  // zlib takes a uInt length: pieces of 1 GiB.
  for (size_t at = 0; at < bytes.size(); at += size_t(1) << 30) {
    const size_t n = std::min(bytes.size() - at, size_t(1) << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
  }
  if (crc != crcs_.find(name)->second)
    throw InputError(path_ + ": entry '" + std::string(name) + "' fails its CRC-32 check: the file is damaged");
}

bool ZipArchive::find(std::string_view name, std::span<const std::byte>& out) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return false;
  out = it->second;
  return true;
}

}  // namespace gptvk
