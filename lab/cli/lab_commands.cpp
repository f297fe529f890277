// Registers the lab's subcommands into the agentkv binary (src/cli/command_registry.h): linked as
// object files, so the registrar below is never dropped by the linker.
#include "lab/cli/lab_commands.h"

#include "cli/command_registry.h"

namespace agentkv {
namespace {

const CliCommandRegistrar kLabCommands{
    {"bench-serve", cmd_bench_serve, "closed-loop HTTP clients against serve: req/s, tok/s, TTFT, latency"},
    {"bench-agents", cmd_bench_agents, "multi-agent workloads on the engine: prefill, latency, KV per agent"},
    {"fit-prm", cmd_fit_prm, "fit the KV-PRM verify probe on checked arithmetic steps"},
    {"search", cmd_search, "best-of-N or step beam search on held-out arithmetic problems with a PRM, log-prob or vote"},
    {"bench-prm", cmd_bench_prm, "KV-PRM vs text PRM: scoring latency, counted flops and KV bytes vs trajectory length"},
    {"fit-transfer", cmd_fit_transfer, "fit a cross-model KV transfer map on a calibration corpus"},
    {"refine-transfer", cmd_refine_transfer, "refine a transfer map by the receiver's continuation loss over transferred K/V"},
    {"transfer-quality", cmd_transfer_quality, "receiver NLL with a transferred context vs native prefill vs none"},
    {"transfer-retrieval", cmd_transfer_retrieval, "verse retrieval accuracy: transferred context vs native prefill vs none"},
    {"chat-quality", cmd_chat_quality, "chat sharing's served path against exact prefill at several R (KL, top-1, greedy)"},
    {"bench-transfer", cmd_bench_transfer, "time to first token: transferred context vs native prefill, by length"},
};

}  // namespace
}  // namespace agentkv
