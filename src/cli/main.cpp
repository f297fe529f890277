// agentkv: serve many LLM agents at once and move KV caches between them.
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"generate", agentkv::cmd_generate, "complete a prompt (or a chat turn with --chat)"},
    {"tokenize", agentkv::cmd_tokenize, "tokenize JSON strings, one per line"},
    {"perplexity", agentkv::cmd_perplexity, "perplexity of a text file, as llama-perplexity computes it"},
    {"bench", agentkv::cmd_bench, "prefill and decode throughput as JSON"},
    {"serve", agentkv::cmd_serve, "OpenAI-compatible HTTP server for one or more models"},
    {"bench-serve", agentkv::cmd_bench_serve, "closed-loop HTTP clients against serve: req/s, tok/s, TTFT, latency"},
    {"bench-agents", agentkv::cmd_bench_agents, "multi-agent workloads on the engine: prefill, latency, KV per agent"},
    {"fit-prm", agentkv::cmd_fit_prm, "fit the KV-PRM verify probe on checked arithmetic steps"},
    {"search", agentkv::cmd_search, "best-of-N or step beam search on held-out arithmetic problems with a PRM, log-prob or vote"},
    {"bench-prm", agentkv::cmd_bench_prm, "KV-PRM vs text PRM: scoring latency, counted flops and KV bytes vs trajectory length"},
    {"inspect", agentkv::cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"fit-transfer", agentkv::cmd_fit_transfer, "fit a cross-model KV transfer map on a calibration corpus"},
    {"transfer-quality", agentkv::cmd_transfer_quality, "receiver NLL with a transferred context vs native prefill vs none"},
    {"transfer-retrieval", agentkv::cmd_transfer_retrieval, "verse retrieval accuracy: transferred context vs native prefill vs none"},
    {"kv-save", agentkv::cmd_kv_save, "prefill a context and write the model's KV cache to a file"},
    {"transfer-generate", agentkv::cmd_transfer_generate, "load a sender's cache file, transfer it, generate from it"},
    {"bench-transfer", agentkv::cmd_bench_transfer, "time to first token: transferred context vs native prefill, by length"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: agentkv <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
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
  for (const Command& c : kCommands) {
    if (!std::strcmp(argv[1], c.name)) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::bad_alloc&) {
        return agentkv::cli_fail("out of memory");
      } catch (const std::exception& e) {
        return agentkv::cli_fail(e.what());
      }
    }
  }
  return agentkv::cli_fail(std::string("unknown command '") + argv[1] + "' (run agentkv --help)");
}
