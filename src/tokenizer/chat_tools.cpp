// The generic tool format (tokenizer/chat_tools.h).
#include "tokenizer/chat_tools.h"

#include "util/json.h"

namespace agentkv {

std::string tool_call_text(const ChatToolCall& call) {
  // Arguments are written as the client sent them; empty arguments are an empty object.
  return std::string(kToolCallOpen) + call.name + std::string(kToolCallArguments) +
         (call.arguments.empty() ? std::string("{}") : call.arguments) + std::string(kToolCallClose);
}

Json tool_definition_json(const ChatToolDef& t) {
  Json fn = Json::object();
  fn["name"] = t.name;
  if (!t.description.empty()) fn["description"] = t.description;
  auto params = parse_json(t.parameters_json.empty() ? std::string_view("{}") : std::string_view(t.parameters_json));
  fn["parameters"] = params.ok() ? std::move(*params) : Json(t.parameters_json);
  return Json{{"type", "function"}, {"function", std::move(fn)}};
}

std::string python_arguments(const std::string& arguments) {
  if (arguments.empty()) return "{}";
  auto j = parse_json(arguments);
  return j.ok() ? dump_json_python(*j) : arguments;
}

namespace {

// Qwen2 / 2.5 / 3 templates' tool section (their tokenizer_config.json chat_template), tools as their
// `tojson` writes them.
std::string qwen_tool_prompt(std::span<const ChatToolDef> tools) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
      "function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ChatToolDef& t : tools) out += "\n" + dump_json_python(tool_definition_json(t));
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call>";
  return out;
}

}  // namespace

std::string tool_prompt(std::span<const ChatToolDef> tools, ToolStyle style) {
  if (style == ToolStyle::kQwen) return qwen_tool_prompt(tools);
  std::string out =
      "# Tools\n\nYou can call functions to help with the user's request. They are listed here, one JSON object a "
      "line:\n<tools>\n";
  for (const ChatToolDef& t : tools) {
    out += "{\"type\": \"function\", \"function\": {\"name\": " + dump_json(Json(t.name));
    if (!t.description.empty()) out += ", \"description\": " + dump_json(Json(t.description));
    out += ", \"parameters\": " + (t.parameters_json.empty() ? std::string("{}") : t.parameters_json) + "}}\n";
  }
  out +=
      "</tools>\n\nTo call a function, answer with one block like this per call, and nothing else:\n<tool_call>\n"
      "{\"name\": \"<function name>\", \"arguments\": <the arguments as a JSON object>}\n</tool_call>\n"
      "The results come back as <tool_response> blocks.";
  return out;
}

bool needs_tool_lowering(std::span<const ChatMessage> messages, std::span<const ChatToolDef> tools) {
  if (!tools.empty()) return true;
  for (const ChatMessage& m : messages)
    if (m.role == "tool" || !m.tool_calls.empty()) return true;
  return false;
}

std::vector<ChatMessage> lower_tool_messages(std::span<const ChatMessage> messages, std::span<const ChatToolDef> tools,
                                             const std::string& default_system, ToolStyle style) {
  std::vector<ChatMessage> out;
  const std::string prompt = tools.empty() ? std::string() : tool_prompt(tools, style);
  if (!prompt.empty() && (messages.empty() || messages[0].role != "system"))
    out.push_back(ChatMessage{"system", default_system.empty() ? prompt : default_system + "\n\n" + prompt});
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (i > 0 && messages[i - 1].role == "tool") out.back().content += "\n" + block;
      else out.push_back(ChatMessage{"user", std::move(block)});
      continue;
    }
    ChatMessage plain{m.role, m.content};
    if (i == 0 && m.role == "system" && !prompt.empty()) plain.content += (plain.content.empty() ? "" : "\n\n") + prompt;
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (!plain.content.empty() || k > 0) plain.content += k > 0 ? std::string(kToolCallSeparator) : std::string("\n");
      ChatToolCall call = m.tool_calls[k];
      if (style == ToolStyle::kQwen) call.arguments = python_arguments(call.arguments);
      plain.content += tool_call_text(call);
    }
    out.push_back(std::move(plain));
  }
  return out;
}

}  // namespace agentkv
