// RFC 9112 framing that cpp-httplib 0.11 (Debian 12) accepts too leniently, checked on the
// bytes before httplib parses them. A request whose head or chunked body is not framed
// exactly as the RFC says is refused (400) and its connection closed: read leniently, the
// end of one request is uncertain, and a second request could hide inside the first's body
// ("request smuggling" past a proxy that reads the framing differently).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gptvk::server {

// What is wrong with a request's head (its request line and header lines, through the
// empty line that ends them), if anything: a line ending in a bare LF, a header line
// without a colon, a field name that is not a token (as "Content-Length :" is), an
// obsolete folded line, a control character in a field value, an HTTP/1.1 request without
// exactly one Host, or Transfer-Encoding on an HTTP/1.0 request. `head` may run on into
// the body; nothing past the empty line is looked at.
std::optional<std::string> head_problem(std::string_view head);

// A request line this server cannot answer however it is framed, which httplib would refuse
// as a plain 400: a method it does not know (501) or an HTTP version other than 1.0 and 1.1
// (505), with the reason; nullopt also while the line has not all arrived.
struct UnsupportedRequest {
  int status;
  std::string why;
};
std::optional<UnsupportedRequest> unsupported_request_line(std::string_view head);

// The framing of a chunked body, fed its bytes in order as they are read: each chunk a
// size in hex digits (an extension after ';' is allowed), CRLF, the data, CRLF; the last a
// size of 0 and CRLF, then the final CRLF (no trailer fields). Bytes after the end are not
// part of the body and must not be fed.
class ChunkedBodyCheck {
 public:
  // The first framing error, once and for all, or nullopt while the bytes are well framed.
  std::optional<std::string> feed(const char* bytes, size_t n);
  // Whether the body has ended (its final CRLF fed).
  bool done() const { return state_ == State::Done; }

 private:
  enum class State { SizeStart, Size, Extension, SizeLf, Data, DataCr, DataLf, LastCr, LastLf, Done, Bad };
  std::optional<std::string> fail(std::string why);

  State state_ = State::SizeStart;
  uint64_t size_ = 0, left_ = 0;
  int digits_ = 0;  // significant digits of the size so far
};

}  // namespace gptvk::server
