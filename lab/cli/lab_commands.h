// The lab's agentkv subcommands: fitting (transfer maps, the PRM probe), evaluation (transfer
// quality and retrieval, search) and benchmark harnesses (multi-agent workloads, the server under
// load, KV-PRM scoring, transfer TTFT). Same conventions as the product's (cli/commands.h).
#pragma once

namespace agentkv {

int cmd_bench_agents(int argc, char** argv);
int cmd_bench_serve(int argc, char** argv);
int cmd_fit_prm(int argc, char** argv);
int cmd_search(int argc, char** argv);
int cmd_bench_prm(int argc, char** argv);
int cmd_fit_transfer(int argc, char** argv);
int cmd_refine_transfer(int argc, char** argv);
int cmd_transfer_quality(int argc, char** argv);
int cmd_transfer_retrieval(int argc, char** argv);
int cmd_bench_transfer(int argc, char** argv);
int cmd_chat_quality(int argc, char** argv);

}  // namespace agentkv
