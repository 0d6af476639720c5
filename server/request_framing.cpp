#include "server/request_framing.hpp"

#include <httplib.h>
#include <strings.h>

namespace gptvk::server {

namespace {

// Bodies up to this size are read and dropped before a 413; a Content-Length above it is
// refused from the headers (it would hold a thread until the read timeout if it lied).
constexpr uint64_t kDroppedAtMost = 64ull << 20;

std::optional<ApiError> content_length_error(const httplib::Request& req, size_t max_body, bool body_not_sent) {
  const size_t count = req.get_header_value_count("Content-Length");
  if (count == 0) return std::nullopt;
  const std::string value = req.get_header_value("Content-Length");
  for (size_t i = 1; i < count; ++i)
    if (req.get_header_value("Content-Length", i) != value)
      return ApiError(400, "the request has Content-Length headers that disagree", "", "invalid_request");
  if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string::npos)
    return ApiError(400, "Content-Length '" + value + "' is not a byte count", "", "invalid_request");
  const uint64_t length = std::stoull(value);
  if (length > max_body && (body_not_sent || length > kDroppedAtMost)) return payload_too_large(max_body);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> framing_error(const httplib::Request& req, size_t max_body, bool body_not_sent) {
  // httplib reads no body for GET and the like: it would be read as the next request.
  if (req.method != "POST" && body_follows(req))
    return ApiError(400, req.method + " requests take no body here", "", "invalid_request");
  if (req.has_header("Transfer-Encoding")) {
    const std::string te = req.get_header_value("Transfer-Encoding");
    if (strcasecmp(te.c_str(), "chunked") != 0)
      return ApiError(501, "Transfer-Encoding '" + te + "' is not supported (send chunked or a Content-Length)", "",
                      "unsupported_transfer_encoding", "server_error");
    if (req.has_header("Content-Length"))
      return ApiError(400, "the request has both Transfer-Encoding and Content-Length", "", "invalid_request");
    return std::nullopt;
  }
  // Without either, httplib would read a POST's body until the client closes.
  if (req.method == "POST" && !req.has_header("Content-Length"))
    return ApiError(411, "a POST needs a Content-Length header or a chunked body", "", "length_required");
  return content_length_error(req, max_body, body_not_sent);
}

bool body_follows(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  const std::string length = req.get_header_value("Content-Length");
  return length.find_first_not_of('0') != std::string::npos;
}

std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, size_t max_body) {
  if (req.is_multipart_form_data())
    throw ApiError(415, "multipart bodies are not accepted: send JSON", "", "unsupported_media_type");
  std::string body;
  bool over = false;
  const bool complete = reader([&](const char* data, size_t n) {
    if (body.size() + n > max_body) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  // httplib drops a body whose Content-Length is over its limit (the same) without a byte.
  if (over || (!complete && req.get_header_value<uint64_t>("Content-Length") > max_body)) throw payload_too_large(max_body);
  if (!complete) throw ApiError(400, "the request body ended early or is malformed", "", "invalid_request");
  return body;
}

ApiError payload_too_large(size_t max_body) {
  return ApiError(413, "the request body is larger than " + std::to_string(max_body) + " bytes", "",
                  "payload_too_large");
}

bool bearer_matches(const std::string& authorization, const std::string& key) {
  const std::string scheme = "bearer ";
  return authorization.size() == scheme.size() + key.size() &&
         strncasecmp(authorization.c_str(), scheme.c_str(), scheme.size()) == 0 &&
         authorization.compare(scheme.size(), std::string::npos, key) == 0;
}

}  // namespace gptvk::server
