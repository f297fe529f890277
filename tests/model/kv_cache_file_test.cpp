// A sender's cache written to a file and loaded in another KV manager (another process in real
// use) is the same cache, bit for bit, with the same tokens; a file of another model, a damaged
// file and a file that is not a cache file are refused with a one-line error naming the problem.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kjv_corpus.h"
#include "model_test_util.h"
#include "transfer/kv_cache_file.h"
#include "transfer/layer_kv.h"
#include "lab/transfer/transfer_quality.h"

namespace agentkv::testing {
namespace {

std::unique_ptr<KvManager> manager(const LoadedModel& lm) {
  auto m = private_kv_manager(lm, 1024, 16);
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(*m);
}

// Flips bits of the byte `from_end` bytes before the end of the file, in place.
void flip_byte(const std::string& path, std::streamoff from_end, char mask) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(-from_end, std::ios::end);
  char c = 0;
  f.get(c);
  f.seekp(-from_end, std::ios::end);
  f.put(char(c ^ mask));
}

TEST(KvCacheFile, RoundTripsExactlyAndRefusesForeignOrDamagedFiles) {
  const LoadedModel& a = real_model("smollm2");
  const LoadedModel& b = real_model("gemma3");
  // Held-out text (John), 61 tokens or so: not a multiple of the block size, so a partial block too.
  const std::string text = cut_at_space(kjv_chapters("joh", 3, 3)[0], 260);
  auto kv = manager(a);
  KvSequence seq(*kv);
  ASSERT_TRUE(prefill_sequence(*a.model, *kv, seq, a.tokenizer->encode(text, a.tokenizer->add_bos_default(), false), test_pool()).ok());
  const std::string path = ::testing::TempDir() + "kv_cache_file_test.gguf";
  ASSERT_TRUE(save_kv_cache_file(path, a, *kv, seq, text).ok());

  auto kv2 = manager(a);
  KvSequence loaded(*kv2);
  auto got = load_kv_cache_file(path, a, *kv2, loaded);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_EQ(*got, text);
  EXPECT_EQ(loaded.tokens(), seq.tokens());
  const auto want_kv = read_unrotated_kv(a.config(), kv->arena(), seq.blocks(), seq.n_tokens());
  const auto got_kv = read_unrotated_kv(a.config(), kv2->arena(), loaded.blocks(), loaded.n_tokens());
  for (size_t l = 0; l < want_kv.size(); ++l) {
    EXPECT_EQ(got_kv[l].k, want_kv[l].k) << "layer " << l;
    EXPECT_EQ(got_kv[l].v, want_kv[l].v) << "layer " << l;
  }

  auto kvb = manager(b);
  KvSequence other(*kvb);
  auto foreign = load_kv_cache_file(path, b, *kvb, other);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().find("refused for " + b.name), std::string::npos) << foreign.error();
  EXPECT_EQ(foreign.error().find('\n'), std::string::npos);
  EXPECT_EQ(other.n_tokens(), 0);

  flip_byte(path, 7, 0x10);  // inside the last V tensor
  KvSequence damaged(*kv2);
  auto bad = load_kv_cache_file(path, a, *kv2, damaged);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("corrupted"), std::string::npos) << bad.error();
  EXPECT_EQ(damaged.n_tokens(), 0);

  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  bad = load_kv_cache_file(path, a, *kv2, damaged);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("kv cache file"), std::string::npos) << bad.error();

  // A GGUF that is not a cache (the model file itself).
  bad = load_kv_cache_file(a.path, a, *kv2, damaged);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("not a kv cache file"), std::string::npos) << bad.error();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace agentkv::testing
