#include "models/torch_pickle.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "engine/error.hpp"

namespace gptvk {

namespace {

struct Obj;
using Ref = std::shared_ptr<Obj>;
struct Obj {
  enum class K { Mark, None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor } k = K::None;
  int64_t i = 0;
  double f = 0;
  std::string s;            // Str; Global: "module.name"
  std::vector<Ref> items;   // Tuple, List; Dict: key, value, key, value, ...
  TorchTensorRef tensor;    // Storage (key, dtype, numel) and Tensor
};

struct StorageType {
  const char* name;
  const char* dtype;
  uint64_t bytes;
};
constexpr StorageType kStorages[] = {{"FloatStorage", "F32", 4}, {"HalfStorage", "F16", 2},
                                     {"BFloat16Storage", "BF16", 2}, {"DoubleStorage", "F64", 8},
                                     {"LongStorage", "I64", 8}, {"IntStorage", "I32", 4},
                                     {"ShortStorage", "I16", 2}, {"CharStorage", "I8", 1},
                                     {"ByteStorage", "U8", 1}, {"BoolStorage", "BOOL", 1}};

const StorageType* storage_type(const std::string& global) {
  for (const auto& s : kStorages)
    if (global == std::string("torch.") + s.name) return &s;
  return nullptr;
}

bool allowed_global(const std::string& g) {
  return g == "collections.OrderedDict" || g == "torch._utils._rebuild_tensor_v2" ||
         g == "torch._utils._rebuild_parameter" || storage_type(g) != nullptr;
}

// What the pickle's persistent ids said of each storage: every tensor of it must agree.
struct StorageDecl {
  std::string dtype;
  uint64_t element_bytes = 0, numel = 0;
};

class Unpickler {
 public:
  // The pickle starting at byte `start` of `b`, named `label` in errors. A zip's data.pkl
  // names storages by 5-tuples, the legacy format's pickle by 6-tuples (a storage view's
  // metadata last).
  Unpickler(const std::string& path, std::string label, std::span<const std::byte> b, uint64_t start = 0,
            bool legacy = false)
      : path_(path), label_(std::move(label)), b_(b), pos_(start), legacy_(legacy) {}
  // Every object lets go of its children first: a pickle may build cycles (a list that
  // holds itself) or chains too deep to destroy recursively.
  ~Unpickler() {
    for (const Ref& o : all_) o->items.clear();
  }

  Ref run() {
    for (;;) {
      const uint8_t op = byte();
      if (op == '.') break;  // STOP
      step(op);
    }
    if (stack_.size() != 1) fail("the pickle ends with " + std::to_string(stack_.size()) + " objects on its stack");
    return stack_.back();
  }
  // The byte after the STOP opcode, once run() returned.
  uint64_t end() const { return pos_; }
  const std::map<std::string, StorageDecl>& storages() const { return storages_; }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(path_ + ": " + label_ + ": " + what); }

