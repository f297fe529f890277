#!/usr/bin/env python3
"""The main job of scripts/setup.sh: a short demo of what agentkv is for, on the real server.

Starts `agentkv serve -m smollm2` (round sharing on, so the server first certifies sharing on this
model with its quality gate: cached after the first start), creates four agents with resident
contexts, and runs three all-gather rounds: every agent reads the same block (a town crier's news,
then everyone's last answers) after its own persona and history. Per round it prints each agent's
answer and what the server computed: the prompt tokens of all agents, how many were reused (from the
agents' resident KV and the round's shared block, re-rotated to each agent's position) and how many
the KV collector recomputed. The last round is run again with "kv_sharing": false on forks of the
agents, so the two can be compared (the approximation is reported, never hidden).

usage: demo.py AGENTKV_BINARY          (stdlib only: the server speaks plain HTTP + JSON)
"""
import json
import re
import subprocess
import sys
import time
import urllib.request

PERSONAS = [
    ("Ada", "You are Ada, the village baker. You are cheerful and practical, and you talk about bread."),
    ("Bram", "You are Bram, the village smith. You are gruff, short-spoken and proud of your tools."),
    ("Cora", "You are Cora, the village healer. You are calm and careful and think of the sick first."),
    ("Dane", "You are Dane, the captain of the village guard. You think about safety and order."),
]
NEWS = ("Town crier: the old stone bridge over the river collapsed in last night's storm. The carts from "
        "the mill cannot cross, the market is tomorrow, and the ferryman asks two coins a crossing.")
INSTRUCTION = "Say in one or two sentences what you will do about it."


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def start(binary):
    print("demo: starting `agentkv serve -m smollm2` (the first start runs its KV-sharing quality gate)", flush=True)
    proc = subprocess.Popen([binary, "serve", "-m", "smollm2", "--port", "0", "--kv-mem", "512M"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 1800
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit(f"demo: error: the server exited early (rc={proc.poll()})")
        if "quality gate" in line:
            print("  " + line.strip().removeprefix("agentkv: "), flush=True)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    raise SystemExit("demo: error: the server did not start")


def show_round(title, r):
    print(f"\n== {title}")
    for a in r["answers"]:
        print(f"  {a['name']}: {a['message']['content'].strip()}")
    u, s = r["usage"], r["kv_sharing"]
    recomputed = s.get("recomputed_tokens", 0)
    computed = u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"] + recomputed
    print(f"  prompt tokens of all agents: {u['prompt_tokens']}; computed: {computed} "
          f"({100 * computed / max(1, u['prompt_tokens']):.0f}%); sharing: {s['mode']}", end="")
    if s["mode"] == "tokendance":
        print(f" ({s['agents']} agents share a {s['segment_tokens']}-token block, {recomputed} block tokens "
              f"recomputed in {s['collector_seconds'] * 1000:.0f} ms)")
    else:
        print(f" ({s.get('reason', '')})")
    return computed


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    proc, port = start(sys.argv[1])
    try:
        ids = [post(port, "/v1/agents", {"model": "smollm2", "name": n, "system": s})["id"] for n, s in PERSONAS]
        print(f"demo: {len(ids)} agents created, each with its persona prefilled once and kept resident")
        gen = {"max_tokens": 32, "temperature": 0}
        show_round("round 1: everyone reads the crier's news",
                   post(port, "/v1/rounds", {"agents": ids, "shared": NEWS, "instruction": INSTRUCTION, **gen}))
        show_round("round 2: everyone reads everyone's answers",
                   post(port, "/v1/rounds", {"agents": ids, "instruction": "Answer the others in one sentence.", **gen}))
        # Forks share the agents' KV blocks and history; the same names give the same shared block.
        forks = [post(port, f"/v1/agents/{i}/fork", {"name": n})["id"] for i, (n, _) in zip(ids, PERSONAS)]
        shared = post(port, "/v1/rounds", {"agents": ids, "instruction": "What happens next? One sentence.", **gen})
        c_shared = show_round("round 3, KV shared", shared)
        exact = post(port, "/v1/rounds", {"agents": forks, "instruction": "What happens next? One sentence.",
                                          "kv_sharing": False, **gen})
        c_exact = show_round("round 3 again on forks of the agents, every copy of the block computed exactly", exact)
        same = sum(a["message"]["content"] == b["message"]["content"] for a, b in zip(shared["answers"], exact["answers"]))
        print(f"\ndemo: round 3 computed {c_shared} prompt tokens with sharing and {c_exact} without; "
              f"{same} of {len(ids)} answers are word for word the same (sharing is approximate: the server's "
              f"quality gate measured it against exact prefill before allowing it)")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
