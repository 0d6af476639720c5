// Opcodes of a state-dict pickle as torch.save writes them (protocol 2), for tests that hand
// read_state_dict_pickle a pickle no PyTorch file holds (or that no fixture needs to).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gptvk::test::pickle {

inline std::string u32_le(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
inline std::string unicode(const std::string& s) { return "X" + u32_le(uint32_t(s.size())) + s; }
inline std::string global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}
inline std::string int32(int32_t v) { return "J" + u32_le(uint32_t(v)); }
inline std::string memo_put(uint32_t k) { return "r" + u32_le(k); }
inline std::string memo_get(uint32_t k) { return "j" + u32_le(k); }

// A one-element f32 tensor of `rank` ones in storage "0" (the arguments of
// torch._utils._rebuild_tensor_v2 and the call).
inline std::string one_element_tensor(size_t rank) {
  const std::string storage =
      "(" + unicode("storage") + global("torch", "FloatStorage") + unicode("0") + unicode("cpu") + int32(1) + "tQ";
  std::string ones = "(";
  for (size_t d = 0; d < rank; ++d) ones += int32(1);
  ones += "t";
  return global("torch._utils", "_rebuild_tensor_v2") + "(" + storage + int32(0) + ones + ones + "\x89" +
         global("collections", "OrderedDict") + ")RtR";
}

// A state dict of one-element vectors under `names`.
inline std::string state_dict(const std::vector<std::string>& names) {
  std::string p = "\x80\x02}(";
  for (const std::string& name : names) p += unicode(name) + one_element_tensor(1);
  return p + "u.";
}

}  // namespace gptvk::test::pickle
