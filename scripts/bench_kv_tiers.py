#!/usr/bin/env python3
"""Restore vs prefill through `agentkv serve`, per 1k prompt tokens (issue 18's report): for each model a
redis-server on loopback (started and stopped here) and two servers with a small KV budget, A with a disk
tier (--kv-disk, a temporary directory) and both pointed at the Redis (--kv-redis). For each of --prompts
distinct prompts of ~--tokens tokens, the time of a 1-token completion when the prompt is
  - prefilled: never seen (on A);
  - a RAM hit: sent again at once (on A; its full blocks are in the prefix cache);
  - restored from Redis: sent to B, which never saw it (A wrote its blocks to Redis when it computed them);
  - restored from disk: sent again to A after other prompts pushed its blocks out of A's RAM.
Each condition's cached_tokens and the tiers' /metrics are checked, so a figure is only printed for what it
claims to measure. Prints a Markdown table (median over the prompts) and the bytes of one block's record
on disk and in Redis (what crosses the wire per block).

  scripts/bench_kv_tiers.py --agentkv build/agentkv [--models smollm2 gemma3] [--tokens 1024] [--prompts 5]
"""
import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import group_chat  # noqa: E402

WORDS = ("river stone lantern harvest mill ford cart barley orchard meadow ledger copper weaver shepherd "
         "bridge tower market candle thread anchor rope salt timber cellar forge spindle kettle").split()


def start(binary, model, kv_mem, threads, tier_args):
    proc, url = group_chat.start_server(binary, model, ["--kv-mem", kv_mem, "-t", str(threads), "--round-sharing", "off",
                                                        "--chat-sharing", "off", *tier_args], log=lambda *_: None)
    return proc, int(url.rsplit(":", 1)[1].split("/")[0])


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out["usage"]


def tier(port, model, name, which="disk"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    m = re.search(r'^%s\{model="%s",tier="%s"\} (\S+)$' % (name, re.escape(model), which), text, re.M)
    return float(m.group(1)) if m else 0.0


def settle(port, model, which):
    """The writers are asynchronous (and a lookup also finds a block still in its queue): waits until the
    tier's write count has held still for half a second, so a restore reads the tier itself."""
    last, still = -1.0, 0
    while still < 5:
        now = tier(port, model, "agentkv_kv_tier_writes_total", which)
        still = still + 1 if now == last else 0
        last = now
        time.sleep(0.1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(workdir):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    sys.exit("redis-server did not start")


def redis_record_bytes(port):
    """The size of one block's record in Redis (redis-cli, Debian's redis-tools)."""
    keys = subprocess.run(["redis-cli", "-p", str(port), "--scan", "--pattern", "agentkv:*"],
                          capture_output=True, text=True, check=True).stdout.split()
    sizes = [int(subprocess.run(["redis-cli", "-p", str(port), "STRLEN", k], capture_output=True, text=True,
                                check=True).stdout) for k in keys[:10]]
    return statistics.median(sizes) if sizes else 0


def text_of(seed, n_words):
    rng = random.Random(seed)
    return f"Record {seed}: " + " ".join(rng.choice(WORDS) for _ in range(n_words))


def bench(binary, model, n_tokens, n_prompts, threads):
    out = {"prefill": [], "ram": [], "redis": [], "disk": []}
    with tempfile.TemporaryDirectory() as tier_dir:
        redis, redis_port = start_redis(tier_dir)
        procs = []
        try:
            # Room for about two prompts: four other prompts push one out of RAM.
            redis_args = ["--kv-redis", f"127.0.0.1:{redis_port}", "--kv-redis-timeout-ms", "1000"]
            a, port = start(binary, model, "48M", threads, ["--kv-disk", tier_dir, *redis_args])
            procs.append(a)
            b, port_b = start(binary, model, "48M", threads, redis_args)
            procs.append(b)
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
                settle(port, model, "redis")
                hits = tier(port_b, model, "agentkv_kv_tier_hits_total", "redis")
                dt, u = post(port_b, body)
                restored = tier(port_b, model, "agentkv_kv_tier_hits_total", "redis") - hits
                assert restored >= n // 16 - 1 and u["prompt_tokens_details"]["cached_tokens"] >= n - 16, (restored, u)
                out["redis"].append(dt * 1000 / n)
                for j in range(1, 5):
                    post(port, {"model": model, "prompt": text_of(1000 * k + j, words), "max_tokens": 1})
                settle(port, model, "disk")
                hits = tier(port, model, "agentkv_kv_tier_hits_total")
                dt, u = post(port, body)
                restored = tier(port, model, "agentkv_kv_tier_hits_total") - hits
                assert restored >= n // 16 - 1 and u["prompt_tokens_details"]["cached_tokens"] >= n - 16, (restored, u)
                out["disk"].append(dt * 1000 / n)
                out["n_tokens"] = n
            out["redis_bytes_per_block"] = redis_record_bytes(redis_port)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
            redis.terminate()
            redis.wait(timeout=60)
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
    print("| model | prompt tokens | prefill s/1k | RAM hit s/1k | Redis restore s/1k (other server) | "
          "disk restore s/1k | prefill / Redis | prefill / disk | bytes per block: disk, Redis |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in a.models:
        r = bench(a.agentkv, model, a.tokens, a.prompts, a.threads)
        p, ram, redis, disk = (statistics.median(r[k]) for k in ("prefill", "ram", "redis", "disk"))
        print(f"| {model} | {r['n_tokens']} | {p:.3f} | {ram:.3f} | {redis:.3f} | {disk:.3f} | {p / redis:.1f}x | "
              f"{p / disk:.1f}x | {int(r['bytes_per_block'])}, {int(r['redis_bytes_per_block'])} |", flush=True)


if __name__ == "__main__":
    main()
