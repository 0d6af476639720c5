// Cross-origin requests from web pages (the Fetch standard's CORS protocol). A browser lets
// a page read an answer from another origin only when the answer names that origin in
// Access-Control-Allow-Origin, and before a request that carries an Authorization header or
// a JSON body it asks first, with a preflight: OPTIONS with Access-Control-Request-Method.
// The allowed origins come from `serve --cors-origin`; with none, no answer names an origin
// and a preflight is refused as any OPTIONS is (405), so pages of other origins can send
// the server requests but never read its answers.
#pragma once
#include <string>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace gptvk::server {

// Why `origin` cannot be a --cors-origin value, or "" when it can: "*" (every origin), or
// an origin as browsers send it, scheme://host[:port] with no path and no trailing slash.
std::string cors_origin_problem(const std::string& origin);

class CorsPolicy {
 public:
  explicit CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {}

  // Adds the CORS headers of an answer to `req` (of any status): Access-Control-Allow-Origin
  // when its Origin is allowed, and Vary: Origin whenever origins are configured.
  void add_headers(const httplib::Request& req, httplib::Response& res) const;

  // Answers `req` if it is a preflight from an allowed origin for a route that takes
  // `route_method` (nullptr: no such route): 204 with the methods, the request headers it
  // asked for, and how long a browser may keep the answer. Returns whether it did.
  bool answer_preflight(const httplib::Request& req, const char* route_method, httplib::Response& res) const;

 private:
  bool allows(const std::string& origin) const;
  std::vector<std::string> origins_;
};

}  // namespace gptvk::server