 private:
  // A state dict makes about 25 objects a tensor (GPT-2 XL: ~15,000 in all), while a
  // pickle can make one every opcode byte, each ~250 bytes here: this bound keeps a small
  // hostile file from taking gigabytes.
  static constexpr size_t kMaxObjects = size_t(1) << 18;
  static constexpr size_t kMaxRank = 8;  // as safetensors files are held to
  Ref make(Obj::K k) {
    if (all_.size() >= kMaxObjects)
      fail("makes more than " + std::to_string(kMaxObjects) + " objects: not a state dict of tensors");
    auto o = std::make_shared<Obj>();
    o->k = k;
    all_.push_back(o);
    return o;
  }
  uint8_t byte() {
    if (pos_ >= b_.size()) fail("ends without a STOP opcode: truncated");
    return std::to_integer<uint8_t>(b_[pos_++]);
  }
  uint64_t le(int n) {
    if (uint64_t(n) > b_.size() - pos_) fail("ends inside an opcode's argument: truncated");
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | std::to_integer<uint64_t>(b_[pos_ + uint64_t(i)]);
    pos_ += uint64_t(n);
    return v;
  }
  std::string bytes(uint64_t n) {
    if (n > b_.size() - pos_) fail("a string of " + std::to_string(n) + " bytes runs past the end: truncated");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::string line() {
    std::string s;
    for (uint8_t c; (c = byte()) != '\n';) {
      if (s.size() > 256) fail("a text line (a global's name, an INT) is too long");
      s += char(c);
    }
    return s;
  }
  Ref pop() {
    if (stack_.empty() || stack_.back()->k == Obj::K::Mark) fail("pops an empty stack");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref& top() {
    if (stack_.empty() || stack_.back()->k == Obj::K::Mark) fail("reads an empty stack");
    return stack_.back();
  }
  // The objects above the topmost mark, removing them and the mark.
  std::vector<Ref> pop_mark() {
    size_t m = stack_.size();
    while (m > 0 && stack_[m - 1]->k != Obj::K::Mark) --m;
    if (m == 0) fail("no MARK on the stack");
    std::vector<Ref> items(stack_.begin() + long(m), stack_.end());
    stack_.resize(m - 1);
    return items;
  }
  void push(Ref r) {
    if (stack_.size() > (1u << 20)) fail("stack too deep");
    stack_.push_back(std::move(r));
  }
  void push_int(int64_t v) {
    Ref r = make(Obj::K::Int);
    r->i = v;
    push(r);
  }
  // INT's decimal text; "01" and "00" are True and False, as protocol 1 writes them.
  void push_text_int(const std::string& t) {
    if (t == "00" || t == "01") {
      Ref r = make(Obj::K::Bool);
      r->i = t == "01";
      push(r);
      return;
    }
    int64_t v = 0;
    const char* end = t.data() + t.size();
    if (auto [p, ec] = std::from_chars(t.data(), end, v); ec != std::errc() || p != end)
      fail("INT with the text '" + t + "', not a 64-bit integer");
    push_int(v);
  }
  void push_str(std::string s) {
    Ref r = make(Obj::K::Str);
    r->s = std::move(s);
    push(r);
  }
  void push_tuple(std::vector<Ref> items) {
    Ref r = make(Obj::K::Tuple);
    r->items = std::move(items);
    push(r);
  }
  // A pickle memoizes each object it makes at most once, so more entries than objects can
  // only grow memory (one 1-byte MEMOIZE each), never describe a state dict.
  void memo_put(uint64_t key) {
    if (memo_.size() >= kMaxObjects && !memo_.contains(key))
      fail("memoizes more than " + std::to_string(kMaxObjects) + " values: not a state dict of tensors");
    memo_[key] = top();
  }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo key " + std::to_string(key) + " read before it was written");
    push(it->second);
  }
  void global(const std::string& module, const std::string& name) {
    const std::string g = module + "." + name;
    if (!allowed_global(g))
      fail("refused global '" + g + "': a state dict of tensors never needs it (nothing in the file is run)");
    Ref r = make(Obj::K::Global);
    r->s = g;
    push(r);
  }
  void set_items(Ref& dict, const std::vector<Ref>& kv) {
    if (dict->k != Obj::K::Dict) fail("SETITEMS on something that is not a dict");
    if (kv.size() % 2) fail("SETITEMS with an odd number of items");
    dict->items.insert(dict->items.end(), kv.begin(), kv.end());
  }

  void step(uint8_t op);
  void push_long1();
  void push_binfloat();
  [[noreturn]] void refuse(uint8_t op) const;
  Ref reduce(const Ref& callable, const Ref& args);
  Ref persistent_load(const Ref& pid);

  const std::string& path_;
  const std::string label_;
  std::span<const std::byte> b_;
  uint64_t pos_ = 0;
  const bool legacy_;
  std::map<std::string, StorageDecl> storages_;
  std::vector<Ref> stack_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::vector<Ref> all_;  // every object made: one per opcode at most
};

void Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80: (void)byte(); break;                               // PROTO
    case 0x95: (void)le(8); break;                                // FRAME
    case '(': push(make(Obj::K::Mark)); break;                    // MARK
    case '}': push(make(Obj::K::Dict)); break;                    // EMPTY_DICT
    case ']': push(make(Obj::K::List)); break;                    // EMPTY_LIST
    case ')': push_tuple({}); break;                              // EMPTY_TUPLE
    case 'N': push(make(Obj::K::None)); break;                    // NONE
    case 0x88: case 0x89: {                                       // NEWTRUE, NEWFALSE
      Ref r = make(Obj::K::Bool);
      r->i = op == 0x88;
      push(r);
      break;
    }
    case 'I': push_text_int(line()); break;                       // INT (protocols 0 and 1)
    case 'K': push_int(int64_t(le(1))); break;                    // BININT1
    case 'M': push_int(int64_t(le(2))); break;                    // BININT2
    case 'J': push_int(int64_t(int32_t(uint32_t(le(4))))); break; // BININT
    case 0x8a: push_long1(); break;                               // LONG1
    case 'G': push_binfloat(); break;                             // BINFLOAT
    case 'X': push_str(bytes(le(4))); break;                      // BINUNICODE
    case 0x8c: push_str(bytes(le(1))); break;                     // SHORT_BINUNICODE
    case 'q': memo_put(le(1)); break;                             // BINPUT
    case 'r': memo_put(le(4)); break;                             // LONG_BINPUT
    case 0x94: memo_put(memo_.size()); break;                     // MEMOIZE
    case 'h': memo_get(le(1)); break;                             // BINGET
    case 'j': memo_get(le(4)); break;                             // LONG_BINGET
    case 'c': {                                                   // GLOBAL
      std::string module = line();
      global(module, line());
      break;
    }
    case 0x93: {                                                  // STACK_GLOBAL
      Ref name = pop(), module = pop();
      if (name->k != Obj::K::Str || module->k != Obj::K::Str) fail("STACK_GLOBAL without two strings");
      global(module->s, name->s);
      break;
    }
    case 't': push_tuple(pop_mark()); break;                      // TUPLE
    case 0x85: { Ref a = pop(); push_tuple({a}); break; }         // TUPLE1
    case 0x86: { Ref b = pop(), a = pop(); push_tuple({a, b}); break; }
    case 0x87: { Ref c = pop(), b = pop(), a = pop(); push_tuple({a, b, c}); break; }
    case 'l': { Ref r = make(Obj::K::List); r->items = pop_mark(); push(r); break; }  // LIST
    case 'a': { Ref v = pop(); if (top()->k != Obj::K::List) fail("APPEND to a non-list"); top()->items.push_back(v); break; }
    case 'e': {                                                   // APPENDS
      std::vector<Ref> v = pop_mark();
      if (top()->k != Obj::K::List) fail("APPENDS to a non-list");
      top()->items.insert(top()->items.end(), v.begin(), v.end());
      break;
    }
    case 's': { Ref v = pop(), k = pop(); set_items(top(), {k, v}); break; }  // SETITEM
    case 'u': { std::vector<Ref> kv = pop_mark(); set_items(top(), kv); break; }  // SETITEMS
    case 'Q': { Ref pid = pop(); push(persistent_load(pid)); break; }  // BINPERSID
    case 'R': { Ref args = pop(), callable = pop(); push(reduce(callable, args)); break; }  // REDUCE
    case 'b': {                                                   // BUILD: only an OrderedDict's metadata
      Ref state = pop();
      if (top()->k != Obj::K::Dict || (state->k != Obj::K::Dict && state->k != Obj::K::None))
        fail("BUILD on something other than a dict's metadata");
      break;
    }
    default: refuse(op);
  }
}

