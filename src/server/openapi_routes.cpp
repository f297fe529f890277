// GET /openapi.json: the OpenAPI 3.1 document of every endpoint (docs/openapi.json, embedded into the
// binary at build time by CMakeLists.txt as agentkv::openapi_document()), so a client or a fuzzer
// reads the API of the very binary it talks to. It is served under the API key like every route but
// /health: the router authenticates before it gets here.
#include <string_view>

#include "server/error_status.h"
#include "server/routes.h"

namespace agentkv {

// Defined in the file CMake generates from docs/openapi.json.
std::string_view openapi_document();

void handle_openapi(const HttpRequest& req, HttpResponseWriter& w) {
  if (req.method != "GET") return reply(w, ApiError{405, "use GET /openapi.json", ""});
  w.respond(200, "application/json", openapi_document());
}

}  // namespace agentkv
