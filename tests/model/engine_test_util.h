// Runs requests through an Engine and collects what each sequence produced, for the engine tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/collective_round.h"
#include "engine/engine.h"
#include "model_test_util.h"

namespace agentkv::testing {

struct SeqOut {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::string text;
  std::string finish;
  int n_cached = 0;
};
using RequestOut = std::vector<SeqOut>;  // by seq index

// Slices of the committed public-domain text (KJV Genesis) as prompts of varied lengths.
inline std::vector<std::string> genesis_prompts(int n, size_t min_chars, size_t max_chars, size_t stride = 997) {
  const std::string text = read_file(source_path("tests/data/perplexity/kjv_genesis.txt"));
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    size_t start = (size_t(i) * stride) % (text.size() - max_chars - 1);
    while (start > 0 && text[start - 1] != ' ') ++start;  // start at a word
    const size_t len = min_chars + (max_chars - min_chars) * size_t(i) / size_t(std::max(1, n - 1));
    out.push_back(text.substr(start, len));
  }
  return out;
}

inline RequestParams greedy_request(const LoadedModel& lm, const std::string& text, int max_tokens, int top_logprobs = 5) {
  RequestParams p;
  p.prompt = lm.tokenizer->encode(text, lm.tokenizer->add_bos_default(), false);
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // fixed lengths make the comparisons simple
  p.top_logprobs = top_logprobs;
  return p;
}

inline RequestCallback collect_into(RequestOut* out, bool* finished) {
  return [out, finished](const RequestEvent& ev) {
    if (out->size() <= size_t(ev.seq_index)) out->resize(size_t(ev.seq_index) + 1);
    SeqOut& s = (*out)[size_t(ev.seq_index)];
    EXPECT_TRUE(ev.error.empty()) << ev.error;
    if (ev.has_token) {
      s.tokens.push_back(ev.token);
      s.logprobs.push_back(ev.logprob);
    }
    s.text += ev.text;
    s.n_cached = ev.n_cached_prompt;
    if (ev.seq_finished) s.finish = finish_reason_name(ev.finish_reason);
    if (ev.request_finished) *finished = true;
  };
}

// One request alone through e, run to its end.
inline RequestOut run_one_request(Engine& e, const RequestParams& p) {
  RequestOut out;
  bool done = false;
  auto id = e.add_request(p, collect_into(&out, &done));
  EXPECT_TRUE(id.ok()) << id.error();
  EXPECT_TRUE(e.run_until_idle().ok());
  EXPECT_TRUE(done);
  return out;
}

// One collective round (engine/collective_round.h) of `turns` through e at recompute share R, run to
// its end.
inline CollectiveRoundResult run_collective_round(Engine& e, const std::vector<RoundTurn>& turns, double recompute) {
  CollectiveRoundOptions o;
  o.recompute = recompute;
  std::optional<CollectiveRoundResult> out;
  start_collective_round(e, turns, o, [&](CollectiveRoundResult&& r) { out = std::move(r); });
  EXPECT_TRUE(e.run_until_idle().ok());
  EXPECT_TRUE(out.has_value());
  return out ? std::move(*out) : CollectiveRoundResult{};
}

// Runs other prompts through e until none of `prompt`'s blocks is left in RAM: a small KV budget
// evicts them (to the lower tiers, when e has any). Its first block is evicted last.
inline void evict_prompt_blocks(Engine& e, const LoadedModel& lm, const std::vector<int32_t>& prompt) {
  const auto fillers = genesis_prompts(8, 300, 300, 7919);
  size_t used = 0;
  while (cached_prefix_tokens(e.kv(), prompt, 0) > 0) {
    ASSERT_LT(used, fillers.size()) << "the fillers did not evict the prompt's blocks";
    run_one_request(e, greedy_request(lm, fillers[used++], 1));
  }
}

// All requests at once (batched) or each alone, in a fresh engine with these options.
inline std::vector<RequestOut> run_engine(const LoadedModel& lm, ThreadPool& pool, const EngineOptions& eo,
                                          const std::vector<RequestParams>& reqs, bool one_at_a_time,
                                          EngineMetrics* metrics = nullptr) {
  auto engine = Engine::create(lm, eo, pool);
  EXPECT_TRUE(engine.ok()) << engine.error();
  if (!engine.ok()) return {};
  std::vector<RequestOut> outs(reqs.size());
  std::vector<char> done(reqs.size(), 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = (*engine)->add_request(reqs[i], collect_into(&outs[i], reinterpret_cast<bool*>(&done[i])));
    EXPECT_TRUE(id.ok()) << id.error();
    if (one_at_a_time) {
      EXPECT_TRUE((*engine)->run_until_idle().ok());
    }
  }
  EXPECT_TRUE((*engine)->run_until_idle().ok());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_TRUE(done[i]) << "request " << i << " did not finish";
  if (metrics) *metrics = (*engine)->metrics();
  EXPECT_EQ((*engine)->metrics().blocks_used, 0) << "blocks still referenced after every request finished";
  return outs;
}

// Same tokens, and the logprobs of the chosen and top tokens within bound. Returns the max |Δ| seen.
inline float expect_same_outputs(const std::vector<RequestOut>& a, const std::vector<RequestOut>& b, float bound,
                                 const std::string& what) {
  float worst = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r) {
    EXPECT_EQ(a[r].size(), b[r].size()) << what << " request " << r;
    for (size_t s = 0; s < std::min(a[r].size(), b[r].size()); ++s) {
      const SeqOut& x = a[r][s];
      const SeqOut& y = b[r][s];
      EXPECT_EQ(x.tokens, y.tokens) << what << ": request " << r << " seq " << s << " generated different tokens";
      for (size_t i = 0; i < std::min(x.logprobs.size(), y.logprobs.size()); ++i) {
        worst = std::max(worst, std::fabs(x.logprobs[i].logprob - y.logprobs[i].logprob));
        std::map<int32_t, float> top;
        for (auto& [t, lp] : y.logprobs[i].top) top[t] = lp;
        for (auto& [t, lp] : x.logprobs[i].top)
          if (top.count(t)) worst = std::max(worst, std::fabs(lp - top[t]));
      }
    }
  }
  EXPECT_LE(worst, bound) << what << ": logprob difference over the stated bound";
  return worst;
}

}  // namespace agentkv::testing