// LONG1: a length byte, then that many little-endian two's-complement bytes.
void Unpickler::push_long1() {
  const uint64_t n = le(1);
  if (n > 8) fail("an integer wider than 64 bits");
  uint64_t v = n ? le(int(n)) : 0;
  if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // sign-extend
  push_int(int64_t(v));
}

// BINFLOAT: an IEEE double, big-endian.
void Unpickler::push_binfloat() {
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v = v << 8 | byte();
  Ref r = make(Obj::K::Float);
  std::memcpy(&r->f, &v, 8);
  push(r);
}

void Unpickler::refuse(uint8_t op) const {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  fail(std::string("opcode ") + hex + " at byte " + std::to_string(pos_ - 1) +
       " is not one a state dict of tensors is pickled with: refused");
}

Ref Unpickler::persistent_load(const Ref& pid) {
  // ('storage', <storage class>, key, location, numel), and view metadata in the legacy format
  const auto& t = pid->items;
  const size_t n = legacy_ ? 6 : 5;
  if (pid->k != Obj::K::Tuple || t.size() != n || t[0]->k != Obj::K::Str || t[0]->s != "storage" ||
      t[1]->k != Obj::K::Global || t[2]->k != Obj::K::Str || t[4]->k != Obj::K::Int || t[4]->i < 0)
    fail(std::string("a persistent id that is not ('storage', type, key, location, numel") +
         (legacy_ ? ", view)" : ")"));
  // Storage views were last written by PyTorch before 1.0: torch.load of today still reads
  // them, but no file gpt-vk was tested with holds one.
  if (legacy_ && t[5]->k != Obj::K::None)
    fail("storage " + t[2]->s + " is a view of another (an early PyTorch's format): not supported; re-save the file");
  const StorageType* st = storage_type(t[1]->s);
  if (!st) fail("persistent id of '" + t[1]->s + "', not a storage class");
  // A legacy file's storage record is checked against one declaration; a zip's storages are
  // sized by their entries (PyTorch 2 may name one storage with two dtypes there).
  const StorageDecl decl{st->dtype, st->bytes, uint64_t(t[4]->i)};
  auto [it, fresh] = storages_.try_emplace(t[2]->s, decl);
  if (legacy_ && !fresh && (it->second.dtype != decl.dtype || it->second.numel != decl.numel))
    fail("storage " + t[2]->s + " is declared twice, differently");
  Ref r = make(Obj::K::Storage);
  r->tensor.storage_key = t[2]->s;
  r->tensor.dtype = st->dtype;
  r->tensor.element_bytes = st->bytes;
  r->tensor.storage_numel = uint64_t(t[4]->i);
  return r;
}

