// Folding engine events into an outcome (request_outcome.h), and the names of the finish reasons.
#include "engine/request_outcome.h"

namespace agentkv {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "";
}

void fold(RequestOutcome& o, const RequestEvent& ev) {
  if (answer_token(ev)) o.tokens.push_back(ev.token);
  o.text += ev.text;
  o.n_prompt = ev.n_prompt;
  o.n_cached_prompt = ev.n_cached_prompt;
  o.n_generated = ev.n_generated;
  if (ev.seq_finished) {
    o.finish = ev.finish_reason;
    o.retained_kv = ev.retained_kv;
    o.retained_tokens = ev.retained_tokens;
  }
  if (!ev.error.empty()) o.error = make_error(ev.error_code, ev.error);
  if (ev.request_finished) o.request_finished = true;
}

}  // namespace agentkv
