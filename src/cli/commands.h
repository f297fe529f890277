// The agentkv subcommands. Each takes argv with argv[0] = the subcommand name and returns the exit code.
#pragma once

#include <string>
#include <vector>

namespace agentkv {

int cmd_generate(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_bench_agents(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_bench_serve(int argc, char** argv);
int cmd_fit_prm(int argc, char** argv);
int cmd_search(int argc, char** argv);

// "a,b,,c" -> {"a", "b", "c"}: list-valued options (--mode, serve's -m).
std::vector<std::string> split_commas(const std::string& s);

// Prints "agentkv: error: <msg>" as one line on stderr and returns 1.
int cli_fail(const std::string& msg);

}  // namespace agentkv
