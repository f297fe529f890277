// agentkv kv-save: a model prefills a context and writes its cache as a file
// (src/transfer/kv_cache_file.h), the sender side of a transfer across processes.
#include <cstdio>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "transfer/kv_cache_file.h"
#include "kv/direct_prefill.h"

namespace agentkv {

int cmd_kv_save(int argc, char** argv) {
  std::string model, context_path, out;
  int64_t threads = 0;
  ArgParser p("kv-save", "Prefill a context and write the model's KV cache for it to a file.");
  p.add_string("-m,--model", &model, "model alias or .gguf path", true);
  p.add_string("--context", &context_path, "file whose whole text is the context", true);
  p.add_string("--out", &out, "cache file to write (.gguf)", true);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto read = read_text_file(context_path, "--context");
  if (!read.ok()) return cli_fail(read.error());
  const std::string text = std::move(*read);
  if (text.empty()) return cli_fail("context '" + context_path + "' is empty");
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const std::vector<int32_t> tokens = (*lm)->tokenizer->encode(text, (*lm)->tokenizer->add_bos_default(), false);
  auto kv = private_kv_manager(**lm, int64_t(tokens.size()) + 64, 16);
  if (!kv.ok()) return cli_fail(kv.error());
  ThreadPool pool{int(threads)};
  KvSequence seq(**kv);
  if (auto st = prefill_sequence(*(*lm)->model, **kv, seq, tokens, pool); !st.ok()) return cli_fail(st.error());
  if (auto st = save_kv_cache_file(out, **lm, **kv, seq, text); !st.ok()) return cli_fail(st.error());
  std::printf("wrote %s: %s cache of %lld tokens\n", out.c_str(), (*lm)->name.c_str(), (long long)seq.n_tokens());
  return 0;
}

}  // namespace agentkv
