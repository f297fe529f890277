// Compares our tokenizer with llama.cpp (commit 0c1e570) on the committed corpus, for both real
// vocabularies, loading them through our GGUF reader. Goldens: scripts/make_tokenizer_goldens.py.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_loader.h"
#include "util/json.h"

namespace agentkv {
namespace {

// Field access on the golden JSON lines (util/json.h); a missing field fails the test and reads as null.
const Json& at(const Json& j, const std::string& key) {
  static const Json kNull;
  const Json* v = json_member(j, key);
  if (!v) ADD_FAILURE() << "golden line lacks field '" << key << "'";
  return v ? *v : kNull;
}

std::vector<int32_t> ints(const Json& j) {
  std::vector<int32_t> out;
  for (const Json& x : j) out.push_back(x.get<int32_t>());
  return out;
}

Json parse_line(const std::string& line) {
  auto j = parse_json(line);
  if (!j.ok()) ADD_FAILURE() << j.error();
  return j.ok() ? std::move(j).value() : Json();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string models_dir() {
  if (const char* env = std::getenv("AGENTKV_MODELS")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/agentkv/models";
}

Result<VocabData> load_model_vocab(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return make_error(file.error());
  return load_vocab(*file.value());
}

struct ModelCase {
  const char* name;
  const char* file;
};

// Loads the model's vocabulary through load_vocab and builds the tokenizer; nullptr (with a test
// failure recorded) on error, including a missing model: the README's set-up fetches both.
std::unique_ptr<Tokenizer> load_tokenizer(const ModelCase& mc, double* seconds) {
  const std::string path = models_dir() + "/" + mc.file;
  const auto t0 = std::chrono::steady_clock::now();
  auto vocab = load_model_vocab(path);
  EXPECT_TRUE(vocab.ok()) << vocab.error();
  if (!vocab.ok()) return nullptr;
  auto tok = Tokenizer::create(std::move(vocab).value());
  EXPECT_TRUE(tok.ok()) << tok.error();
  if (!tok.ok()) return nullptr;
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(tok).value();
}

class TokenizerGolden : public ::testing::TestWithParam<ModelCase> {};

TEST_P(TokenizerGolden, MatchesLlamaCpp) {
  const ModelCase mc = GetParam();
  double load_s = 0;
  auto tok_p = load_tokenizer(mc, &load_s);
  ASSERT_TRUE(tok_p);
  const Tokenizer& tok = *tok_p;
  std::printf("[%s] vocab load + tokenizer build: %.3f s\n", mc.name, load_s);

  std::ifstream in(std::string(AGENTKV_SOURCE_DIR) + "/tests/data/tokenizer/" + mc.name + ".golden.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const Json meta = at(parse_line(line), "meta");
  EXPECT_EQ(tok.n_vocab(), at(meta, "n_vocab").get<int32_t>());
  EXPECT_EQ(tok.bos_id(), at(meta, "bos").get<int32_t>());
  EXPECT_EQ(tok.eos_id(), at(meta, "eos").get<int32_t>());
  EXPECT_EQ(tok.eot_id(), at(meta, "eot").get<int32_t>());
  EXPECT_EQ(tok.add_bos_default(), at(meta, "add_bos").get<bool>());
  EXPECT_EQ(tok.eog_ids(), ints(at(meta, "eog")));
  std::vector<int32_t> control;
  for (int32_t i = 0; i < tok.n_vocab(); ++i) {
    if (tok.is_special(i) && tok.token_type(i) != TokenType::kUnknown) control.push_back(i);
  }
  EXPECT_EQ(control, ints(at(meta, "control")));

  int n = 0, ok = 0, roundtrip = 0;
  double encode_s = 0;
  while (std::getline(in, line)) {
    const Json g = parse_line(line);
    const std::string text = from_hex(at(g, "hex").get<std::string>());
    const auto t1 = std::chrono::steady_clock::now();
    const auto special = tok.encode(text, false, true);
    const auto plain = tok.encode(text, false, false);
    const auto with_bos = tok.encode(text, tok.add_bos_default(), true);
    encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const std::string detok_special = tok.decode(special, true);
    const std::string detok_plain = tok.decode(plain, false);
    const bool all = special == ints(at(g, "special")) && plain == ints(at(g, "plain")) &&
                     with_bos == ints(at(g, "bos")) && detok_special == from_hex(at(g, "detok_special_hex").get<std::string>()) &&
                     detok_plain == from_hex(at(g, "detok_plain_hex").get<std::string>());
    EXPECT_EQ(special, ints(at(g, "special"))) << "#" << at(g, "i").get<int64_t>() << " " << printable(text);
    EXPECT_EQ(plain, ints(at(g, "plain"))) << "#" << at(g, "i").get<int64_t>() << " " << printable(text);
    EXPECT_EQ(with_bos, ints(at(g, "bos"))) << "#" << at(g, "i").get<int64_t>() << " " << printable(text);
    EXPECT_EQ(printable(detok_special), printable(from_hex(at(g, "detok_special_hex").get<std::string>())))
        << "#" << at(g, "i").get<int64_t>();
    EXPECT_EQ(printable(detok_plain), printable(from_hex(at(g, "detok_plain_hex").get<std::string>()))) << "#" << at(g, "i").get<int64_t>();
    // Wherever llama.cpp round-trips, so must we (implied by the equalities above; counted here).
    if (from_hex(at(g, "detok_special_hex").get<std::string>()) == text) {
      ++roundtrip;
      EXPECT_EQ(printable(detok_special), printable(text));
    }
    ++n;
    ok += all;
  }
  std::printf("[%s] %d/%d corpus strings identical to llama.cpp (%d round-trip exactly), encode %.1f ms\n",
              mc.name, ok, n, roundtrip, encode_s * 1e3);
  EXPECT_EQ(n, at(meta, "corpus_size").get<int>());
}

// Prompts rendered by our chat formatter equal the reference rendering (SmolLM2: the GGUF's own
// Jinja template through jinja2) and tokenize to llama.cpp's ids.
TEST_P(TokenizerGolden, ChatTemplate) {
  const ModelCase mc = GetParam();
  double load_s = 0;
  auto tok_p = load_tokenizer(mc, &load_s);
  ASSERT_TRUE(tok_p);
  const Tokenizer& tok = *tok_p;
  std::ifstream in(std::string(AGENTKV_SOURCE_DIR) + "/tests/data/tokenizer/" + mc.name +
                   ".chat.golden.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const Json g = parse_line(line);
    std::vector<ChatMessage> msgs;
    for (const Json& m : at(g, "messages"))
      msgs.push_back({at(m, "role").get<std::string>(), at(m, "content").get<std::string>()});
    auto text = apply_chat_template(tok, msgs, at(g, "add_generation_prompt").get<bool>());
    ASSERT_TRUE(text.ok()) << text.error();
    EXPECT_EQ(text.value(), at(g, "text").get<std::string>());
    EXPECT_EQ(tok.encode(text.value(), tok.add_bos_default(), true), ints(at(g, "ids"))) << at(g, "text").get<std::string>();
    ++n;
  }
  EXPECT_GT(n, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerGolden,
                         ::testing::Values(ModelCase{"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
                                           ModelCase{"gemma3", "gemma-3-270m-q4_k_m.gguf"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace agentkv
