#!/usr/bin/env python3
"""The main job of scripts/setup.sh: a short demo of what agentkv is for, on the real server.

An 8-agent group chat of 24 turns, the traffic multi-agent frameworks send through plain
/v1/chat/completions: every request is the speaker's own persona (system prompt) followed by the same
transcript of everyone's messages (scripts/group_chat.py, through the official openai client). A
server with prefix caching only (vLLM, llama.cpp, agentkv with sharing off) recomputes every message
the other agents wrote since the speaker's last turn, because it sits at a new position after a
different prefix. agentkv's chat KV sharing reuses the KV of those messages where it already exists,
re-rotated to the new position, and recomputes only the share of tokens that deviate most.

The chat runs twice, each time on a freshly started `agentkv serve -m smollm2` (a second run on the same
server would be helped by the first one's caches): sharing on, then off (the exact path). It prints
the prefill tokens each computed, the time to first token, the wall time, how many replies are word
for word the same, and the quality figures the server measured at start-up before it allowed sharing
on this model (the gate line of /v1/models). On the first start the server runs that quality gate
(cached after that).

usage: demo.py AGENTKV_BINARY
Runs itself under the project's venv ($AGENTKV_VENV or ~/.cache/agentkv/venv, made by setup.sh), which
has the openai client, when started by another Python.
"""
import os
import sys

try:
    import openai  # noqa: F401  (group_chat.py uses it)
except ImportError:
    venv = os.environ.get("AGENTKV_VENV", os.path.expanduser("~/.cache/agentkv/venv"))
    venv_python = os.path.join(venv, "bin", "python")
    # sys.prefix, not the executable: a venv's python is a symlink to the system one.
    if not os.access(venv_python, os.X_OK) or os.path.realpath(sys.prefix) == os.path.realpath(venv):
        raise SystemExit("demo: error: the openai client is missing (scripts/setup.sh makes the venv with it)")
    os.execv(venv_python, [venv_python, os.path.abspath(__file__), *sys.argv[1:]])

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import group_chat  # noqa: E402

MODEL = "smollm2"
AGENTS, TURNS = 8, 24


def gate_line(base_url):
    """What /v1/models says about chat sharing on the model: on or off, and the gate's measurement."""
    models = group_chat.make_client(base_url).models.list()
    info = [(m.model_extra or {}).get("kv_sharing", {}) for m in models.data if m.id == MODEL][0]
    return info.get("chat"), info.get("chat_quality_gate", "(no gate figures)")


def run_once(binary, sharing):
    proc, url = group_chat.start_server(binary, MODEL, ["--kv-mem", "256M", "--chat-sharing", sharing],
                                        log=lambda line: print("demo: " + line, flush=True))
    try:
        allowed, gate = gate_line(url)
        result = group_chat.run(url, MODEL, AGENTS, TURNS, kv_sharing=(sharing == "on"))
    finally:
        group_chat.stop_server(proc)
    return result, allowed, gate


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    binary = sys.argv[1]
    shared, allowed, gate = run_once(binary, "on")
    print(f"demo: chat sharing on {MODEL}: {'allowed' if allowed else 'refused'} by the quality gate: {gate}")
    # SmolLM2-135M is a tiny model: its replies often repeat what it read. What the demo shows is the
    # cost of serving them, and that sharing changes the replies little.
    print("\n== the group chat, first turns (sharing on; SmolLM2-135M is a tiny model, its replies often echo)")
    print(f"  Moderator: {group_chat.topic(0)}")
    for rec in shared["chats"][0]["turns"][:AGENTS]:
        print(f"  {rec['speaker']}: {group_chat.transcript_text(rec['speaker'], rec['text'])}")
    exact, _, _ = run_once(binary, "off")

    print(f"\n== {AGENTS} agents, {TURNS} turns, {shared['prompt_tokens']} prompt tokens sent with sharing, "
          f"{exact['prompt_tokens']} without")
    rows = [("", "sharing on", "sharing off")]
    for label, key, fmt in [("prefill tokens computed", "prefill_computed", "{:.0f}"),
                            ("  of them recomputed shared tokens", "recomputed_tokens", "{}"),
                            ("exact prefix-cache hits (tokens)", "cached_tokens", "{}"),
                            ("time to first token, p50", "ttft_p50_s", "{:.3f} s"),
                            ("turn latency, p50", "turn_p50_s", "{:.3f} s"),
                            ("wall time", "wall_s", "{:.1f} s")]:
        rows.append((label, fmt.format(shared[key]), fmt.format(exact[key])))
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print(f"  {r[0]:<{width}}  {r[1]:>12}  {r[2]:>12}")
    # Once one reply differs, the transcripts differ, so count the replies before the first difference.
    pairs = list(zip(shared["chats"][0]["replies"], exact["chats"][0]["replies"]))
    same = next((t for t, (a, b) in enumerate(pairs) if a != b), len(pairs))
    ratio = 100.0 * shared["prefill_computed"] / max(1.0, exact["prefill_computed"])
    print(f"\ndemo: with sharing the server computed {ratio:.0f}% of the prefill the exact path computed; "
          f"the first {same} of {TURNS} replies are word for word the same (sharing is approximate: the quality gate "
          f"above measured it against exact prefill before the server allowed it)")


if __name__ == "__main__":
    main()
