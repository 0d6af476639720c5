#include "server/http_strict.hpp"

#include <strings.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace gptvk::server {

namespace {

// RFC 9110 §5.6.2: the characters of a token (a field name).
bool is_tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

bool same_name(std::string_view a, const char* b) {
  return a.size() == std::strlen(b) && ::strncasecmp(a.data(), b, a.size()) == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The lines of `text` split at each CRLF (the last one without a line end).
std::vector<std::string_view> crlf_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t start = 0;;) {
    const size_t end = text.find("\r\n", start);
    lines.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return lines;
    start = end + 2;
  }
}

// A header line's problem, if any; counts its Host and Transfer-Encoding fields.
std::optional<std::string> field_problem(std::string_view line, int& hosts, bool& transfer_encoding) {
  if (line[0] == ' ' || line[0] == '\t') return "a folded header line (one starting with whitespace)";
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "a header line without a colon";
  const std::string_view name = line.substr(0, colon);
  for (unsigned char c : name)
    if (!is_tchar(c)) return "a header name that is not a token (nothing may stand between the name and its colon)";
  if (name.empty()) return "a header line without a name";
  for (unsigned char c : line.substr(colon + 1))
    if (is_control(c)) return "a control character in the value of header " + std::string(name);
  hosts += same_name(name, "Host");
  transfer_encoding = transfer_encoding || same_name(name, "Transfer-Encoding");
  return std::nullopt;
}

}  // namespace

// The methods a route or httplib answers (405 for those no route takes).
constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};

std::optional<UnsupportedRequest> unsupported_request_line(std::string_view head) {
  const size_t end = head.find("\r\n");
  if (end == std::string_view::npos) return std::nullopt;  // not all in: the limits answer
  // METHOD SP TARGET SP HTTP/VERSION; a line of another shape is malformed (httplib's 400).
  const std::string_view line = head.substr(0, end);
  const size_t first = line.find(' '), last = line.rfind(' ');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  const std::string_view method = line.substr(0, first), version = line.substr(last + 1);
  if (!version.starts_with("HTTP/")) return std::nullopt;
  if (std::ranges::none_of(kMethods, [&](std::string_view m) { return m == method; }))
    return UnsupportedRequest{501, "the method '" + std::string(method.substr(0, 32)) + "' is not one this server answers"};
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return UnsupportedRequest{505, "HTTP version '" + std::string(version.substr(0, 32)) +
                                       "': this server speaks HTTP/1.0 and HTTP/1.1"};
  return std::nullopt;
}

std::optional<std::string> head_problem(std::string_view head) {
  // The head ends at its first empty line, LF alone taken as a line end too (so that such a
  // head is refused rather than waited for): "\n\r\n" (which "\r\n\r\n" holds) or "\n\n".
  const size_t empty_crlf = head.find("\n\r\n"), empty_lf = head.find("\n\n");
  if (empty_crlf == std::string_view::npos && empty_lf == std::string_view::npos) return std::nullopt;  // not all in
  const std::string_view h = head.substr(0, std::min(empty_crlf == std::string_view::npos ? head.size() : empty_crlf + 3,
                                                     empty_lf == std::string_view::npos ? head.size() : empty_lf + 2));
  for (size_t i = 0; i < h.size(); ++i)
    if (h[i] == '\n' && (i == 0 || h[i - 1] != '\r')) return "a line of the request head ends in LF alone, not CRLF";
  const std::vector<std::string_view> lines = crlf_lines(h.substr(0, h.size() - 4));  // less the final CRLF CRLF
  const std::string_view request_line = lines.front();
  const std::string_view version = request_line.substr(request_line.rfind(' ') + 1);
  int hosts = 0;
  bool transfer_encoding = false;
  for (size_t i = 1; i < lines.size(); ++i)
    if (auto why = field_problem(lines[i], hosts, transfer_encoding)) return why;
  if (version == "HTTP/1.1" && hosts != 1)
    return hosts == 0 ? "an HTTP/1.1 request without a Host header" : "a request with more than one Host header";
  if (version == "HTTP/1.0" && transfer_encoding) return "Transfer-Encoding on an HTTP/1.0 request";
  return std::nullopt;
}

std::optional<std::string> ChunkedBodyCheck::fail(std::string why) {
  state_ = State::Bad;
  return "malformed chunked body: " + why;
}

std::optional<std::string> ChunkedBodyCheck::feed(const char* bytes, size_t n) {
  if (state_ == State::Bad) return "malformed chunked body";
  for (size_t i = 0; i < n; ++i) {
    const char c = bytes[i];
    switch (state_) {
      case State::SizeStart:
      case State::Size:
        if (hex_value(c) >= 0) {
          // Leading zeros are allowed, any number of them (the body's size limit holds).
          if ((size_ != 0 || c != '0') && ++digits_ > 15) return fail("a chunk size of more than 15 hex digits");
          size_ = size_ * 16 + static_cast<uint64_t>(hex_value(c));
          state_ = State::Size;
        } else if (state_ == State::SizeStart) {
          return fail("a chunk size must start with a hex digit");
        } else if (c == ';') {
          state_ = State::Extension;
        } else if (c == '\r') {
          state_ = State::SizeLf;
        } else {
          return fail("a chunk size line holds more than hex digits and a ';' extension");
        }
        break;
      case State::Extension:
        if (c == '\r') state_ = State::SizeLf;
        else if (is_control(static_cast<unsigned char>(c))) return fail("a control character in a chunk extension");
        break;
      case State::SizeLf:
        if (c != '\n') return fail("a chunk size line must end in CRLF");
        left_ = size_;
        state_ = size_ == 0 ? State::LastCr : State::Data;
        break;
      case State::Data: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(left_, n - i));
        left_ -= take;
        i += take - 1;
        if (left_ == 0) state_ = State::DataCr;
        break;
      }
      case State::DataCr:
      case State::DataLf:
        if (c != (state_ == State::DataCr ? '\r' : '\n')) return fail("chunk data must be followed by CRLF");
        if (state_ == State::DataLf) size_ = 0, digits_ = 0;
        state_ = state_ == State::DataCr ? State::DataLf : State::SizeStart;
        break;
      case State::LastCr:
        if (c == '\n') return fail("the last chunk must be followed by CRLF");
        if (c != '\r') return fail("trailer fields after the last chunk are not supported");
        state_ = State::LastLf;
        break;
      case State::LastLf:
        if (c != '\n') return fail("the last chunk must be followed by CRLF");
        state_ = State::Done;
        break;
      case State::Done: return fail("bytes past the end of the body");
      case State::Bad: return "malformed chunked body";
    }
  }
  return std::nullopt;
}

}  // namespace gptvk::server
