#!/usr/bin/env python3
"""A round of many agents on one agentkv server vs two sharing KV through Redis (issue 18's report).

Every agent of the round reads the same shared history (a group chat's transcript, the system message)
and answers its own question (the user message), through /v1/chat/completions on the exact path
(--chat-sharing off: only exact prefix blocks are shared, in RAM and through Redis). The round is sent
the way a coordinator sends it: one agent first, then all the others at once (--clients concurrent
requests), each agent to its home server (crc32 of its name, what nginx's consistent hash does with
deploy/nginx-agentkv.conf.in). Configurations, each on fresh servers and a fresh redis-server (started
and stopped here, loopback):
  - 1 server with all --threads;
  - 2 servers, --threads split between them, sharing through Redis (--kv-redis);
  - 2 servers, the same split, without Redis (each computes the shared history itself).
Prints a Markdown table: the round's wall time, the prompt tokens the servers computed (from /metrics,
agentkv_tokens_prefilled_total), blocks restored from Redis, and every agent's reply checked equal
across configurations (greedy, exact path).

  scripts/bench_cluster_round.py --agentkv build/agentkv [--agents 200] [--model smollm2] [--threads 2]
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import group_chat  # noqa: E402

WORDS = ("river stone lantern harvest mill ford cart barley orchard meadow ledger copper weaver shepherd "
         "bridge tower market candle thread anchor rope salt timber cellar forge spindle kettle").split()
JOBS = ["baker", "smith", "teacher", "farmer", "doctor", "painter", "fisher", "tailor", "miller", "carpenter"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited early (rc={proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not listen on port {port}")


def start_server(binary, model, threads, extra):
    proc, url = group_chat.start_server(binary, model, ["--kv-mem", "1G", "-t", str(threads), "--round-sharing", "off",
                                                        "--chat-sharing", "off", *extra], log=lambda *_: None)
    return proc, int(url.rsplit(":", 1)[1].split("/")[0])


def metric(port, model, name, tier=None):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    labels = f'model="{model}"' + (f',tier="{tier}"' if tier else "")
    m = re.search(r"^%s\{%s\} (\S+)$" % (name, re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else 0.0


def transcript(n_lines):
    rng = random.Random(7)
    return "\n".join(f"Agent {i % 40}: " + " ".join(rng.choice(WORDS) for _ in range(14)) + "." for i in range(n_lines))


def chat(port, model, shared, agent):
    body = {"model": model, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "system", "content": "The village council's group chat so far:\n" + shared},
                         {"role": "user", "content": f"You are {agent}, the {JOBS[zlib.crc32(agent.encode()) % len(JOBS)]}. "
                                                     "What do you propose? One sentence."}]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        out = json.loads(r.read())
    return out["choices"][0]["message"]["content"], out["usage"]


def run(binary, model, n_servers, threads, use_redis, agents, shared, clients):
    with tempfile.TemporaryDirectory() as tmp:
        procs, ports = [], []
        redis = None
        try:
            extra = []
            if use_redis:
                rport = free_port()
                redis = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(rport), "--save", "",
                                          "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
                wait_port(rport, redis, "redis-server")
                extra = ["--kv-redis", f"127.0.0.1:{rport}", "--kv-redis-timeout-ms", "1000"]
            for _ in range(n_servers):
                proc, port = start_server(binary, model, max(1, threads // n_servers), extra)
                procs.append(proc)
                ports.append(port)
            home = {a: ports[zlib.crc32(a.encode()) % n_servers] for a in agents}
            before = [metric(p, model, "agentkv_tokens_prefilled_total") for p in ports]
            t0 = time.perf_counter()
            replies = {agents[0]: chat(home[agents[0]], model, shared, agents[0])}
            if use_redis:  # the first agent's blocks reach Redis in the background: the rest of the round follows
                deadline = time.time() + 60
                while sum(metric(p, model, "agentkv_kv_tier_writes_total", "redis") for p in ports) < \
                        replies[agents[0]][1]["prompt_tokens"] // 16 and time.time() < deadline:
                    time.sleep(0.01)
            with concurrent.futures.ThreadPoolExecutor(clients) as ex:
                futs = {a: ex.submit(chat, home[a], model, shared, a) for a in agents[1:]}
                replies.update({a: f.result() for a, f in futs.items()})
            wall = time.perf_counter() - t0
            prefilled = sum(metric(p, model, "agentkv_tokens_prefilled_total") for p in ports) - sum(before)
            hits = sum(metric(p, model, "agentkv_kv_tier_hits_total", "redis") for p in ports)
            prompt = sum(u["prompt_tokens"] for _, u in replies.values())
            return {"wall": wall, "prefilled": prefilled, "prompt": prompt, "redis_hits": hits,
                    "texts": {a: t for a, (t, _) in replies.items()},
                    "per_server": [sum(1 for a in agents if home[a] == p) for p in ports]}
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
            if redis:
                redis.terminate()
                redis.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agentkv", default="build/agentkv", help="the agentkv binary")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--agents", type=int, default=200)
    ap.add_argument("--lines", type=int, default=40, help="lines of shared history (~20 tokens each)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the one server, split over two")
    ap.add_argument("--clients", type=int, default=32, help="concurrent requests")
    a = ap.parse_args()
    agents = [f"Agent{i:03d}" for i in range(a.agents)]
    shared = transcript(a.lines)
    configs = [("1 server", 1, False), ("2 servers + Redis", 2, True), ("2 servers, no Redis", 2, False)]
    results = {}
    for name, n, redis in configs:
        results[name] = run(a.agentkv, a.model, n, a.threads, redis, agents, shared, a.clients)
        print(f"{name}: done in {results[name]['wall']:.1f} s", file=sys.stderr, flush=True)
    base = results["1 server"]["texts"]
    print(f"{a.agents} agents, {a.model}, {a.threads} threads in all, {a.clients} concurrent clients\n")
    print("| configuration | agents per server | prompt tokens | computed (prefilled) | blocks from Redis | "
          "round wall s | replies equal to 1 server |")
    print("|---|---|---|---|---|---|---|")
    for name, _, _ in configs:
        r = results[name]
        same = sum(r["texts"][x] == base[x] for x in agents)
        print(f"| {name} | {'/'.join(map(str, r['per_server']))} | {r['prompt']} | {int(r['prefilled'])} | "
              f"{int(r['redis_hits'])} | {r['wall']:.1f} | {same}/{len(agents)} |")


if __name__ == "__main__":
    main()
