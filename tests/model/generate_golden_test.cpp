// Greedy decoding against llama.cpp's greedy continuations (tests/data/generate/goldens.json, made by
// scripts/make_generate_goldens.py). Teacher-forced: the prompt plus llama.cpp's generated tokens are
// fed once, and at every generated position llama.cpp's choice must be our argmax too, unless the
// two candidates are a near-tie in our logits (margin below kTieMargin), where float rounding of a
// different summation order may legitimately flip the choice. Ties are counted and bounded.
#include <algorithm>
#include <vector>

#include "engine/single_sequence.h"
#include "model_test_util.h"
#include "util/json.h"

namespace agentkv {
namespace {

constexpr float kTieMargin = 0.25f;
constexpr int kMaxTies = 2;

TEST(GenerateGolden, GreedyChoicesMatchLlamaCpp) {
  auto meta = parse_json(testing::read_file(testing::source_path("tests/data/generate/goldens.json")));
  ASSERT_TRUE(meta.ok()) << meta.error();
  ThreadPool pool(0);
  for (const Json& c : meta->at("cases")) {
    const LoadedModel& lm = testing::real_model(c.at("model").get<std::string>());
    std::vector<int32_t> ids, gen;
    for (const Json& t : c.at("prompt_tokens")) ids.push_back(t.get<int32_t>());
    for (const Json& t : c.at("tokens")) gen.push_back(t.get<int32_t>());
    ASSERT_FALSE(gen.empty());
    const size_t n_prompt = ids.size();
    ids.insert(ids.end(), gen.begin(), gen.end() - 1);
    SingleSequence seq(*lm.model, int(ids.size()));
    std::vector<float> logits;
    ASSERT_TRUE(seq.eval(ids, n_prompt - 1, logits, pool).ok());
    const int n_vocab = lm.config().n_vocab;
    int ties = 0;
    for (size_t i = 0; i < gen.size(); ++i) {
      const float* row = logits.data() + i * n_vocab;
      const int ours = int(std::max_element(row, row + n_vocab) - row);
      if (ours == gen[i]) continue;
      const float margin = row[ours] - row[gen[i]];
      EXPECT_LT(margin, kTieMargin) << c.at("model").get<std::string>() << " '" << c.at("prompt").get<std::string>()
                                    << "' step " << i << ": ours " << ours << ", llama.cpp " << gen[i];
      ++ties;
    }
    EXPECT_LE(ties, kMaxTies) << c.at("prompt").get<std::string>();
  }
}

}  // namespace
}  // namespace agentkv
