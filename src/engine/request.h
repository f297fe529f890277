// What a client asks the engine for, and what it hears back. Sampling parameters are per request.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "util/status.h"

namespace agentkv {

struct RequestParams {
  std::vector<int32_t> prompt;      // token ids (BOS included if the model wants one)
  SamplingParams sampling;
  int max_tokens = 128;
  int min_tokens = 0;               // end-of-generation tokens are ignored before this many
  int n = 1;                        // parallel samples: the prompt is prefilled once, then forked
  std::vector<std::string> stop;    // stop strings (cut from the text)
  bool ignore_eos = false;
  // Tool calls in the generic format (tokenizer/chat_tools.h): a call identical to an earlier call of
  // the same answer ends the answer before it, as a stop string would (a model repeating a call is
  // looping, and the grammar lets parallel calls go on).
  bool stop_repeated_tool_calls = false;
  int top_logprobs = -1;            // -1: no logprobs; 0: the chosen token's; k: also the top k
  uint64_t cache_salt = 0;          // isolates prefix-cache entries (e.g. per tenant)
  // Resident contexts (agents). kv_from: a retained KV snapshot (see Engine::retained) to start
  // from; the longest common prefix of its tokens and the prompt is reused, with or without prefix
  // caching. 0: none. retain_kv: when sequence 0 finishes (stop or length), its KV is kept as a new
  // snapshot, pinned until Engine::release_retained; the final event carries its handle.
  uint64_t kv_from = 0;
  bool retain_kv = false;
  // With retain_kv: the snapshot is the caller's working copy, not an agent's pin, from the moment it
  // exists (Engine::mark_transient): admission counts its blocks as in flight, not pinned.
  bool retain_transient = false;
  // One event with no token and no finish as soon as the request is admitted (past validation and
  // the KV fit check): a streamed reply starts its 200 then, not only at the first token, and a
  // refusal still gets its own HTTP status.
  bool announce_admission = false;
};

// Why a sequence ended. kNone: it has not (yet). kStop: an end-of-generation token or a stop string.
enum class FinishReason : uint8_t { kNone, kStop, kLength, kCancelled, kError };
// "", "stop", "length", "cancelled", "error" (logs, the CLI; the server maps to OpenAI's own names).
const char* finish_reason_name(FinishReason r);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), best first
};

// One event per sampled token of one sequence, plus the final one of each sequence. Delivered on
// the engine thread; the receiver must not block.
struct RequestEvent {
  uint64_t request_id = 0;
  int seq_index = 0;              // 0..n-1
  bool has_token = false;
  int32_t token = -1;             // the sampled token (also when it ends the sequence)
  // The token is the end-of-generation token that ended the sequence: it is not part of the answer
  // (not in the sequence's tokens, text or n_generated). A token that completes a stop string is.
  bool eog = false;
  std::string text;               // newly releasable text (complete UTF-8, stop strings cut)
  TokenLogprob logprob;           // when requested
  bool seq_finished = false;
  FinishReason finish_reason = FinishReason::kNone;  // set with seq_finished
  bool request_finished = false;  // the last event of the request
  std::string error;              // set with finish_reason kError
  ErrorCode error_code = ErrorCode::kInternal;  // its kind (util/status.h), with `error`
  // Usage, filled on every event.
  int n_prompt = 0;
  int n_cached_prompt = 0;        // prompt tokens whose KV came from the prefix cache
  int n_generated = 0;            // this sequence's tokens so far
  // With retain_kv, on the final event of sequence 0: the snapshot's handle and its token count.
  uint64_t retained_kv = 0;
  int64_t retained_tokens = 0;
};

using RequestCallback = std::function<void(const RequestEvent&)>;

}  // namespace agentkv
