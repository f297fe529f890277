// The grammar of a chat request's answer (server/structured_output.h).
#include "server/structured_output.h"

#include "engine/json_schema_grammar.h"
#include "tokenizer/chat_tools.h"

namespace agentkv {

namespace {

using Item = GrammarBuilder::Item;
using Seq = GrammarBuilder::Seq;

ApiError schema_error(const std::string& param, const std::string& message) { return ApiError{400, message, param}; }

// The rule of a value of the response format, or nullopt when it is text.
std::optional<ApiError> response_rule(GrammarBuilder& b, const ResponseFormat& rf, std::optional<uint32_t>* out) {
  switch (rf.kind) {
    case ResponseFormat::Kind::kText:
      return std::nullopt;
    case ResponseFormat::Kind::kJsonObject:
      *out = json_any_object_rule(b);
      return std::nullopt;
    case ResponseFormat::Kind::kJsonSchema: {
      if (rf.schema.is_null()) {
        *out = json_any_value_rule(b);
        return std::nullopt;
      }
      auto r = compile_json_schema(b, rf.schema, "response_format.json_schema.schema");
      if (!r.ok()) return schema_error("response_format.json_schema.schema", r.error());
      *out = *r;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// call ::= open NAME arguments ARGS close (the model's syntax), over the allowed tools.
std::optional<ApiError> call_rule(GrammarBuilder& b, const CompletionRequest& cr, const ToolCallSyntax& syntax,
                                  uint32_t* out) {
  std::vector<Seq> alternatives;
  for (size_t i = 0; i < cr.tools.size(); ++i) {
    const ToolSpec& t = cr.tools[i];
    if (cr.tool_choice == ToolChoice::kFunction && t.name != cr.tool_choice_name) continue;
    const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
    uint32_t args = 0;
    if (t.parameters.is_null()) {
      args = json_any_object_rule(b);
    } else {
      auto r = compile_json_schema(b, t.parameters, where);
      if (!r.ok()) return schema_error(where, r.error());
      args = *r;
    }
    Seq s;
    GrammarBuilder::append_literal(s, std::string(syntax.open) + t.name + std::string(syntax.arguments));
    s.push_back(GrammarBuilder::ref(args));
    GrammarBuilder::append_literal(s, syntax.close);
    alternatives.push_back(std::move(s));
  }
  const uint32_t one = b.rule("tool_call", std::move(alternatives));
  // After a call the answer may end, with or without a newline: a model writes "\n" after a block
  // out of habit, and if that newline could only start another call, the grammar would force one.
  // With parallel_tool_calls, the newline may also lead to the next call.
  if (syntax.separator.empty()) {  // one call, nothing after it (Llama 3.x)
    *out = one;
    return std::nullopt;
  }
  Seq next;
  GrammarBuilder::append_literal(next, syntax.separator);
  if (cr.parallel_tool_calls && syntax.parallel) {
    const uint32_t more = b.declare("more_calls");  // more ::= "\n" call more | "\n" | ε
    Seq again = next;
    again.push_back(GrammarBuilder::ref(one));
    again.push_back(GrammarBuilder::ref(more));
    b.add_alternative(more, std::move(again));
    b.add_alternative(more, next);
    b.add_alternative(more, {});
    *out = b.rule("tool_calls", {{GrammarBuilder::ref(one), GrammarBuilder::ref(more)}});
  } else {
    Seq with_newline{GrammarBuilder::ref(one)};
    with_newline.insert(with_newline.end(), next.begin(), next.end());
    *out = b.rule("tool_calls", {std::move(with_newline), {GrammarBuilder::ref(one)}});
  }
  return std::nullopt;
}

// An answer that does not start like a call: for each proper prefix P of the call's opening, P then
// a byte that does not continue it (then anything), or P and the end.
uint32_t not_a_call_rule(GrammarBuilder& b, const ToolCallSyntax& syntax) {
  const std::string_view open = syntax.open;
  std::vector<Seq> alternatives;
  for (size_t i = 0; i < open.size(); ++i) {
    Seq s;
    GrammarBuilder::append_literal(s, open.substr(0, i));
    alternatives.push_back(s);  // the answer ends inside the opening
    ByteSet other;
    other.set();
    other.reset(uint8_t(open[i]));
    s.push_back(GrammarBuilder::bytes(other));
    s.push_back(GrammarBuilder::any_rest());
    alternatives.push_back(std::move(s));
  }
  return b.rule("text", std::move(alternatives));
}

}  // namespace

bool calls_allowed(const CompletionRequest& cr) { return !cr.tools.empty() && cr.tool_choice != ToolChoice::kNone; }
bool text_allowed(const CompletionRequest& cr) { return !calls_allowed(cr) || cr.tool_choice == ToolChoice::kAuto; }

std::vector<ChatToolDef> offered_tools(const CompletionRequest& cr) {
  std::vector<ChatToolDef> out;
  if (!calls_allowed(cr)) return out;
  for (const ToolSpec& t : cr.tools)
    if (cr.tool_choice != ToolChoice::kFunction || t.name == cr.tool_choice_name)
      out.push_back(ChatToolDef{t.name, t.description, t.parameters.is_null() ? std::string() : dump_json(t.parameters)});
  return out;
}

std::optional<ApiError> output_grammar(const CompletionRequest& cr, const ToolCallSyntax& syntax,
                                       std::shared_ptr<const Grammar>* out) {
  out->reset();
  GrammarBuilder b;
  std::optional<uint32_t> value;
  if (auto e = response_rule(b, cr.response_format, &value)) return e;
  uint32_t root = 0;
  if (calls_allowed(cr)) {
    uint32_t calls = 0;
    if (auto e = call_rule(b, cr, syntax, &calls)) return e;
    root = calls;
    if (cr.tool_choice == ToolChoice::kAuto) {
      // The generic calls open with '<', which no JSON value does; a syntax whose calls are JSON objects
      // could not tell a call from the response format's value.
      if (value && syntax.open.starts_with('{'))
        return ApiError{400,
                        "this model's tool calls are JSON objects (Llama 3.x), so under tool_choice auto they cannot be "
                        "told apart from a JSON response_format; use tool_choice \"required\" or \"none\", or drop "
                        "response_format",
                        "response_format"};
      root = b.rule("answer",
                    {{GrammarBuilder::ref(calls)}, {GrammarBuilder::ref(value ? *value : not_a_call_rule(b, syntax))}});
    }
  } else if (value) {
    root = *value;
  } else {
    return std::nullopt;
  }
  auto g = b.build(root);
  if (!g.ok()) return ApiError{500, "the answer's grammar could not be built: " + g.error(), ""};
  *out = std::move(*g);
  return std::nullopt;
}

}  // namespace agentkv
