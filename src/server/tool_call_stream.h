// Splits a chat answer into text and tool calls as it streams, in the model's tool-call syntax
// (tokenizer/chat_tools.h: the generic format, or Llama 3.x's JSON calls). Under tool_choice required / a named function the grammar makes the
// whole answer calls; under auto it is calls or text, decided by its first bytes, so text is held
// back only while it could still be the start of a call. Arguments stream out as they are written:
// a call's arguments end where its JSON value closes (strings and escapes are followed), which is
// how OpenAI's tool-call deltas are cut as well.
//
// The same parser reads whole answers (non-streamed replies), so both give the same calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/chat_tools.h"

namespace agentkv {

class ToolCallStream {
 public:
  // One piece of the answer: text, the start of call `call` (its id and name), or more of its arguments.
  struct Delta {
    enum class Kind { kText, kCallStart, kArguments } kind = Kind::kText;
    int call = -1;
    std::string text;  // kText: the text; kCallStart: the name; kArguments: argument bytes
    std::string id;    // kCallStart
  };

  // calls_allowed: tools are offered and tool_choice is not none; text_allowed: the answer may be
  // text (tool_choice auto). id_prefix: ids are id_prefix + "_" + the call's index.
  ToolCallStream(bool calls_allowed, bool text_allowed, std::string id_prefix,
                 const ToolCallSyntax& syntax = kGenericToolCalls);

  std::vector<Delta> push(std::string_view text);
  // The end of the answer: text still held back comes out.
  std::vector<Delta> finish();

  // After finish(): the calls, when the answer was calls and every one closed.
  bool has_calls() const { return !calls_.empty() && !broken_ && state_ == State::kBetween; }
  const std::vector<ChatToolCall>& calls() const { return calls_; }
  // The whole answer's text (all of it when it did not turn out to be complete calls).
  const std::string& raw() const { return raw_; }

 private:
  enum class State { kStart, kText, kName, kArgsLead, kArgs, kClose, kBetween };
  void feed(char c, std::vector<Delta>& out);
  void to_text(std::vector<Delta>& out);  // the answer is text after all: release what was held

  bool text_allowed_;
  ToolCallSyntax syntax_;
  std::string id_prefix_;
  State state_;
  std::string raw_, held_;   // held_: bytes not yet released (a literal being matched)
  size_t lit_pos_ = 0;       // how much of the current literal matched
  std::vector<ChatToolCall> calls_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false, broken_ = false;
};

}  // namespace agentkv
