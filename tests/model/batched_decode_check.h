// The batched-decode check shared by the real models' test (batched_decode_test.cpp) and the tiny
// architecture files' test (arch_golden_test.cpp): 32 sequences' decode steps through one batched
// forward (every generated token on the decode kernels, which share each unpacked weight block across
// the batch's tokens) against the same steps one sequence at a time, logits equal bit for bit at every
// step. Prompts of different lengths, blocks scattered in the arena.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace agentkv::testing {

constexpr int kDecodeSequences = 32;
constexpr int kDecodeSteps = 4;
constexpr int kDecodeBlockSize = 16;

inline std::vector<std::string> batched_decode_prompts() {
  const std::vector<std::string> openers = {
      "The capital of France is",
      "def add(a, b):\n    return a + b\n",
      "Once upon a time, in a land far away, there lived a dragon who",
      "In 1969, the first humans to walk on the Moon were",
      "Agent A says: the plan has three steps. First,",
      "The recipe calls for two cups of flour, one egg and",
      "Q: What is 17 times 3?\nA:",
      "The weather report for tomorrow predicts",
  };
  const std::vector<std::string> tails = {"", " Please answer briefly.",
                                          " Think about it step by step before you answer the question.",
                                          " (continued from the previous message of the group chat, where "
                                          "the planner and the executor argued about the order of the tasks)"};
  std::vector<std::string> out;
  for (const auto& t : tails)
    for (const auto& o : openers) out.push_back(o + t);
  return out;
}

// One arena per run; each sequence's blocks handed out in reverse order so tables are scattered.
struct DecodeRun {
  KvArena arena;
  std::vector<std::vector<int32_t>> tables;
  DecodeRun(const ModelConfig& cfg, const std::vector<int64_t>& max_len, int64_t total_blocks)
      : arena(cfg, kDecodeBlockSize, total_blocks) {
    int32_t next = int32_t(total_blocks);
    for (int64_t len : max_len) {
      tables.emplace_back();
      for (int64_t b = 0; b < (len + kDecodeBlockSize - 1) / kDecodeBlockSize; ++b) tables.back().push_back(--next);
    }
  }
  SeqBlocks view(size_t i) const { return SeqBlocks{tables[i].data(), int32_t(tables[i].size())}; }
};

inline void check_batched_decode(const LoadedModel& lm, const std::string& alias) {
  const Tokenizer& tok = *lm.tokenizer;
  const int n_vocab = lm.config().n_vocab;
  ThreadPool pool(0);
  const std::vector<std::string> texts = batched_decode_prompts();
  ASSERT_EQ(int(texts.size()), kDecodeSequences);
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> max_len;
  int64_t total_blocks = 0;
  for (const auto& t : texts) {
    ids.push_back(tok.encode(t, tok.add_bos_default(), false));
    max_len.push_back(int64_t(ids.back().size()) + kDecodeSteps);
    total_blocks += (max_len.back() + kDecodeBlockSize - 1) / kDecodeBlockSize;
  }
  DecodeRun batched(lm.config(), max_len, total_blocks), alone(lm.config(), max_len, total_blocks);

  // Prompts: each sequence alone, on the prefill kernels (n_tile_tokens = 0), in both arenas.
  std::vector<float> logits(size_t(kDecodeSequences) * size_t(n_vocab));
  std::vector<int32_t> next(kDecodeSequences);
  for (DecodeRun* run : {&batched, &alone}) {
    for (int i = 0; i < kDecodeSequences; ++i) {
      Batch b;
      b.seqs.push_back(run->view(size_t(i)));
      for (size_t p = 0; p < ids[size_t(i)].size(); ++p)
        b.add(ids[size_t(i)][p], int32_t(p), 0, int32_t(p), p + 1 == ids[size_t(i)].size());
      b.n_tile_tokens = 0;
      ASSERT_TRUE(lm.model->forward(b, run->arena, logits.data(), pool).ok());
      const float* row = logits.data();
      if (run == &batched) next[size_t(i)] = int32_t(std::max_element(row, row + n_vocab) - row);
    }
  }

  for (int step = 0; step < kDecodeSteps; ++step) {
    // All 32 decode tokens in one forward, every one on the decode kernels.
    Batch b;
    for (int i = 0; i < kDecodeSequences; ++i) b.seqs.push_back(batched.view(size_t(i)));
    for (int i = 0; i < kDecodeSequences; ++i) {
      const int32_t pos = int32_t(ids[size_t(i)].size()) + step;
      b.add(next[size_t(i)], pos, i, pos, true);
    }
    b.n_tile_tokens = b.size();
    ASSERT_TRUE(lm.model->forward(b, batched.arena, logits.data(), pool).ok());

    for (int i = 0; i < kDecodeSequences; ++i) {
      const int32_t pos = int32_t(ids[size_t(i)].size()) + step;
      Batch one;
      one.seqs.push_back(alone.view(size_t(i)));
      one.add(next[size_t(i)], pos, 0, pos, true);
      one.n_tile_tokens = 1;
      std::vector<float> single(static_cast<size_t>(n_vocab));
      ASSERT_TRUE(lm.model->forward(one, alone.arena, single.data(), pool).ok());
      const float* got = logits.data() + size_t(i) * size_t(n_vocab);
      if (std::memcmp(got, single.data(), sizeof(float) * size_t(n_vocab)) != 0) {
        int first = 0;
        while (first < n_vocab && std::memcmp(&got[first], &single[size_t(first)], sizeof(float)) == 0) ++first;
        FAIL() << alias << " step " << step << " sequence " << i << ": batched logit " << first << " = "
               << got[first] << ", alone " << single[size_t(first)];
      }
    }
    for (int i = 0; i < kDecodeSequences; ++i) {
      const float* row = logits.data() + size_t(i) * size_t(n_vocab);
      next[size_t(i)] = int32_t(std::max_element(row, row + n_vocab) - row);
    }
  }
}

}  // namespace agentkv::testing
