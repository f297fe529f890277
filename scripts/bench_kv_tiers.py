#!/usr/bin/env python3
"""Restore vs prefill through `agentkv serve`, per 1k prompt tokens (issue 18's report): for each model a
server with a small KV budget and a disk tier (--kv-disk) in a temporary directory, and for each of
--prompts distinct prompts of ~--tokens tokens, the time of a 1-token completion when the prompt is
  - prefilled: never seen;
  - a RAM hit: sent again at once (its full blocks are in the prefix cache);
  - restored from disk: sent again after other prompts pushed its blocks out of RAM.
Each condition's cached_tokens and the tier's /metrics are checked, so a figure is only printed for what it
claims to measure. Prints a Markdown table (median over the prompts) and the bytes per block on disk.

  scripts/bench_kv_tiers.py --agentkv build/agentkv [--models smollm2 gemma3] [--tokens 1024] [--prompts 5]
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

WORDS = ("river stone lantern harvest mill ford cart barley orchard meadow ledger copper weaver shepherd "
         "bridge tower market candle thread anchor rope salt timber cellar forge spindle kettle").split()


def start(binary, model, kv_mem, tier_dir, threads):
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "--kv-mem", kv_mem, "-t", str(threads),
                             "--round-sharing", "off", "--kv-disk", tier_dir], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            sys.exit(f"agentkv serve exited early (rc={proc.poll()})")
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    sys.exit("agentkv serve did not report its port")


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out["usage"]


def tier(port, model, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    m = re.search(r'^%s\{model="%s",tier="disk"\} (\S+)$' % (name, re.escape(model)), text, re.M)
    return float(m.group(1)) if m else 0.0


def text_of(seed, n_words):
    rng = random.Random(seed)
    return f"Record {seed}: " + " ".join(rng.choice(WORDS) for _ in range(n_words))


def bench(binary, model, n_tokens, n_prompts, threads):
    out = {"prefill": [], "ram": [], "disk": []}
    with tempfile.TemporaryDirectory() as tier_dir:
        # Room for about two prompts: four other prompts push one out of RAM.
        proc, port = start(binary, model, "48M", tier_dir, threads)
        try:
            words = int(n_tokens * 0.8)  # about 1.25 tokens per word with both tokenizers on this text
            for k in range(n_prompts):
                prompt = text_of(1000 * k, words)
                body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
                dt, u = post(port, body)
                assert u["prompt_tokens_details"]["cached_tokens"] == 0
                n = u["prompt_tokens"]
                out["prefill"].append(dt * 1000 / n)
                dt, u = post(port, body)
                assert u["prompt_tokens_details"]["cached_tokens"] >= n - 16, u
                out["ram"].append(dt * 1000 / n)
                for j in range(1, 5):
                    post(port, {"model": model, "prompt": text_of(1000 * k + j, words), "max_tokens": 1})
                # The writer is asynchronous (and a lookup also finds a block still in its queue): wait
                # until the write count has held still for half a second, so the restore reads files.
                last, still = -1.0, 0
                while still < 5:
                    now = tier(port, model, "agentkv_kv_tier_writes_total")
                    still = still + 1 if now == last else 0
                    last = now
                    time.sleep(0.1)
                hits = tier(port, model, "agentkv_kv_tier_hits_total")
                dt, u = post(port, body)
                restored = tier(port, model, "agentkv_kv_tier_hits_total") - hits
                assert restored >= n // 16 - 1 and u["prompt_tokens_details"]["cached_tokens"] >= n - 16, (restored, u)
                out["disk"].append(dt * 1000 / n)
                out["n_tokens"] = n
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            files = [os.path.join(tier_dir, f) for f in os.listdir(tier_dir) if f.endswith(".kvblock")]
            out["bytes_per_block"] = statistics.median(os.path.getsize(f) for f in files) if files else 0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agentkv", default="build/agentkv", help="the agentkv binary")
    ap.add_argument("--models", nargs="+", default=["smollm2", "gemma3"])
    ap.add_argument("--tokens", type=int, default=1024, help="approximate prompt length")
    ap.add_argument("--prompts", type=int, default=5, help="distinct prompts per model (median reported)")
    ap.add_argument("-t", "--threads", type=int, default=0, help="server threads (0: all cores)")
    a = ap.parse_args()
    print("| model | prompt tokens | prefill s/1k | RAM hit s/1k | disk restore s/1k | prefill / disk | bytes per block (disk) |")
    print("|---|---|---|---|---|---|---|")
    for model in a.models:
        r = bench(a.agentkv, model, a.tokens, a.prompts, a.threads)
        p, ram, disk = (statistics.median(r[k]) for k in ("prefill", "ram", "disk"))
        print(f"| {model} | {r['n_tokens']} | {p:.3f} | {ram:.3f} | {disk:.3f} | {p / disk:.1f}x | "
              f"{int(r['bytes_per_block'])} |", flush=True)


if __name__ == "__main__":
    main()
