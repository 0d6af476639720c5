#include "models/tokenizer/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>
#include <string>

namespace gptvk::tokenizer {

namespace {

// GPT-2's pattern with \s spelled as Python regex's White_Space set (see the header).
// Anchored at compile time: every character starts some alternative, so each match
// begins where the previous one ended, and the JIT supports compile-time anchoring.
#define GPTVK_WS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr const char* kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" GPTVK_WS "\\p{L}\\p{N}]+"
    "|[" GPTVK_WS "]+(?![^" GPTVK_WS "])|[" GPTVK_WS "]+";
#undef GPTVK_WS

}  // namespace

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  bool jit = false;

  Impl() {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::logic_error("tokenizer pattern does not compile: " + std::string(reinterpret_cast<char*>(msg)));
    }
    jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    match = pcre2_match_data_create_from_pattern(code, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    if (jit) {
      // Long runs of one class (a page of Chinese is one \p{L}+ piece) need more than the
      // default 32 KiB of JIT stack for the (?!\S) backtracking; 8 MiB covers megabytes.
      jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(mctx, nullptr, jit_stack);
    }
    if (!match || !mctx) throw std::bad_alloc();
  }
  ~Impl() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(mctx);
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

Pretokenizer::Pretokenizer() : impl_(std::make_unique<Impl>()) {}
Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

size_t Pretokenizer::match_at(std::string_view valid, size_t pos) {
  auto subject = reinterpret_cast<PCRE2_SPTR>(valid.data());
  // The caller has checked the UTF-8 (pcre2_jit_match skips that check by design).
  int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, valid.size(), pos, 0, impl_->match, impl_->mctx)
                      : pcre2_match(impl_->code, subject, valid.size(), pos, PCRE2_NO_UTF_CHECK, impl_->match,
                                    impl_->mctx);
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw std::runtime_error("tokenizer pattern failed at byte " + std::to_string(pos) + ": " +
                             reinterpret_cast<char*>(msg));
  }
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(impl_->match);
  if (ov[0] != pos || ov[1] <= pos) throw std::logic_error("tokenizer pattern matched nothing");
  return ov[1] - pos;
}

}  // namespace gptvk::tokenizer
