#include <cstdio>
#include <sstream>

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
  // The whole input first (a file through read_text_file, stdin up to the same bound), so a wrong
  // path is refused before the model loads and nothing is read without bound.
  std::string input;
  if (jsonl != "-") {
    auto read = read_text_file(jsonl, "--jsonl");
    if (!read.ok()) return cli_fail(read.error());
    input = std::move(*read);
  } else {
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
      input.append(buf, n);
      if (int64_t(input.size()) > kMaxTextInputBytes)
        return cli_fail("--jsonl -: stdin holds more than " + std::to_string(kMaxTextInputBytes) + " bytes");
    }
  }
  std::istringstream in(input);
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const Tokenizer& tok = *(*lm)->tokenizer;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
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