Ref Unpickler::reduce(const Ref& callable, const Ref& args) {
  if (callable->k != Obj::K::Global || args->k != Obj::K::Tuple) fail("REDUCE of something that is not a call");
  const auto& a = args->items;
  if (callable->s == "collections.OrderedDict") {
    if (!a.empty()) fail("OrderedDict called with arguments");
    return make(Obj::K::Dict);
  }
  if (callable->s == "torch._utils._rebuild_parameter") {
    if (a.size() != 3 || a[0]->k != Obj::K::Tensor) fail("_rebuild_parameter without a tensor");
    return a[0];
  }
  if (callable->s == "torch._utils._rebuild_tensor_v2") {
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (a.size() < 6 || a.size() > 7 || a[0]->k != Obj::K::Storage || a[1]->k != Obj::K::Int || a[1]->i < 0 ||
        a[2]->k != Obj::K::Tuple || a[3]->k != Obj::K::Tuple || a[2]->items.size() != a[3]->items.size())
      fail("_rebuild_tensor_v2 with arguments that do not describe a tensor");
    // Before the shape is copied: one memoized tuple of a million dimensions, shared by
    // every tensor, would be copied for each of them.
    if (a[2]->items.size() > kMaxRank)
      fail("a tensor of rank " + std::to_string(a[2]->items.size()) + " (more than " + std::to_string(kMaxRank) + ")");
    Ref r = make(Obj::K::Tensor);
    r->tensor = a[0]->tensor;
    r->tensor.offset = uint64_t(a[1]->i);
    for (size_t d = 0; d < a[2]->items.size(); ++d) {
      const Ref& n = a[2]->items[d];
      const Ref& s = a[3]->items[d];
      if (n->k != Obj::K::Int || s->k != Obj::K::Int || n->i < 0 || s->i < 0) fail("a tensor with a bad size or stride");
      r->tensor.size.push_back(uint64_t(n->i));
      r->tensor.stride.push_back(uint64_t(s->i));
    }
    return r;
  }
  fail("REDUCE of '" + callable->s + "' is not allowed");  // a storage class called directly
}

