// The served state's look-ups and the replies every route file shares (server/server_state.h).
#include "server/server_state.h"

#include <chrono>

#include "server/error_status.h"

namespace agentkv {

int ServerState::find_model(const std::string& name) const {
  for (size_t i = 0; i < models.size(); ++i)
    if (models[i].id == name || models[i].lm->name == name || models[i].lm->path == name) return int(i);
  return -1;
}

const ServedTransferMap* ServerState::find_transfer_map(size_t sender, size_t receiver) const {
  for (const ServedTransferMap& t : transfer_maps)
    if (t.sender == sender && t.receiver == receiver) return &t;
  return nullptr;
}

AgentView ServerState::view(const Agent& a) const {
  AgentView v;
  v.id = a.id;
  v.name = a.name;
  v.model = models[a.model].id;
  v.created = a.created;
  v.expires_at = a.expires_at;
  v.n_messages = a.messages.size();
  v.resident_tokens = a.kv_tokens;
  v.busy = a.busy;
  return v;
}

void reply(HttpResponseWriter& w, const ApiError& e) {
  if (e.retry_after_s > 0)
    w.respond(e.status, "application/json", error_json(e), {{"Retry-After", std::to_string(e.retry_after_s)}});
  else
    w.respond(e.status, "application/json", error_json(e));
}

std::optional<Json> parse_body(const HttpRequest& req, HttpResponseWriter& w, bool empty_ok) {
  if (empty_ok && req.body.empty()) return Json::object();
  auto body = parse_json(req.body, 32);
  if (!body.ok()) {
    reply(w, ApiError{400, "malformed JSON body: " + body.error(), ""});
    return std::nullopt;
  }
  return std::move(body).value();
}

ApiError unknown_model(const std::string& name) {
  return api_error(ErrorCode::kNotFound, "model '" + excerpt(name) + "' does not exist (GET /v1/models lists them)", "model");
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace agentkv
