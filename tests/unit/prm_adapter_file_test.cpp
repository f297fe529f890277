// The verifier's adapter file: a round trip keeps every parameter bit for bit; a file of another
// model (fingerprint or geometry), an edited byte and a truncated file are each refused.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "prm/adapter_file.h"
#include "util/hex.h"

namespace agentkv::prm {
namespace {

ModelConfig small_config(int n_ff = 48) {
  ModelConfig c;
  c.n_layer = 2;
  c.n_embd = 32;
  c.n_ff = n_ff;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;
  return c;
}

constexpr uint64_t kFingerprint = 0x1234abcd5678ef01ull;

AdapterRecord record_of(uint64_t fingerprint) {
  AdapterRecord r;
  r.model_fingerprint = fingerprint;
  return r;
}

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

LoraAdapters trained_like(const ModelConfig& c) {
  LoraAdapters a = LoraAdapters::create(c, 3, 5.0f, 17);  // scale 5/3: not exact in binary
  for (size_t i = 0; i < a.params().size(); ++i) a.params()[i] += 1e-3f * float(i % 97);  // B no longer zero
  return a;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(b.data(), std::streamsize(b.size()));
}

TEST(PrmAdapterFile, RoundTripKeepsEveryParameterAndTheRecord) {
  const ModelConfig c = small_config();
  const LoraAdapters a = trained_like(c);
  const std::string path = temp_path("adapters_roundtrip.gguf");
  AdapterRecord r{kFingerprint, "tiny", "Is it right?", "+", "-", 120, 0.81};
  ASSERT_TRUE(write_adapter_file(path, a, r).ok());
  auto back = read_adapter_file(path, c, kFingerprint);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->adapters.rank(), 3);
  EXPECT_EQ(back->adapters.scale(), a.scale());
  ASSERT_EQ(back->adapters.params().size(), a.params().size());
  EXPECT_EQ(0, std::memcmp(back->adapters.params().data(), a.params().data(), a.params().size() * sizeof(float)));
  EXPECT_EQ(back->record.model_name, "tiny");
  EXPECT_EQ(back->record.question, "Is it right?");
  EXPECT_EQ(back->record.n_train_examples, 120);
  EXPECT_DOUBLE_EQ(back->record.heldout_auroc, 0.81);
}

TEST(PrmAdapterFile, AnotherModelIsRefusedNamingBothFingerprints) {
  const ModelConfig c = small_config();
  const std::string path = temp_path("adapters_other_model.gguf");
  ASSERT_TRUE(write_adapter_file(path, trained_like(c), record_of(kFingerprint)).ok());
  auto other = read_adapter_file(path, c, kFingerprint + 1);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.code(), ErrorCode::kConflict);
  EXPECT_NE(other.error().find(hex64(kFingerprint)), std::string::npos) << other.error();
  EXPECT_NE(other.error().find(hex64(kFingerprint + 1)), std::string::npos) << other.error();
  auto geometry = read_adapter_file(path, small_config(64), kFingerprint);
  ASSERT_FALSE(geometry.ok());
  EXPECT_NE(geometry.error().find("ffn_gate"), std::string::npos) << geometry.error();
}

TEST(PrmAdapterFile, AnEditedByteOrATruncatedFileIsRefused) {
  const ModelConfig c = small_config();
  const std::string path = temp_path("adapters_damaged.gguf");
  ASSERT_TRUE(write_adapter_file(path, trained_like(c), record_of(kFingerprint)).ok());
  const std::vector<char> good = read_bytes(path);
  for (size_t at : {good.size() / 3, good.size() - 5}) {  // in the metadata or tensor table, in the last B
    std::vector<char> bad = good;
    bad[at] = char(bad[at] ^ 0x10);
    write_bytes(path, bad);
    auto r = read_adapter_file(path, c, kFingerprint);
    EXPECT_FALSE(r.ok()) << "byte " << at << " edited";
  }
  write_bytes(path, std::vector<char>(good.begin(), good.begin() + std::ptrdiff_t(good.size() / 2)));
  EXPECT_FALSE(read_adapter_file(path, c, kFingerprint).ok());
  write_bytes(path, good);
  EXPECT_TRUE(read_adapter_file(path, c, kFingerprint).ok());
}

}  // namespace
}  // namespace agentkv::prm
