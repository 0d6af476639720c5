// How a request's body arrives, checked before it is read: cpp-httplib 0.11 (Debian 12)
// reads a chunked body whole, past its payload limit, and waits for the bytes of a
// Content-Length it will refuse. These checks answer at once instead.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "server/openai_request.hpp"

namespace httplib {
struct Request;
class ContentReader;
}  // namespace httplib

namespace gptvk::server {

// The framing's problem, if any: a body on a request other than POST (400), a POST with
// neither Content-Length nor Transfer-Encoding (411), a Transfer-Encoding other than
// chunked (501), Content-Length headers that disagree or are not a number (400), a
// Content-Length over `max_body` (413) when the body is not sent yet (Expect:
// 100-continue) or is too large to read and drop.
// A body over the limit but under that is read and dropped before the 413 (as httplib
// does), so that a client still sending it reads the answer instead of a reset.
std::optional<ApiError> framing_error(const httplib::Request& req, size_t max_body, bool body_not_sent);

// Whether a body follows the request's headers: a Transfer-Encoding, or a Content-Length
// other than 0 (or not a number).
bool body_follows(const httplib::Request& req);

// The body through httplib's content reader, refused (413) as soon as it passes `max_body`,
// chunked or not; a body that ends early or is malformed is a 400.
std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, size_t max_body);

// 413 with OpenAI's fields: the body is over `max_body`.
ApiError payload_too_large(size_t max_body);

// "Bearer KEY" with the scheme in any case (RFC 7235) and the key exact.
bool bearer_matches(const std::string& authorization, const std::string& key);

}  // namespace gptvk::server
