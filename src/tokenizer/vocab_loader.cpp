#include "tokenizer/vocab_loader.h"

#include "gguf/gguf_file.h"

namespace agentkv {

Result<VocabData> load_vocab(const GgufFile& f) {
  VocabData v;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model.ok()) return make_error(model.code(), "load_vocab: " + model.error());
  v.model = model.value();
  v.pre = f.get_string_or("tokenizer.ggml.pre", "default");
  v.architecture = f.get_string_or("general.architecture", "");
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return make_error(tokens.code(), "load_vocab: " + tokens.error());
  v.tokens = std::move(tokens).value();
  if (f.has("tokenizer.ggml.scores")) {
    auto scores = f.get_float_array("tokenizer.ggml.scores");
    if (!scores.ok()) return make_error(scores.code(), "load_vocab: " + scores.error());
    v.scores = std::move(scores).value();
  }
  if (f.has("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types.ok()) return make_error(types.code(), "load_vocab: " + types.error());
    v.token_types = std::move(types).value();
  }
  if (f.has("tokenizer.ggml.merges")) {
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return make_error(merges.code(), "load_vocab: " + merges.error());
    v.merges = std::move(merges).value();
  }
  // Defaults for absent ids are llama.cpp's, per tokenizer model.
  int64_t bos = -1, eos = -1, unk = -1;
  if (v.model == "llama") {
    bos = 1, eos = 2, unk = 0;
  } else if (v.model == "gpt2") {
    bos = 11, eos = 11;
    if (v.merges.empty()) return make_error("load_vocab: gpt2 tokenizer without tokenizer.ggml.merges");
  }
  v.bos = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.bos_token_id", bos));
  v.eos = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.eos_token_id", eos));
  v.eot = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.eot_token_id", -1));
  v.unk = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.unknown_token_id", unk));
  v.pad = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.padding_token_id", -1));
  const bool spm = v.model == "llama";
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", spm || is_llama3_pre(v.pre));
  v.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
  v.chat_template = f.get_string_or("tokenizer.chat_template", "");
  return v;
}

}  // namespace agentkv
