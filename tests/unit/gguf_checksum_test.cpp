// GgufWriter::write_file_checksummed and GgufFile::verify_checksum, the seal of agentkv's own GGUF
// formats (KV cache files, transfer maps): the sum covers every byte of the file, so flipping any one
// byte (header, a key, a value, a tensor info, padding or data) is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "gguf/gguf_file.h"
#include "gguf_test_util.h"

namespace agentkv {
namespace {

std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(GgufChecksum, EveryFlippedByteIsRefused) {
  const std::string p = ::testing::TempDir() + "agentkv_sealed_" + std::to_string(::getpid()) + ".gguf";
  GgufWriter w;
  w.add_string("general.architecture", "agentkv-test");
  w.add<uint64_t>("t.fingerprint", 0x0123456789abcdefull);
  w.add_string("t.name", "m");
  w.add_array<int32_t>("t.tokens", {1, 2, 3});
  w.add_tensor("a", uint32_t(GgmlType::F32), {3}, gguf_test::filled(12, 5));
  w.add_tensor("b", uint32_t(GgmlType::F32), {2}, gguf_test::filled(8, 9));
  ASSERT_TRUE(w.write_file_checksummed(p, "t.checksum").ok());
  const std::vector<uint8_t> good = slurp(p);
  std::remove(p.c_str());
  {
    auto f = GgufFile::parse(good.data(), good.size());
    ASSERT_TRUE(f.ok()) << f.error();
    EXPECT_TRUE((*f)->verify_checksum("t.checksum").ok());
    EXPECT_EQ((*f)->keys().back(), "t.checksum");
    const Status missing = (*f)->verify_checksum("t.other");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().find("t.other"), std::string::npos) << missing.error();
  }
  for (size_t at = 0; at < good.size(); ++at) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x01;
    auto f = GgufFile::parse(bad.data(), bad.size());
    if (!f.ok()) continue;  // the structure no longer parses: refused anyway
    const Status st = (*f)->verify_checksum("t.checksum");
    ASSERT_FALSE(st.ok()) << "byte " << at << " of " << good.size() << " flipped and accepted";
    EXPECT_NE(st.error().find("checksum"), std::string::npos) << st.error();  // a mismatch, or its key damaged
  }
}

}  // namespace
}  // namespace agentkv
