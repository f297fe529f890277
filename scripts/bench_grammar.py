#!/usr/bin/env python3
"""The cost of constrained decoding per generated token, on each model: JSON-schema answers
(chat.completions.parse with the pydantic models of tests/e2e/structured_e2e.py) and tool calls
(tool_choice required), greedy and sampled (temperature 0.8: every token takes a full mask, the
worst case), one client at a time against `agentkv serve`.

From the server's own counters (/metrics), per mode: agentkv_grammar_seconds_total over
agentkv_grammar_tokens_total (masks, checks and advancing the grammar: the whole cost), against the
mean time between tokens (agentkv_inter_token_latency_seconds), which includes it.

    ~/.cache/agentkv/venv/bin/python scripts/bench_grammar.py [--agentkv build/agentkv] [--models smollm2 gemma3]
Prints a Markdown table (BENCHMARKS.md, "Constrained decoding")."""
import argparse
import os
import re
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))

import http_raw  # noqa: E402
from openai import OpenAI  # noqa: E402
from structured_e2e import PROMPTS, SCHEMAS, TOOL_PROMPTS, TOOLS  # noqa: E402


def metrics(port, model):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    want = {"agentkv_grammar_seconds_total": "g_s", "agentkv_grammar_tokens_total": "g_n",
            "agentkv_inter_token_latency_seconds_sum": "it_s", "agentkv_inter_token_latency_seconds_count": "it_n"}
    out = {}
    for line in text.splitlines():
        m = re.match(r'(\w+)\{model="([^"]+)"[^}]*\} (\S+)', line)
        if m and m.group(2) == model and m.group(1) in want:
            out[want[m.group(1)]] = float(m.group(3))
    return out


def run_mode(client, port, model, mode, temperature, n_prompts):
    before = metrics(port, model)
    t0 = time.time()
    for i in range(n_prompts):
        if mode == "json_schema":
            schema = SCHEMAS[i % len(SCHEMAS)]
            client.chat.completions.parse(model=model, messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                                          response_format=schema, temperature=temperature, seed=i, max_tokens=400)
        else:
            client.chat.completions.create(model=model, tools=TOOLS, tool_choice="required", temperature=temperature,
                                           seed=i, max_tokens=400,
                                           messages=[{"role": "user", "content": TOOL_PROMPTS[i % len(TOOL_PROMPTS)]}])
    wall = time.time() - t0
    after = metrics(port, model)
    d = {k: after[k] - before.get(k, 0) for k in after}
    per_tok_us = 1e6 * d["g_s"] / max(d["g_n"], 1)
    decode_us = 1e6 * d["it_s"] / max(d["it_n"], 1)
    return {"tokens": int(d["g_n"]), "grammar_us": per_tok_us, "decode_us": decode_us,
            "share": per_tok_us / decode_us if decode_us else 0.0, "wall": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agentkv", default=os.path.join(HERE, "..", "build", "agentkv"))
    ap.add_argument("--models", nargs="+", default=["smollm2", "gemma3"])
    ap.add_argument("--prompts", type=int, default=12, help="requests per mode (default 12)")
    args = ap.parse_args()
    rows = []
    for model in args.models:
        proc, port = http_raw.start_server(os.path.abspath(args.agentkv), models=(model,), kv_mem="512M")
        try:
            client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
            for mode in ("json_schema", "tool_call"):
                for temperature in (0.0, 0.8):
                    r = run_mode(client, port, model, mode, temperature, args.prompts)
                    rows.append((model, mode, temperature, r))
                    print(f"{model} {mode} T={temperature}: {r}", file=sys.stderr)
        finally:
            http_raw.stop_server(proc)
    print("| model | answers | sampling | tokens | grammar µs/token | time between tokens µs | grammar share |")
    print("|---|---|---|---:|---:|---:|---:|")
    for model, mode, temperature, r in rows:
        sampling = "greedy" if temperature == 0 else f"T = {temperature}"
        print(f"| {model} | {mode.replace('_', ' ')} | {sampling} | {r['tokens']} | {r['grammar_us']:.1f} | "
              f"{r['decode_us']:.0f} | {100 * r['share']:.2f}% |")


if __name__ == "__main__":
    main()
