// Perplexity on a public-domain text (KJV Genesis 1-12, tests/data/perplexity) within 1% of
// llama-perplexity's figure for the same GGUF and context (goldens.json, from
// scripts/make_perplexity_goldens.sh).
#include <cmath>

#include "engine/perplexity.h"
#include "model_test_util.h"
#include "util/json.h"

namespace agentkv {
namespace {

void check_perplexity(const std::string& alias) {
  auto meta = parse_json(testing::read_file(testing::source_path("tests/data/perplexity/goldens.json")));
  ASSERT_TRUE(meta.ok()) << meta.error();
  const double ref = meta->at("ppl").at(alias).get<double>();
  const int ctx = meta->at("ctx").get<int>();
  const std::string text = testing::read_file(testing::source_path("tests/data/perplexity/kjv_genesis.txt"));
  ThreadPool pool(0);
  auto r = perplexity(testing::real_model(alias), text, ctx, pool);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_GE(r->n_tokens, 4096);
  std::printf("%s: ppl %.4f, llama.cpp %.4f, relative difference %.3f%%\n", alias.c_str(), r->ppl, ref,
              100.0 * std::fabs(r->ppl - ref) / ref);
  EXPECT_LT(std::fabs(r->ppl - ref) / ref, 0.01);
}

TEST(PerplexityGolden, Smollm2WithinOnePercentOfLlamaCpp) { check_perplexity("smollm2"); }
TEST(PerplexityGolden, Gemma3WithinOnePercentOfLlamaCpp) { check_perplexity("gemma3"); }

}  // namespace
}  // namespace agentkv
