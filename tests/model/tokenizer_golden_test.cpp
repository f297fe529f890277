// Compares our tokenizer with llama.cpp (commit 0c1e570) on the committed corpus, for both real
// vocabularies, loading them through our GGUF reader. Goldens: scripts/make_tokenizer_goldens.py.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_loader.h"

namespace agentkv {
namespace {

// --- A minimal JSON reader, enough for the golden files (objects, arrays, strings, numbers). ---
struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> v;
  const Json& operator[](const std::string& k) const { return std::get<JsonObject>(v).at(k); }
  bool has(const std::string& k) const {
    const auto* o = std::get_if<JsonObject>(&v);
    return o && o->count(k);
  }
  const std::string& str() const { return std::get<std::string>(v); }
  double num() const { return std::get<double>(v); }
  bool boolean() const { return std::get<bool>(v); }
  std::vector<int32_t> ints() const {
    std::vector<int32_t> out;
    for (const Json& j : std::get<JsonArray>(v)) out.push_back(static_cast<int32_t>(j.num()));
    return out;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse() {
    ws();
    const char c = s_.at(p_);
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return Json{string()};
    if (s_.compare(p_, 4, "true") == 0) return p_ += 4, Json{true};
    if (s_.compare(p_, 5, "false") == 0) return p_ += 5, Json{false};
    if (s_.compare(p_, 4, "null") == 0) return p_ += 4, Json{nullptr};
    size_t used = 0;
    const double d = std::stod(s_.substr(p_, 32), &used);
    p_ += used;
    return Json{d};
  }

 private:
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\t' || s_[p_] == '\r')) ++p_;
  }
  Json object() {
    JsonObject o;
    ++p_;
    ws();
    if (s_[p_] == '}') return ++p_, Json{o};
    while (true) {
      ws();
      std::string k = string();
      ws();
      ++p_;  // ':'
      o.emplace(std::move(k), parse());
      ws();
      if (s_[p_++] == '}') return Json{o};
    }
  }
  Json array() {
    JsonArray a;
    ++p_;
    ws();
    if (s_[p_] == ']') return ++p_, Json{a};
    while (true) {
      a.push_back(parse());
      ws();
      if (s_[p_++] == ']') return Json{a};
    }
  }
  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::string string() {
    std::string out;
    ++p_;  // opening quote
    while (s_[p_] != '"') {
      char c = s_[p_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      c = s_[p_++];
      switch (c) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          uint32_t cp = std::stoul(s_.substr(p_, 4), nullptr, 16);
          p_ += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(p_, 2, "\\u") == 0) {
            const uint32_t lo = std::stoul(s_.substr(p_ + 2, 4), nullptr, 16);
            p_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          out += c;  // \" \\ \/
      }
    }
    ++p_;
    return out;
  }
  const std::string& s_;
  size_t p_ = 0;
};

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
  const Json meta = JsonParser(line).parse()["meta"];
  EXPECT_EQ(tok.n_vocab(), static_cast<int32_t>(meta["n_vocab"].num()));
  EXPECT_EQ(tok.bos_id(), static_cast<int32_t>(meta["bos"].num()));
  EXPECT_EQ(tok.eos_id(), static_cast<int32_t>(meta["eos"].num()));
  EXPECT_EQ(tok.eot_id(), static_cast<int32_t>(meta["eot"].num()));
  EXPECT_EQ(tok.add_bos_default(), meta["add_bos"].boolean());
  EXPECT_EQ(tok.eog_ids(), meta["eog"].ints());
  std::vector<int32_t> control;
  for (int32_t i = 0; i < tok.n_vocab(); ++i) {
    if (tok.is_special(i) && tok.token_type(i) != TokenType::kUnknown) control.push_back(i);
  }
  EXPECT_EQ(control, meta["control"].ints());

  int n = 0, ok = 0, roundtrip = 0;
  double encode_s = 0;
  while (std::getline(in, line)) {
    const Json g = JsonParser(line).parse();
    const std::string text = from_hex(g["hex"].str());
    const auto t1 = std::chrono::steady_clock::now();
    const auto special = tok.encode(text, false, true);
    const auto plain = tok.encode(text, false, false);
    const auto with_bos = tok.encode(text, tok.add_bos_default(), true);
    encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const std::string detok_special = tok.decode(special, true);
    const std::string detok_plain = tok.decode(plain, false);
    const bool all = special == g["special"].ints() && plain == g["plain"].ints() &&
                     with_bos == g["bos"].ints() && detok_special == from_hex(g["detok_special_hex"].str()) &&
                     detok_plain == from_hex(g["detok_plain_hex"].str());
    EXPECT_EQ(special, g["special"].ints()) << "#" << g["i"].num() << " " << printable(text);
    EXPECT_EQ(plain, g["plain"].ints()) << "#" << g["i"].num() << " " << printable(text);
    EXPECT_EQ(with_bos, g["bos"].ints()) << "#" << g["i"].num() << " " << printable(text);
    EXPECT_EQ(printable(detok_special), printable(from_hex(g["detok_special_hex"].str())))
        << "#" << g["i"].num();
    EXPECT_EQ(printable(detok_plain), printable(from_hex(g["detok_plain_hex"].str()))) << "#" << g["i"].num();
    // Wherever llama.cpp round-trips, so must we (implied by the equalities above; counted here).
    if (from_hex(g["detok_special_hex"].str()) == text) {
      ++roundtrip;
      EXPECT_EQ(printable(detok_special), printable(text));
    }
    ++n;
    ok += all;
  }
  std::printf("[%s] %d/%d corpus strings identical to llama.cpp (%d round-trip exactly), encode %.1f ms\n",
              mc.name, ok, n, roundtrip, encode_s * 1e3);
  EXPECT_EQ(n, static_cast<int>(meta["corpus_size"].num()));
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
    const Json g = JsonParser(line).parse();
    std::vector<ChatMessage> msgs;
    for (const Json& m : std::get<JsonArray>(g["messages"].v))
      msgs.push_back({m["role"].str(), m["content"].str()});
    auto text = apply_chat_template(tok, msgs, g["add_generation_prompt"].boolean());
    ASSERT_TRUE(text.ok()) << text.error();
    EXPECT_EQ(text.value(), g["text"].str());
    EXPECT_EQ(tok.encode(text.value(), tok.add_bos_default(), true), g["ids"].ints()) << g["text"].str();
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
