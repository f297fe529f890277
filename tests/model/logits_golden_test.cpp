// Last-position logits against llama.cpp's (tests/data/logits, made by scripts/make_logit_goldens.py
// with llama.cpp 0c1e570 from the llama-cpp-python 0.3.36 sdist). The same token ids are fed, so
// only the forward pass is compared.
//
// Tolerances: we mirror llama.cpp's numerics (8-bit activation blocks rounded the same way, f16 K/V,
// f16-rounded attention inputs, f16 GELU table semantics), and a single token's logits are bit-identical.
// What remains is the summation order inside attention and the kernels: a last-bit difference can flip
// one 8-bit activation step, which 30 (SmolLM2) or 18 (Gemma) layers amplify to logit differences of
// order 1 on long prompts. Across rounding-level variants of our kernels (summation order, exp
// approximation, prefill tile layout) the worst max |delta| seen was 1.13 (SmolLM2) and 2.81 (Gemma 3,
// 1087-token prompt), with KL(llama.cpp || ours) of the next-token distributions at most 0.021 / 0.062. We require the same
// top-1, >= 9 of the top 10 shared, max |delta| below the per-model bound and KL below kMaxKl.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/single_sequence.h"
#include "model_test_util.h"
#include "util/json.h"

namespace agentkv {
namespace {


constexpr double kMaxKl = 0.1;

// KL(p || q) of the softmax distributions of two logit vectors, in nats.
double kl_divergence(const float* p_logits, const float* q_logits, int n) {
  auto log_softmax = [n](const float* x, std::vector<double>& out) {
    double mx = x[0];
    for (int i = 1; i < n; ++i) mx = std::max(mx, double(x[i]));
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
    const double lse = mx + std::log(sum);
    out.resize(n);
    for (int i = 0; i < n; ++i) out[i] = double(x[i]) - lse;
  };
  std::vector<double> lp, lq;
  log_softmax(p_logits, lp);
  log_softmax(q_logits, lq);
  double kl = 0;
  for (int i = 0; i < n; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

std::vector<int> top_k(const float* v, int n, int k) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return v[a] > v[b]; });
  idx.resize(k);
  return idx;
}

void check_model(const std::string& alias, float max_abs_delta) {
  const LoadedModel& lm = testing::real_model(alias);
  auto meta = parse_json(testing::read_file(testing::source_path("tests/data/logits/" + alias + ".json")));
  ASSERT_TRUE(meta.ok()) << meta.error();
  const int n_vocab = lm.config().n_vocab;
  ASSERT_EQ(meta->at("n_vocab").get<int>(), n_vocab);
  ThreadPool pool(0);
  const auto& prompts = meta->at("prompts");
  ASSERT_GE(prompts.size(), 8u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Json& p = prompts[i];
    std::vector<int32_t> ids;
    for (const Json& t : p.at("tokens")) ids.push_back(t.get<int32_t>());
    const std::string blob = testing::read_file(testing::source_path("tests/data/logits/" + alias + "." +
                                                                     std::to_string(i) + ".f32"));
    ASSERT_EQ(blob.size(), size_t(n_vocab) * 4);
    std::vector<float> ref(n_vocab);
    std::memcpy(ref.data(), blob.data(), blob.size());

    SingleSequence seq(*lm.model, int(ids.size()));
    std::vector<float> got;
    ASSERT_TRUE(seq.eval(ids, ids.size() - 1, got, pool).ok());
    if (const char* dump = std::getenv("AGENTKV_DUMP_LOGITS")) {
      FILE* f = std::fopen((std::string(dump) + "/" + alias + "." + std::to_string(i) + ".f32").c_str(), "wb");
      if (f) std::fwrite(got.data(), 4, got.size(), f), std::fclose(f);
    }
    float max_delta = 0;
    for (int v = 0; v < n_vocab; ++v) max_delta = std::max(max_delta, std::fabs(got[v] - ref[v]));
    const double kl = kl_divergence(ref.data(), got.data(), n_vocab);
    const auto top_ref = top_k(ref.data(), n_vocab, 10);
    const auto top_got = top_k(got.data(), n_vocab, 10);
    int overlap = 0;
    for (int a : top_got) overlap += std::count(top_ref.begin(), top_ref.end(), a) ? 1 : 0;
    const std::string name = p.at("name").get<std::string>();
    std::printf("%s %-14s n=%4zu top1 %6d/%6d overlap %2d/10 max|d| %.4f KL %.5f\n", alias.c_str(), name.c_str(),
                ids.size(), top_got[0], top_ref[0], overlap, max_delta, kl);
    EXPECT_EQ(top_got[0], top_ref[0]) << alias << " prompt " << name;
    EXPECT_GE(overlap, 9) << alias << " prompt " << name;
    EXPECT_LT(max_delta, max_abs_delta) << alias << " prompt " << name;
    EXPECT_LT(kl, kMaxKl) << alias << " prompt " << name;
  }
}

TEST(LogitsGolden, Smollm2MatchesLlamaCpp) { check_model("smollm2", 1.5f); }
TEST(LogitsGolden, Gemma3MatchesLlamaCpp) { check_model("gemma3", 3.5f); }

}  // namespace
}  // namespace agentkv