// name -> tensor pairs of a dict (other values ignored). A pickle can list one memoized
// name and tensor a million times (2 bytes each), so the names copied here are held to a
// budget far above any model's (GPT-2 XL's: 25 KB) before they are copied.
std::vector<std::pair<std::string, TorchTensorRef>> tensors_of(const Unpickler& unpickler, const Ref& dict) {
  constexpr size_t kMaxName = 1024, kMaxNamesBytes = size_t(16) << 20;
  std::vector<std::pair<std::string, TorchTensorRef>> out;
  size_t names_bytes = 0;
  for (size_t i = 0; i + 1 < dict->items.size(); i += 2) {
    if (dict->items[i]->k != Obj::K::Str || dict->items[i + 1]->k != Obj::K::Tensor) continue;
    const std::string& name = dict->items[i]->s;
    if (name.size() > kMaxName)
      unpickler.fail("a tensor name of " + std::to_string(name.size()) + " bytes (more than " +
                     std::to_string(kMaxName) + "): " + excerpt(name));
    if ((names_bytes += name.size()) > kMaxNamesBytes)
      unpickler.fail("tensor names of more than " + std::to_string(kMaxNamesBytes >> 20) +
                     " MiB in all: not a state dict");
    out.emplace_back(name, dict->items[i + 1]->tensor);
  }
  return out;
}

// The state dict in the object a torch.save file holds; `unpickler` made it and names the
// pickle in errors.
std::vector<std::pair<std::string, TorchTensorRef>> state_dict_of(const Unpickler& unpickler, const Ref& root) {
  if (root->k != Obj::K::Dict) unpickler.fail("does not hold a dict of tensors (a state dict)");
  // A training checkpoint wraps the state dict ({"model": {...}, "optimizer": ..., "iter_num":
  // ...}, as nanoGPT's ckpt.pt) and may hold tensors of its own beside it (a 0-dim loss); a
  // state dict's values are tensors, never dicts, so a dict under one of these keys wins.
  std::vector<std::pair<std::string, TorchTensorRef>> out;
  for (const char* key : {"state_dict", "model_state_dict", "model", "module"})
    for (size_t i = 0; out.empty() && i + 1 < root->items.size(); i += 2)
      if (root->items[i]->k == Obj::K::Str && root->items[i]->s == key && root->items[i + 1]->k == Obj::K::Dict)
        out = tensors_of(unpickler, root->items[i + 1]);
  if (out.empty()) out = tensors_of(unpickler, root);
  if (out.empty()) unpickler.fail("holds no tensors");
  // The wrappers' prefixes on every name: torch.compile's "_orig_mod." (nanoGPT saves its
  // compiled model so) and DistributedDataParallel's "module.", nested in either order
  // (compiling a DDP model gives "_orig_mod.module.", wrapping a compiled one the reverse).
  auto every_name_has = [&](const std::string& prefix) {
    return std::all_of(out.begin(), out.end(), [&](const auto& t) { return t.first.starts_with(prefix); });
  };
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const std::string prefix : {"module.", "_orig_mod."})
      if (every_name_has(prefix)) {
        for (auto& t : out) t.first.erase(0, prefix.size());
        stripped = true;
      }
  }
  return out;
}

// The magic number the legacy format pickles first, as LONG1 of 10 bytes: 0x1950a86a20f9469cfc6c.
constexpr uint8_t kLegacyMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

// The byte after the magic-number pickle that opens `b` (PROTO, a FRAME at protocol 4 and
// later, the LONG1, STOP), or 0 when `b` does not open with one.
uint64_t magic_pickle_end(std::span<const std::byte> b) {
  auto at = [&](uint64_t i) { return i < b.size() ? std::to_integer<unsigned>(b[i]) : 0x100u; };
  if (at(0) != 0x80 || at(1) < 2 || at(1) > 5) return 0;
  uint64_t i = at(2) == 0x95 ? 11 : 2;
  for (uint8_t m : kLegacyMagic)
    if (at(i++) != m) return 0;
  return at(i) == '.' ? i + 1 : 0;
}

