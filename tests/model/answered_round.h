// One small shared round on an engine, for the model tests of master–diff storage in the engine
// (compact_context_test, resume_in_attention_test): three agents prefill their prefixes, the
// segment's master is prefilled once, the KV collector blends every agent's copy, and each agent
// answers from its copy.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/segment_collector.h"
#include "model_test_util.h"

namespace agentkv::testing {

// What a request did: its retained snapshot, error, tokens and their log-probabilities.
struct RequestDone {
  uint64_t retained = 0;
  std::string error;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
};

inline RequestCallback keep(RequestDone* d) {
  return [d](const RequestEvent& ev) {
    if (!ev.error.empty()) d->error = ev.error;
    if (ev.has_token) {
      d->tokens.push_back(ev.token);
      d->logprobs.push_back(ev.logprob);
    }
    if (ev.request_finished) d->retained = ev.retained_kv;
  };
}

inline RequestParams retained_request(std::vector<int32_t> prompt, int max_tokens, uint64_t kv_from = 0,
                                      bool retain = true) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.retain_kv = retain;
  p.kv_from = kv_from;
  return p;
}

// Three agents that shared a segment through the KV collector and answered from their blended copies:
// their final contexts (dense, retained), the master they blended from, and their layout.
struct AnsweredRound {
  std::unique_ptr<Engine> engine;
  std::vector<std::vector<int32_t>> prefix_tokens;
  std::vector<int32_t> segment;
  uint64_t master = 0;
  int32_t master_start = 0;
  std::vector<uint64_t> answers;
};

// same_positions: every prefix cut to one token length and the master computed after agent 0's
// prefix, so each agent holds the segment at the master's positions (no re-rotation).
inline void answer_shared_round(const LoadedModel& lm, const EngineOptions& eo, ThreadPool& pool, AnsweredRound& out,
                                bool same_positions = false) {
  const Tokenizer& tok = *lm.tokenizer;
  auto created = Engine::create(lm, eo, pool);
  ASSERT_TRUE(created.ok()) << created.error();
  out.engine = std::move(created).value();
  Engine& e = *out.engine;

  const std::vector<std::string> prefixes = {
      "Ada is a baker who wakes at four and knows every rumour in town.\n",
      "Bram, the blacksmith, has not spoken to his brother in ten years, and he still keeps the old forge key.\n",
      "Cleo teaches the children.\n"};
  out.segment = tok.encode(
      "Town crier: the bridge over the river fell in last night's storm, and the market is cut off until it is "
      "rebuilt. Volunteers are asked to gather at the mill at noon with rope and timber.\n",
      false, false);
  const std::vector<int32_t>& segment = out.segment;
  const std::vector<int32_t> own = tok.encode("What do you do next?", false, false);

  for (const std::string& p : prefixes) out.prefix_tokens.push_back(tok.encode(p, tok.add_bos_default(), false));
  if (same_positions) {
    size_t shortest = out.prefix_tokens[0].size();
    for (const auto& p : out.prefix_tokens) shortest = std::min(shortest, p.size());
    for (auto& p : out.prefix_tokens) p.resize(shortest);
  }
  std::vector<RequestDone> pre(prefixes.size()), master(1);
  for (size_t i = 0; i < prefixes.size(); ++i)
    ASSERT_TRUE(e.add_request(retained_request(out.prefix_tokens[i], 0), keep(&pre[i])).ok());
  std::vector<int32_t> master_tokens;
  if (same_positions) master_tokens = out.prefix_tokens[0];
  else if (tok.add_bos_default()) master_tokens.push_back(tok.bos_id());
  out.master_start = int32_t(master_tokens.size());
  master_tokens.insert(master_tokens.end(), segment.begin(), segment.end());
  ASSERT_TRUE(e.add_request(retained_request(master_tokens, 0), keep(&master[0])).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  out.master = master[0].retained;

  std::vector<uint64_t> handles;
  for (const RequestDone& d : pre) handles.push_back(d.retained);
  RecomputeOptions ro;
  ro.ratio = 0.2;
  auto copies = collect_shared_segment(e, out.master, out.master_start, segment, handles, ro);
  ASSERT_TRUE(copies.ok()) << copies.error();
  for (uint64_t h : handles) e.release_retained(h);

  // Each agent answers from its blended copy; its final context is what gets compacted.
  std::vector<RequestDone> answers(prefixes.size());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    std::vector<int32_t> prompt = out.prefix_tokens[i];
    prompt.insert(prompt.end(), segment.begin(), segment.end());
    prompt.insert(prompt.end(), own.begin(), own.end());
    ASSERT_TRUE(e.add_request(retained_request(prompt, 12, (*copies)[i].handle), keep(&answers[i])).ok());
  }
  ASSERT_TRUE(e.run_until_idle().ok());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    ASSERT_TRUE(answers[i].error.empty()) << answers[i].error;
    e.release_retained((*copies)[i].handle);
    out.answers.push_back(answers[i].retained);
  }
}

}  // namespace agentkv::testing
