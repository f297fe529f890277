// The HTTP/1.1 request as the server hands it to a handler, and small helpers shared by the parser,
// the server and (later) the API layer. Transport only: no routing, no OpenAI logic.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentkv {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // as sent (methods are case-sensitive)
  std::string target;   // request-target as sent
  std::string path;     // target up to '?' (absolute-form targets are reduced to their path)
  std::string query;    // after '?', without it; not percent-decoded
  int version_minor = 1;  // HTTP/1.<minor>: 0 or 1
  bool keep_alive = true;  // 1.1 unless "Connection: close"; 1.0 only with "Connection: keep-alive"
  HttpHeaders headers;  // names lowercased, values trimmed, in arrival order
  std::string body;

  // The first header with this name (case-insensitive), or nullptr.
  const std::string* header(std::string_view name) const;
};

// "OK", "Not Found", ...; "Unknown" for codes we never send.
const char* http_reason_phrase(int status);

// {"error":{"message":"...","type":"...","code":null}}: the OpenAI error shape, used for transport errors.
std::string http_error_json(std::string_view message, std::string_view type = "invalid_request_error");

// ASCII case-insensitive equality (header names, Connection and Transfer-Encoding tokens).
bool http_iequals(std::string_view a, std::string_view b);

}  // namespace agentkv
