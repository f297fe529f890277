// agentkv: serve many LLM agents at once and move KV caches between them.
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>

#include "cli/command_registry.h"
#include "cli/commands.h"

namespace {

using agentkv::CliCommand;

// The product's commands; the lab's are registered (cli/command_registry.h) and listed after them.
constexpr CliCommand kCommands[] = {
    {"generate", agentkv::cmd_generate, "complete a prompt (or a chat turn with --chat)"},
    {"tokenize", agentkv::cmd_tokenize, "tokenize JSON strings, one per line"},
    {"perplexity", agentkv::cmd_perplexity, "perplexity of a text file, as llama-perplexity computes it"},
    {"logits", agentkv::cmd_logits, "raw f32 logits of every position of token-id sequences"},
    {"bench", agentkv::cmd_bench, "prefill and decode throughput as JSON"},
    {"serve", agentkv::cmd_serve, "OpenAI-compatible HTTP server for one or more models"},
    {"inspect", agentkv::cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"kv-save", agentkv::cmd_kv_save, "prefill a context and write the model's KV cache to a file"},
    {"transfer-generate", agentkv::cmd_transfer_generate, "load a sender's cache file, transfer it, generate from it"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: agentkv <command> [options]\n\ncommands:\n");
  for (const CliCommand& c : kCommands) std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
  if (!agentkv::registered_commands().empty()) {
    std::fprintf(out, "\nlab commands (fitting, evaluation and benchmark harnesses):\n");
    for (const CliCommand& c : agentkv::registered_commands()) std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
  }
  std::fprintf(out, "\nagentkv <command> --help shows a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 1;
  }
  if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  const auto find = [&](std::span<const CliCommand> table) -> const CliCommand* {
    for (const CliCommand& c : table)
      if (!std::strcmp(argv[1], c.name)) return &c;
    return nullptr;
  };
  const CliCommand* c = find(kCommands);
  if (!c) c = find(agentkv::registered_commands());
  if (!c) return agentkv::cli_fail(std::string("unknown command '") + argv[1] + "' (run agentkv --help)");
  try {
    return c->run(argc - 1, argv + 1);
  } catch (const std::bad_alloc&) {
    return agentkv::cli_fail("out of memory");
  } catch (const std::exception& e) {
    return agentkv::cli_fail(e.what());
  }
}
