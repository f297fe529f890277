// The server's agents (server/agent_registry.h): ids, busy marks, TTLs and the text budget.
#include "server/agent_registry.h"

#include <chrono>
#include <random>

#include "server/error_status.h"

namespace agentkv {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

size_t agent_text_bytes(const Agent& a) {
  size_t n = a.last_answer.size();
  for (const ChatMessage& m : a.messages) {
    n += m.content.size();
    for (const ChatToolCall& c : m.tool_calls) n += c.arguments.size();
  }
  for (const std::string& s : a.segments) n += s.size();
  return n;
}

std::optional<ApiError> AgentRegistry::over_text_budget(size_t bytes) const {
  if (bytes <= max_text_bytes_) return std::nullopt;
  return api_error(ErrorCode::kLimitReached, "the server's agents would hold " + std::to_string(bytes) +
                                                 " bytes of text, over its budget of " + std::to_string(max_text_bytes_) +
                                                 " bytes; delete some agents",
                   "messages");
}

std::optional<ApiError> AgentRegistry::add(Agent* a) {
  static const uint64_t salt = std::random_device{}();
  std::lock_guard<std::mutex> lock(mu_);
  if (agents_.size() >= max_agents_)
    return api_error(ErrorCode::kLimitReached,
                     "the server holds its maximum of " + std::to_string(max_agents_) + " agents; delete some");
  const size_t bytes = agent_text_bytes(*a);
  if (auto e = over_text_budget(text_bytes_ + bytes)) return e;
  text_bytes_ += bytes;
  char id[48];
  std::snprintf(id, sizeof id, "agent-%08llx%06llx", (unsigned long long)(salt & 0xffffffffULL),
                (unsigned long long)++counter_);
  a->id = id;
  if (a->name.empty()) a->name = a->id;
  a->busy = false;
  agents_[a->id] = *a;
  return std::nullopt;
}

std::optional<ApiError> AgentRegistry::acquire(const std::vector<std::string>& ids, std::vector<Agent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& id : ids) {
    auto it = agents_.find(id);
    if (it == agents_.end()) return api_error(ErrorCode::kNotFound, "agent '" + excerpt(id) + "' does not exist (deleted or expired?)", "agent");
    if (it->second.busy) return api_error(ErrorCode::kConflict, "agent '" + excerpt(id) + "' is busy with another request", "agent");
  }
  out->clear();
  for (const std::string& id : ids) {
    Agent& a = agents_.at(id);
    a.busy = true;
    out->push_back(a);
  }
  return std::nullopt;
}

void AgentRegistry::finish(const Agent& a) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(a.id);
  if (it == agents_.end()) return;
  text_bytes_ = text_bytes_ - agent_text_bytes(it->second) + agent_text_bytes(a);
  it->second = a;
  it->second.busy = false;
}

std::optional<ApiError> AgentRegistry::finish_grown(const Agent& a) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(a.id);
  if (it == agents_.end()) return std::nullopt;
  const size_t total = text_bytes_ - agent_text_bytes(it->second) + agent_text_bytes(a);
  auto e = over_text_budget(total);
  if (!e) {
    text_bytes_ = total;
    it->second = a;
  }
  it->second.busy = false;
  return e;
}

void AgentRegistry::abandon(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(id);
  if (it != agents_.end()) it->second.busy = false;
}

std::optional<ApiError> AgentRegistry::remove(const std::string& id, Agent* removed) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(id);
  if (it == agents_.end()) return api_error(ErrorCode::kNotFound, "agent '" + excerpt(id) + "' does not exist (deleted or expired?)", "agent");
  if (it->second.busy) return api_error(ErrorCode::kConflict, "agent '" + excerpt(id) + "' is busy with another request", "agent");
  text_bytes_ -= agent_text_bytes(it->second);
  *removed = std::move(it->second);
  agents_.erase(it);
  return std::nullopt;
}

std::vector<Agent> AgentRegistry::take_expired(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Agent> out;
  for (auto it = agents_.begin(); it != agents_.end();) {
    if (!it->second.busy && it->second.expires_at <= now) {
      text_bytes_ -= agent_text_bytes(it->second);
      out.push_back(std::move(it->second));
      it = agents_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<Agent> AgentRegistry::take_all() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Agent> out;
  for (auto& [id, a] : agents_) out.push_back(std::move(a));
  agents_.clear();
  text_bytes_ = 0;
  return out;
}

std::optional<Agent> AgentRegistry::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(id);
  if (it == agents_.end()) return std::nullopt;
  return it->second;
}

std::vector<Agent> AgentRegistry::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Agent> out;
  for (const auto& [id, a] : agents_) out.push_back(a);
  return out;
}

size_t AgentRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return agents_.size();
}

size_t AgentRegistry::count_on_model(size_t model) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, a] : agents_) n += a.model == model;
  return n;
}

size_t AgentRegistry::text_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return text_bytes_;
}

}  // namespace agentkv
