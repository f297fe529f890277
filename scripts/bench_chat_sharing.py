#!/usr/bin/env python3
"""Benchmark of chat KV sharing (issue 14) for BENCHMARKS.md: N-agent round-robin group chats through
`agentkv serve` with the official openai client (scripts/group_chat.py), sharing on vs off, on each
model, each run on a freshly started server (a second run on one server would be helped by the first
one's caches). Prints, per model and agent count: prefill tokens computed, prompt and cached tokens,
TTFT p50/p99, turn latency p50/p99, KV held at the end, wall time, and how many replies are the same as
the exact path's before the first difference; then the served path's quality against exact prefill
at several R (`agentkv chat-quality`). Writes everything as JSON with --json.

usage: bench_chat_sharing.py [--agentkv build/agentkv] [--models smollm2,gemma3] [--agents 8,32]
       [--turns-per-agent 3] [--kv-mem 2G] [--ratios 0,0.05,0.15,0.3,0.5,1] [--chat-compact on|off|both]
       [--json FILE]        (--ratios "": no chat-quality run)
Run it under the project's venv (~/.cache/agentkv/venv/bin/python), which has the openai client.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import group_chat  # noqa: E402


def roles_for(model):
    # Gemma's chat template wants user/assistant alternation; the others take all-user transcripts.
    return "alternating" if model.startswith("gemma") else "user"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agentkv", default="build/agentkv")
    p.add_argument("--models", default="smollm2,gemma3")
    p.add_argument("--agents", default="8,32")
    p.add_argument("--turns-per-agent", type=int, default=3)
    p.add_argument("--kv-mem", default="2G")
    p.add_argument("--ratios", default="0,0.05,0.15,0.3,0.5,1")
    p.add_argument("--chat-compact", choices=("on", "off", "both"), default="on",
                   help="the sharing servers' --chat-compact: blended chat contexts kept as master + diff, or "
                        "dense; both: one sharing run of each (the second reported as \"on_dense\")")
    p.add_argument("--json", metavar="FILE")
    a = p.parse_args()
    out = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores", "runs": []}
    for model in a.models.split(","):
        for n in [int(x) for x in a.agents.split(",")]:
            turns = n * a.turns_per_agent
            res = {}
            runs = {"on": ("on", "off" if a.chat_compact == "off" else "on"), "off": ("off", "on")}
            if a.chat_compact == "both":
                runs["on_dense"] = ("on", "off")
            for mode, (sharing, compact) in runs.items():
                proc, url = group_chat.start_server(a.agentkv, model, ["--kv-mem", a.kv_mem, "--chat-sharing", sharing,
                                                                             "--chat-compact", compact],
                                                    log=lambda line: print(line, file=sys.stderr, flush=True))
                try:
                    res[mode] = group_chat.run(url, model, n, turns, kv_sharing=(sharing == "on"), roles=roles_for(model))
                finally:
                    group_chat.stop_server(proc)
            on, off = res["on"], res["off"]
            pairs = list(zip(on["chats"][0]["replies"], off["chats"][0]["replies"]))
            same = next((t for t, (x, y) in enumerate(pairs) if x != y), len(pairs))
            row = {"model": model, "agents": n, "turns": turns, "same_replies_before_first_difference": same}
            for mode, r in res.items():
                row[mode] = {k: r[k] for k in ("prompt_tokens", "prefill_computed", "cached_tokens", "shared_tokens",
                                               "recomputed_tokens", "ttft_p50_s", "ttft_p99_s", "turn_p50_s",
                                               "turn_p99_s", "kv_blocks_used_end", "kv_bytes_end", "wall_s",
                                               "segment_blocks_end", "segment_compact_end", "segment_diff_blocks_end")}
                row[mode]["replies"] = r["chats"][0]["replies"]
            row["prefill_ratio"] = on["prefill_computed"] / max(1.0, off["prefill_computed"])
            if "on_dense" in res:
                row["compact_replies_identical_to_dense"] = row["on"]["replies"] == row["on_dense"]["replies"]
            out["runs"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in res} |
                             {m: {k: v for k, v in row[m].items() if k != "replies"} for m in res}), flush=True)
        if not a.ratios:
            continue
        q = subprocess.run([a.agentkv, "chat-quality", "-m", model, "--recompute", a.ratios],
                           capture_output=True, text=True, check=True)
        out.setdefault("quality", {})[model] = q.stdout
        print(f"chat-quality {model}:\n{q.stdout}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
