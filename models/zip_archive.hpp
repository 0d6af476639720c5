// A read-only view of a zip archive of stored (uncompressed) entries, as torch.save
// writes them (PyTorch >= 1.6): the central directory (zip64 included) is read and every
// entry's local header checked (its name the directory's), so each entry is a byte range
// inside the mapped file. A compressed entry, a truncated archive, offsets that leave the
// file and an entry whose bytes fail their CRC-32 (check_crc) are InputErrors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace gptvk {

class ZipArchive {
 public:
  static ZipArchive open(const std::string& path);
  // Parses bytes held elsewhere (they must outlive the result).
  static ZipArchive parse(const std::string& path, std::span<const std::byte> bytes);

  const std::string& path() const { return path_; }
  // The entry's bytes, or an empty optional-like nullptr span and false when absent.
  bool find(std::string_view name, std::span<const std::byte>& out) const;
  // Throws an InputError naming the entry when its bytes do not have the CRC-32 the
  // directory gives (a damaged file): reads them all, so callers check what they use.
  void check_crc(std::string_view name) const;
  // Its entries' names and byte ranges.
  const std::map<std::string, std::span<const std::byte>, std::less<>>& entries() const { return entries_; }
  // Offset of a span inside the mapping (for tensors' byte ranges).
  uint64_t offset_of(std::span<const std::byte> s) const { return uint64_t(s.data() - bytes_.data()); }
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  std::string path_;
  std::shared_ptr<const void> mapping_;
  std::span<const std::byte> bytes_;
  std::map<std::string, std::span<const std::byte>, std::less<>> entries_;
  std::map<std::string, uint32_t, std::less<>> crcs_;
  friend class ZipReader;
};

}  // namespace gptvk
