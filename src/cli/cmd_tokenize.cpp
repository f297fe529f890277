#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "model/loaded_model.h"
#include "util/json.h"

namespace agentkv {

int cmd_tokenize(int argc, char** argv) {
  std::string model = "smollm2", jsonl;
  bool bos = false, special = false;
  ArgParser p("tokenize", "Reads one JSON string per line and prints one JSON array of token ids per line.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--jsonl", &jsonl, "input file, one JSON string per line ('-' = stdin)", true);
  p.add_flag("--bos", &bos, "prepend BOS when the model uses one");
  p.add_flag("--special", &special, "parse special-token text (e.g. <|im_start|>) into special ids");
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (jsonl != "-") {
    file.open(jsonl, std::ios::binary);
    if (!file) return cli_fail("cannot open '" + jsonl + "'");
    in = &file;
  }
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const Tokenizer& tok = *(*lm)->tokenizer;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(*in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto j = parse_json(line);
    if (!j.ok()) return cli_fail(jsonl + ":" + std::to_string(line_no) + ": " + j.error());
    if (!j->is_string()) return cli_fail(jsonl + ":" + std::to_string(line_no) + ": expected a JSON string");
    const auto ids = tok.encode(j->get_ref<const std::string&>(), bos && tok.add_bos_default(), special);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::fputs(out.c_str(), stdout);
  }
  return 0;
}

}  // namespace agentkv
