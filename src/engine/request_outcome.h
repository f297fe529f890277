// One sequence's outcome folded from its engine events (engine/request.h): the answer's text and
// tokens, why it ended, usage, the retained KV handle, the error. Every caller that collects a whole
// answer folds with fold(); callers that stream keep their per-event handling but decide which
// tokens belong to the answer with answer_token(), so the rule for the last token lives here only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "util/status.h"

namespace agentkv {

struct RequestOutcome {
  std::string text;                    // stop strings cut
  std::vector<int32_t> tokens;         // the answer's tokens: see answer_token()
  FinishReason finish = FinishReason::kNone;
  int n_prompt = 0;
  int n_cached_prompt = 0;
  int n_generated = 0;                 // == tokens.size() once finished
  uint64_t retained_kv = 0;            // with retain_kv: the snapshot's handle, on sequence 0
  int64_t retained_tokens = 0;
  std::optional<Error> error;          // with FinishReason::kError
  bool request_finished = false;       // the request's last event was folded
};

// The rule for the last token: every sampled token is part of the answer (its tokens, text and
// n_generated) except the end-of-generation token that ended the sequence. A token that completes a
// stop string is part of it (its text is cut, the token stays), as the engine counts it.
inline bool answer_token(const RequestEvent& ev) { return ev.has_token && !ev.eog; }

// Folds one event of the outcome's sequence into it (events of other sequences of an n > 1 request
// go to their own outcome, indexed by ev.seq_index).
void fold(RequestOutcome& o, const RequestEvent& ev);

}  // namespace agentkv
