// The page `gpt-vk serve` answers GET / with (server/web/: a completion and chat box over
// the server's own routes), embedded in the binary at build time.
#pragma once
#include <string>

namespace httplib {
struct Response;
}

namespace gptvk::server {

// The paths the page's files are served at.
inline constexpr const char* kWebPagePaths[] = {"/", "/app.js"};

inline bool is_web_page_path(const std::string& path) { return path == kWebPagePaths[0] || path == kWebPagePaths[1]; }

// Answers GET `path` (one of kWebPagePaths) with its file, and a Content-Security-Policy
// that lets the page run only the server's own script and talk only to the server.
void send_web_file(const std::string& path, httplib::Response& res);

}  // namespace gptvk::server
