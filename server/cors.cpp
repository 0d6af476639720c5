#include "server/cors.hpp"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace gptvk::server {

namespace {

// A browser keeps a preflight's answer this long (Chromium caps it at 2 hours).
constexpr const char* kPreflightMaxAgeS = "600";

// Access-Control-Request-Headers as browsers send it: field names (tokens) separated by
// commas and spaces. Anything else is not echoed back.
bool is_header_name_list(const std::string& list) {
  return !list.empty() && std::all_of(list.begin(), list.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~, \t", c) != nullptr;
  });
}

}  // namespace

std::string cors_origin_problem(const std::string& origin) {
  if (origin == "*") return "";
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string::npos || (origin.compare(0, scheme_end, "http") != 0 && origin.compare(0, scheme_end, "https") != 0))
    return "an origin starts with http:// or https:// (or is * for every origin)";
  const std::string authority = origin.substr(scheme_end + 3);
  if (authority.empty()) return "an origin names a host after its scheme";
  if (authority.find_first_of("/?#") != std::string::npos)
    return "an origin is scheme://host[:port], with no path or trailing slash (browsers send it so)";
  if (std::any_of(authority.begin(), authority.end(), [](unsigned char c) { return c <= ' ' || c >= 0x7f; }))
    return "an origin holds no spaces or control characters";
  return "";
}

bool CorsPolicy::allows(const std::string& origin) const {
  return !origin.empty() && std::any_of(origins_.begin(), origins_.end(),
                                        [&](const std::string& o) { return o == "*" || o == origin; });
}

void CorsPolicy::add_headers(const httplib::Request& req, httplib::Response& res) const {
  if (origins_.empty()) return;
  const std::string origin = req.get_header_value("Origin");
  // The answer depends on the Origin asked with (a cache must not serve it to another).
  res.set_header("Vary", "Origin");
  if (!allows(origin)) return;
  const bool any = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
}

bool CorsPolicy::answer_preflight(const httplib::Request& req, const char* route_method, httplib::Response& res) const {
  if (req.method != "OPTIONS" || route_method == nullptr || !req.has_header("Access-Control-Request-Method") ||
      !allows(req.get_header_value("Origin")))
    return false;
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", std::string(route_method) + ", OPTIONS");
  // The headers the page will send (Authorization, Content-Type, a client library's own),
  // as it named them: a wildcard would not cover Authorization.
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  if (is_header_name_list(asked)) res.set_header("Access-Control-Allow-Headers", asked);
  res.set_header("Access-Control-Max-Age", kPreflightMaxAgeS);
  // A public page's request to a loopback or private address (Chromium's Private Network
  // Access) asks for this too.
  if (req.get_header_value("Access-Control-Request-Private-Network") == "true")
    res.set_header("Access-Control-Allow-Private-Network", "true");
  return true;
}

}  // namespace gptvk::server