std::string pickle_label(const char* what, uint64_t at) {
  return std::string(what) + " (the pickle at byte " + std::to_string(at) + ")";
}

// The storage keys the legacy format lists after the object, in the order their data follows.
std::vector<std::string> storage_keys(const Unpickler& u, const Ref& list) {
  if (list->k != Obj::K::List) u.fail("not a list");
  std::vector<std::string> keys;
  for (const Ref& k : list->items) {
    if (k->k != Obj::K::Str) u.fail("a storage key that is not a string");
    keys.push_back(k->s);
  }
  return keys;
}

// Each listed storage's elements: an int64 element count that must be the pickle's, then the
// elements, one storage after another.
std::map<std::string, std::span<const std::byte>> storage_bytes(const std::string& path, std::span<const std::byte> b,
                                                                uint64_t pos, const std::vector<std::string>& keys,
                                                                const std::map<std::string, StorageDecl>& decls) {
  std::map<std::string, std::span<const std::byte>> out;
  for (const std::string& key : keys) {
    const std::string where = path + ": storage " + key;
    auto d = decls.find(key);
    if (d == decls.end()) throw InputError(where + " is listed, but no tensor names it");
    if (b.size() - pos < 8) throw InputError(where + ": its element count runs past the end of the file: truncated");
    uint64_t numel = 0;
    for (int i = 7; i >= 0; --i) numel = numel << 8 | std::to_integer<uint64_t>(b[pos + uint64_t(i)]);
    pos += 8;
    if (numel != d->second.numel)
      throw InputError(where + " holds " + std::to_string(numel) + " elements by its record, " +
                       std::to_string(d->second.numel) + " by the pickle");
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, d->second.element_bytes, &bytes) || bytes > b.size() - pos)
      throw InputError(where + ": its " + std::to_string(numel) + " elements run past the end of the file: truncated");
    if (!out.emplace(key, b.subspan(pos, bytes)).second) throw InputError(where + " is listed twice");
    pos += bytes;
  }
  return out;
}

}  // namespace

bool is_legacy_torch(std::span<const std::byte> start) { return magic_pickle_end(start) != 0; }

LegacyTorchFile read_legacy_torch(const std::string& path, std::span<const std::byte> file) {
  uint64_t pos = magic_pickle_end(file);
  if (pos == 0) throw InputError(path + ": not a legacy torch.save file (no magic number)");
  {
    Unpickler u(path, pickle_label("protocol version", pos), file, pos);
    Ref v = u.run();
    if (v->k != Obj::K::Int || v->i != 1001) u.fail("not 1001, the only version torch.save writes");
    pos = u.end();
  }
  {
    Unpickler u(path, pickle_label("system info", pos), file, pos);
    Ref info = u.run();
    if (info->k != Obj::K::Dict) u.fail("not a dict");
    for (size_t i = 0; i + 1 < info->items.size(); i += 2)
      if (info->items[i]->k == Obj::K::Str && info->items[i]->s == "little_endian" &&
          (info->items[i + 1]->k != Obj::K::Bool || info->items[i + 1]->i != 1))
        u.fail("written on a big-endian machine: not supported");
    pos = u.end();
  }
  LegacyTorchFile out;
  std::map<std::string, StorageDecl> decls;
  {
    Unpickler u(path, pickle_label("object", pos), file, pos, true);
    out.tensors = state_dict_of(u, u.run());
    decls = u.storages();
    pos = u.end();
  }
  Unpickler u(path, pickle_label("storage keys", pos), file, pos);
  const std::vector<std::string> keys = storage_keys(u, u.run());
  out.storages = storage_bytes(path, file, u.end(), keys, decls);
  return out;
}

std::vector<std::pair<std::string, TorchTensorRef>> read_state_dict_pickle(const std::string& path,
                                                                           std::span<const std::byte> pickle) {
  Unpickler unpickler(path, "data.pkl", pickle);
  return state_dict_of(unpickler, unpickler.run());
}

}  // namespace gptvk
