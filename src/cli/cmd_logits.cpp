// `agentkv logits`: evaluates given token ids and writes every position's next-token logits as raw
// little-endian f32, so scripts (scripts/numerics_vs_llamacpp.py) can compare our forward pass with
// llama.cpp's on exactly the same ids, independently of the tokenizer. One sequence per input line,
// each in a fresh context, on the same SingleSequence path as generate and perplexity.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/single_sequence.h"

namespace agentkv {

int cmd_logits(int argc, char** argv) {
  std::string model = "smollm2", tokens_path, out_path;
  int64_t threads = 0;
  ArgParser p("logits", "Writes the logits of every position of token-id sequences (one per line) as raw f32.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--tokens", &tokens_path, "text file: whitespace-separated token ids, one sequence per line", true);
  p.add_string("-o,--output", &out_path, "output file: n_tokens x n_vocab f32 per sequence, concatenated", true);
  p.add_int("-t,--threads", &threads, "threads (0 = all cores)", 0, 1024);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  std::ifstream in(tokens_path);
  if (!in) return cli_fail("cannot open --tokens '" + tokens_path + "'");
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const int n_vocab = (*lm)->config().n_vocab;
  FILE* out = std::fopen(out_path.c_str(), "wb");
  if (!out) return cli_fail("cannot write --output '" + out_path + "'");
  ThreadPool pool{int(threads)};
  std::string line;
  std::vector<float> logits;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int64_t id; ls >> id;) {
      if (id < 0 || id >= n_vocab) return std::fclose(out), cli_fail("--tokens line " + std::to_string(line_no) + ": id out of range");
      ids.push_back(int32_t(id));
    }
    if (ids.empty()) continue;
    SingleSequence seq(*(*lm)->model, int(ids.size()));
    if (Status st = seq.eval(ids, 0, logits, pool); !st.ok()) return std::fclose(out), cli_fail(st.error());
    if (std::fwrite(logits.data(), sizeof(float), logits.size(), out) != logits.size()) {
      return std::fclose(out), cli_fail("short write to --output '" + out_path + "'");
    }
  }
  return std::fclose(out) == 0 ? 0 : cli_fail("cannot close --output '" + out_path + "'");
}

}  // namespace agentkv
