// Llama 3.x chat format (see tokenizer/chat_template.h), as Meta's templates write it: turns are
// <|start_header_id|>ROLE<|end_header_id|>\n\n CONTENT <|eot_id|> with content trimmed. The 3.1-3.3
// templates open with a system turn holding "Cutting Knowledge Date: ..." and "Today Date: ..." before
// the system message, "Environment: ipython" when tools are offered; tools go into the first user
// message (their default, tools_in_user_message) as indented JSON; a call is the assistant turn
// {"name": NAME, "parameters": ARGS} (one per message); a tool result is an "ipython" turn holding the
// result as a JSON string (the templates' `tojson` of a string).
#include <cstdio>
#include <ctime>

#include "tokenizer/chat_formats.h"
#include "tokenizer/chat_tools.h"

namespace agentkv::chat_formats {

namespace {

constexpr std::string_view kKnowledge = "Cutting Knowledge Date: ";

// The literal that follows `key` in the template, up to a \n escape, a newline or a quote.
std::string literal_after(const std::string& tmpl, std::string_view key, std::string fallback) {
  const size_t at = tmpl.find(key);
  if (at == std::string::npos) return fallback;
  std::string out;
  for (size_t i = at + key.size(); i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if (c == '\n' || c == '"' || c == '\'' || (c == '\\' && i + 1 < tmpl.size() && tmpl[i + 1] == 'n')) return out;
    out += c;
  }
  return fallback;
}

// "%d %b %Y" of today in UTC, in English (as the templates' strftime_now writes it in the C locale).
std::string today_utc() {
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02d %s %04d", tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900);
  return buf;
}

// The date a template writes: today's where it asks strftime_now (Llama 3.2), else its date_string.
std::string template_date(const std::string& tmpl, std::string_view date) {
  if (tmpl.find("strftime_now") != std::string::npos) return date.empty() ? today_utc() : std::string(date);
  const std::string key = "set date_string = \"";
  const size_t at = tmpl.find(key);
  if (at == std::string::npos) return "26 Jul 2024";
  const auto lit = template_literal(tmpl, at + key.size() - 1);
  return lit ? *lit : "26 Jul 2024";
}

}  // namespace

bool llama3_has_tool_format(const std::string& tmpl) {
  return tmpl.find("<|start_header_id|>ipython") != std::string::npos && tmpl.find(kKnowledge) != std::string::npos;
}

Result<RenderedChat> render_llama3(const std::string& tmpl, std::span<const ChatMessage> msgs, bool gen,
                                   std::span<const ChatToolDef> tools, std::string_view date) {
  RenderedChat r;
  auto header = [&r](std::string_view role) {
    r.text += "<|start_header_id|>";
    r.text += role;
    r.text += "<|end_header_id|>\n\n";
  };
  size_t first = 0;
  if (tmpl.find(kKnowledge) != std::string::npos) {
    std::string system;
    if (!msgs.empty() && msgs[0].role == "system") {
      system = trim(msgs[0].content);
      first = 1;
    }
    header("system");
    if (!tools.empty()) r.text += "Environment: ipython\n";
    r.text += std::string(kKnowledge) + literal_after(tmpl, kKnowledge, "December 2023") + "\n";
    r.text += "Today Date: " + template_date(tmpl, date) + "\n\n";
    put_content(r, system);
    r.text += "<|eot_id|>";
    if (!tools.empty()) {
      if (first == msgs.size())
        return make_error("chat template: Llama 3.x offers tools in the first user message, and there is none");
      std::string block =
          "Given the following functions, please respond with a JSON for a function call with its proper arguments "
          "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
          "dictionary of argument name and its value}.Do not use variables.\n\n";
      for (const ChatToolDef& t : tools) block += dump_json_python(tool_definition_json(t), 4) + "\n\n";
      block += trim(msgs[first].content);
      header("user");
      put_content(r, block);
      r.text += "<|eot_id|>";
      ++first;
    }
  }
  for (size_t i = first; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "tool" || m.role == "ipython") {
      header("ipython");
      put_content(r, dump_json_python(Json(m.content)));
    } else if (!m.tool_calls.empty()) {
      if (m.tool_calls.size() != 1)
        return make_error("chat template: Llama 3.x takes one tool call per assistant message, message " +
                          std::to_string(i) + " has " + std::to_string(m.tool_calls.size()));
      const ChatToolCall& c = m.tool_calls[0];
      header("assistant");
      put_content(r, "{\"name\": \"" + c.name + "\", \"parameters\": " + python_arguments(c.arguments) + "}");
    } else {
      header(m.role);
      put_content(r, trim(m.content));
    }
    r.text += "<|eot_id|>";
  }
  if (gen) header("assistant");
  return r;
}

}  // namespace agentkv::chat_formats
