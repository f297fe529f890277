// The start-up quality gate of chat sharing (issue 14, deliverable 5): the path chat completions
// are served on (engine/chat_sharing.h) over a small fixed multi-turn group chat, every agent's
// request = its own system prompt + the shared transcript, rendered by the model's chat template and
// split into message pieces as the server does. Every answer that reused KV approximately is
// compared with the exact context (engine/round_quality.h: KL mean/p95, top-1, greedy agreement of
// the first 32 tokens), against the same committed thresholds as the rounds gate; a model that
// fails serves chat exactly and /v1/models says so.
#pragma once

#include <string>

#include "engine/sharing_gate.h"

namespace agentkv {

// Stored contexts keep their diff rows in `format` (EngineOptions::diff_format): later turns resume
// from them, so a lossy format's error is in what is measured.
Result<SharingGateResult> run_chat_sharing_gate(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                                const SharingGateThresholds& th, const std::string& cache_dir,
                                                DiffFormat format = DiffFormat::kF16);

}  // namespace agentkv
