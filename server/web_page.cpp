#include "server/web_page.hpp"

#include <httplib.h>

extern const unsigned char gptvk_web_index_html[];
extern const unsigned long gptvk_web_index_html_size;
extern const unsigned char gptvk_web_app_js[];
extern const unsigned long gptvk_web_app_js_size;

namespace gptvk::server {

namespace {

// No inline script, no other host: model output that reached the page as markup could run
// nothing and send nothing elsewhere.
constexpr const char* kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace

void send_web_file(const std::string& path, httplib::Response& res) {
  const bool page = path == "/";
  const auto* bytes = reinterpret_cast<const char*>(page ? gptvk_web_index_html : gptvk_web_app_js);
  const size_t size = page ? gptvk_web_index_html_size : gptvk_web_app_js_size;
  res.set_content(bytes, size, page ? "text/html; charset=utf-8" : "text/javascript; charset=utf-8");
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");  // a new build's page, not a cached one
}

}  // namespace gptvk::server
