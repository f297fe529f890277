// The tool-call splitter (server/tool_call_stream.h).
#include "server/tool_call_stream.h"

#include "tokenizer/chat_tools.h"

namespace agentkv {

namespace {

// Appends to the last delta when it is the same kind of piece of the same call, so one push gives
// at most a few deltas.
void emit(std::vector<ToolCallStream::Delta>& out, ToolCallStream::Delta::Kind kind, int call, char c) {
  if (!out.empty() && out.back().kind == kind && out.back().call == call) {
    out.back().text += c;
    return;
  }
  ToolCallStream::Delta d;
  d.kind = kind;
  d.call = call;
  d.text = std::string(1, c);
  out.push_back(std::move(d));
}

}  // namespace

ToolCallStream::ToolCallStream(bool calls_allowed, bool text_allowed, std::string id_prefix,
                               const ToolCallSyntax& syntax)
    : text_allowed_(text_allowed || !calls_allowed), syntax_(syntax), id_prefix_(std::move(id_prefix)),
      state_(calls_allowed ? State::kStart : State::kText) {}

void ToolCallStream::to_text(std::vector<Delta>& out) {
  if (!text_allowed_) broken_ = true;  // the grammar should have made calls: keep the answer as text
  state_ = State::kText;
  for (char h : held_) emit(out, Delta::Kind::kText, -1, h);
  held_.clear();
}

void ToolCallStream::feed(char c, std::vector<Delta>& out) {
  raw_ += c;
  const int call = int(calls_.size()) - 1;
  // Matches c against the literal `lit` at lit_pos_; true when the literal is complete.
  auto literal = [&](std::string_view lit) {
    if (lit_pos_ >= lit.size() || lit[lit_pos_] != c) {
      broken_ = true;
      state_ = State::kText;
      return false;
    }
    if (++lit_pos_ < lit.size()) return false;
    lit_pos_ = 0;
    return true;
  };
  auto start_call = [&] {
    ChatToolCall tc;
    tc.id = id_prefix_ + "_" + std::to_string(calls_.size());
    calls_.push_back(std::move(tc));
    state_ = State::kName;
  };
  switch (state_) {
    case State::kText:
      emit(out, Delta::Kind::kText, -1, c);
      return;
    case State::kStart:
      held_ += c;
      if (syntax_.open[lit_pos_] != c) {
        lit_pos_ = 0;
        to_text(out);
        return;
      }
      if (++lit_pos_ == syntax_.open.size()) {
        lit_pos_ = 0;
        held_.clear();
        start_call();
      }
      return;
    case State::kName:
      if (c == syntax_.arguments[0]) {  // names are [A-Za-z0-9_-]: the first quote ends one
        Delta d;
        d.kind = Delta::Kind::kCallStart;
        d.call = call;
        d.text = calls_.back().name;
        d.id = calls_.back().id;
        out.push_back(std::move(d));
        lit_pos_ = 1;
        state_ = State::kArgsLead;
      } else {
        calls_.back().name += c;
      }
      return;
    case State::kArgsLead:
      if (literal(syntax_.arguments)) {
        state_ = State::kArgs;
        depth_ = 0;
        in_string_ = escaped_ = false;
      }
      return;
    case State::kArgs: {
      calls_.back().arguments += c;
      emit(out, Delta::Kind::kArguments, call, c);
      bool closed = false;
      if (in_string_) {
        if (escaped_) escaped_ = false;
        else if (c == '\\') escaped_ = true;
        else if (c == '"') in_string_ = false;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        closed = --depth_ == 0;
      }
      if (closed) state_ = State::kClose;
      return;
    }
    case State::kClose:
      if (literal(syntax_.close)) state_ = State::kBetween;
      return;
    case State::kBetween: {
      // Another call: the separator, then a call's opening (nothing may follow where there is no separator).
      const std::string next = syntax_.separator.empty() ? std::string() : std::string(syntax_.separator) + std::string(syntax_.open);
      if (literal(next)) start_call();
      return;
    }
  }
}

std::vector<ToolCallStream::Delta> ToolCallStream::push(std::string_view text) {
  std::vector<Delta> out;
  for (char c : text) feed(c, out);
  return out;
}

std::vector<ToolCallStream::Delta> ToolCallStream::finish() {
  std::vector<Delta> out;
  if (state_ == State::kStart) to_text(out);  // a prefix of a call's opening, but no call: text
  return out;
}

}  // namespace agentkv
