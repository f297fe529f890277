#!/usr/bin/env python3
"""An N-agent round-robin group chat against a running `agentkv serve`, through the official `openai` client.

Why: this is the traffic multi-agent frameworks (AutoGen group chats, CAMEL, CrewAI) send through plain
/v1/chat/completions. Every request is [system: the speaker's own persona] + [the same transcript of
everyone's messages], so the transcript is shared text at a different position after a different
prefix: what agentkv's chat KV sharing (kv_sharing, issue 14) reuses instead of prefilling again.

The workload, deterministic so that two runs can be compared reply for reply:
- agent i has a persona of two or three sentences made from its index, and the instruction to speak
  is inside its system prompt, so the transcript messages are byte-identical for every agent;
- the chat opens with a task from "Moderator"; turn t is spoken by agent t mod N; every earlier message
  is a `user` message "<Name>: <text>" (or, with --roles alternating, user and assistant by position,
  for chat templates such as Gemma's that require alternation; still identical across agents);
- greedy (temperature 0), 32 tokens per reply; replies are streamed with include_usage so the time to
  the first token is measured on the client.

What it measures (run() returns it as a dict; the CLI prints a table, --json writes it):
prefill tokens computed (the /metrics delta of agentkv_tokens_prefilled_total +
agentkv_tokens_recomputed_total), prompt, cached (exact prefix hits), shared and recomputed tokens (summed
over the replies' kv_sharing objects), TTFT and turn latency p50/p99, KV held at the end, wall time, and
every reply text in order (tests compare them byte for byte).

Example (a server on port 8080 serving smollm2):
  ~/.cache/agentkv/venv/bin/python scripts/group_chat.py --base-url http://127.0.0.1:8080/v1 --kv-sharing on
"""
import argparse
import concurrent.futures
import json
import re
import subprocess
import sys
import time
import urllib.request

NAMES = ["Ada", "Bram", "Cleo", "Dov", "Esme", "Finn", "Gia", "Hugo", "Ines", "Jude", "Kai", "Lena", "Milo",
         "Nia", "Otto", "Pia", "Quinn", "Rosa", "Sami", "Tess", "Uma", "Vic", "Wren", "Xavi", "Yara", "Zeno"]
JOBS = ["baker", "blacksmith", "teacher", "farmer", "doctor", "painter", "fisher", "tailor", "miller",
        "carpenter", "librarian", "engineer", "shepherd"]
TRAITS = ["cheerful", "grumpy", "curious", "shy", "talkative", "careful", "bold", "dreamy", "stubborn"]
CARES = ["the price of bread", "the children's safety", "what the old books say", "the next harvest",
         "everyone's health", "how things look", "the weather at sea", "doing things properly"]
TOPICS = [
    "The old stone bridge over the river collapsed in last night's storm. Plan how the village gets to market.",
    "A traveller offers to sell the village a windmill. Decide whether to buy it and how to pay.",
    "The well in the square has gone salty. Work out what to do before summer.",
    "The school roof leaks and the teacher wants a new building. Agree on a plan.",
    "Wolves were seen near the sheep pens. Decide how to protect the flock.",
    "The village wins a prize of one hundred gold coins. Decide together how to spend it.",
    "A fever is spreading in the next valley. Plan how to keep the village safe.",
    "The harvest festival is in a week and nothing is ready. Share out the work.",
    "A merchant wants to open a shop that sells everything cheaper. Decide whether to let him.",
    "The river floods every spring. Plan a dam or a wall and who builds it.",
    "The mayor has retired. Choose how the village picks the next one.",
    "A rich visitor wants to build a castle on the hill. Decide what the village asks in return.",
]
ROLE_LAYOUTS = ("user", "alternating")


def agent_name(i):
    """Names are unique for any index: after Zeno comes Ada2, Bram2, ..."""
    base = NAMES[i % len(NAMES)]
    return base if i < len(NAMES) else f"{base}{i // len(NAMES) + 1}"


def persona(i):
    """Agent i's system prompt: a distinct persona (deterministic from i) and the instruction to speak."""
    name = agent_name(i)
    return (f"You are {name}, a {TRAITS[i % len(TRAITS)]} {JOBS[i % len(JOBS)]} in the village of Elm Hollow, "
            f"where you have lived for {10 + 3 * i} years. You care most about {CARES[i % len(CARES)]}. "
            f"You are in a group chat with your neighbours; every message starts with its speaker's name. "
            f"Write {name}'s next message: one or two short sentences, without your name in front.")


def topic(k):
    """The Moderator's opening task for group chat k (chats with different k share no transcript text)."""
    text = TOPICS[k % len(TOPICS)]
    return text if k < len(TOPICS) else f"{text} (Meeting {k // len(TOPICS) + 1}.)"


def build_messages(system, transcript, roles="user"):
    """The request's messages: the speaker's system prompt, then the transcript [(name, text), ...] as
    "<Name>: <text>" messages, all `user` or (roles="alternating") user/assistant by position."""
    if roles not in ROLE_LAYOUTS:
        raise ValueError(f"roles must be one of {ROLE_LAYOUTS}, got {roles!r}")
    msgs = [{"role": "system", "content": system}]
    for k, (name, text) in enumerate(transcript):
        role = "user" if roles == "user" or k % 2 == 0 else "assistant"
        msgs.append({"role": role, "content": f"{name}: {text}"})
    return msgs


def sharing_body(kv_sharing=None, recompute=None):
    """The extra request fields; None leaves a field out, so the server's default applies."""
    body = {}
    if kv_sharing is not None:
        body["kv_sharing"] = bool(kv_sharing)
    if recompute is not None:
        body["recompute"] = float(recompute)
    return body


def chat_request(client, model, messages, kv_sharing=None, recompute=None, max_tokens=32):
    """One streamed greedy chat completion. Returns {text, ttft_s, latency_s, prompt_tokens,
    cached_tokens, kv_sharing (the reply's object, or None where the server sends none)}."""
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model=model, messages=messages, max_tokens=max_tokens, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body=sharing_body(kv_sharing, recompute) or None)
    parts, ttft, usage, sharing = [], None, None, None
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                parts.append(choice.delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
            sharing = (chunk.model_extra or {}).get("kv_sharing")
    latency = time.perf_counter() - t0
    if usage is None:
        raise RuntimeError("the stream ended without a usage chunk (stream_options.include_usage)")
    details = usage.prompt_tokens_details
    return {"text": "".join(parts), "ttft_s": latency if ttft is None else ttft, "latency_s": latency,
            "prompt_tokens": usage.prompt_tokens,
            "cached_tokens": (details.cached_tokens or 0) if details is not None else 0,
            "kv_sharing": sharing}


def transcript_text(name, reply):
    """What goes into the transcript for a reply: stripped, and without the name if the model wrote it."""
    text = reply.strip()
    prefix = f"{name}:"
    return text[len(prefix):].strip() if text.startswith(prefix) else text


def run_chat(client, model, agents=8, turns=24, topic_index=0, persona_offset=0, roles="user",
             kv_sharing=None, recompute=None, max_tokens=32):
    """One group chat; returns {"topic", "replies": [text per turn], "turns": [chat_request's record +
    speaker, messages]} (messages: what turn t sent, so a test can send it again)."""
    transcript = [("Moderator", topic(topic_index))]
    out = {"topic": topic_index, "replies": [], "turns": []}
    for t in range(turns):
        idx = persona_offset + t % agents
        messages = build_messages(persona(idx), transcript, roles)
        rec = chat_request(client, model, messages, kv_sharing, recompute, max_tokens)
        rec.update(speaker=agent_name(idx), messages=messages)
        out["replies"].append(rec["text"])
        out["turns"].append(rec)
        transcript.append((agent_name(idx), transcript_text(agent_name(idx), rec["text"])))
    return out


def start_server(binary, model, args=(), log=print):
    """Starts `agentkv serve -m MODEL --port 0 ARGS...` and waits until it serves (on a fresh machine it
    first runs its quality gates); prints the gate lines through `log`. Returns (process, base URL)."""
    log(f"starting `agentkv serve -m {model} {' '.join(args)}`")
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 1800
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit(f"error: the server exited early (rc={proc.poll()})")
        if "quality gate" in line:
            log("  " + line.strip().removeprefix("agentkv: "))
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            # Keep draining its log so the server never blocks on a full pipe.
            import threading
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, f"http://127.0.0.1:{m.group(1)}/v1"
    proc.kill()
    raise SystemExit("error: the server did not start")


def stop_server(proc):
    proc.terminate()
    proc.wait(timeout=60)


def read_metrics(base_url, model):
    """The samples of GET /metrics labelled with this model, as {name: value}."""
    root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))
    with urllib.request.urlopen(root + "/metrics", timeout=60) as r:
        text = r.read().decode()
    pat = r'^(agentkv_\w+)\{model="%s"\} (\S+)$' % re.escape(model)
    return {k: float(v) for k, v in re.findall(pat, text, re.M)}


def prefill_computed(metrics):
    """Prompt tokens the model computed: exact prefill plus the recomputed share of reused segments."""
    return metrics.get("agentkv_tokens_prefilled_total", 0.0) + metrics.get("agentkv_tokens_recomputed_total", 0.0)


def percentile(values, q):
    """Linear interpolation between closest ranks (q in [0, 100]); None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def make_client(base_url, api_key=None):
    import openai  # imported here so that the workload helpers above need only the standard library
    # No retries: a failed request must show, not be hidden by a second attempt.
    return openai.OpenAI(base_url=base_url, api_key=api_key or "none", max_retries=0, timeout=900)


def run(base_url, model="smollm2", agents=8, turns=24, kv_sharing=None, recompute=None, concurrency=1,
        topic_index=0, persona_offset=0, roles="user", max_tokens=32, api_key=None):
    """Runs `concurrency` group chats at once (chat j on topic topic_index + j, one thread and client
    each) and returns the measurements (see the module's docstring) with "chats": [run_chat's dicts]."""
    before = read_metrics(base_url, model)
    t0 = time.perf_counter()

    def one(j):
        return run_chat(make_client(base_url, api_key), model, agents, turns, topic_index + j, persona_offset,
                        roles, kv_sharing, recompute, max_tokens)

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        chats = list(pool.map(one, range(concurrency)))
    wall = time.perf_counter() - t0
    after = read_metrics(base_url, model)
    turns_all = [rec for c in chats for rec in c["turns"]]
    shared = [rec["kv_sharing"] or {} for rec in turns_all]
    blocks = after.get("agentkv_kv_blocks_used")
    block_bytes = after.get("agentkv_kv_block_bytes")
    return {
        "model": model, "agents": agents, "turns": turns, "concurrency": concurrency, "roles": roles,
        "kv_sharing": kv_sharing, "recompute": recompute, "requests": len(turns_all),
        "prefill_computed": prefill_computed(after) - prefill_computed(before),
        "prompt_tokens": sum(r["prompt_tokens"] for r in turns_all),
        "cached_tokens": sum(r["cached_tokens"] for r in turns_all),
        "shared_tokens": sum(s.get("shared_tokens", 0) for s in shared),
        "recomputed_tokens": sum(s.get("recomputed_tokens", 0) for s in shared),
        "segments": sum(s.get("segments", 0) for s in shared),
        "modes": {m: sum(s.get("mode", "none") == m for s in shared) for m in sorted({s.get("mode", "none") for s in shared})},
        "ttft_p50_s": percentile([r["ttft_s"] for r in turns_all], 50),
        "ttft_p99_s": percentile([r["ttft_s"] for r in turns_all], 99),
        "turn_p50_s": percentile([r["latency_s"] for r in turns_all], 50),
        "turn_p99_s": percentile([r["latency_s"] for r in turns_all], 99),
        "kv_blocks_used_end": blocks,
        "kv_bytes_end": blocks * block_bytes if blocks is not None and block_bytes else None,
        # The segment cache at the end: blocks it holds, contexts in master–diff form, their diff blocks.
        "segment_blocks_end": after.get("agentkv_segment_blocks"),
        "segment_compact_end": after.get("agentkv_segment_compact_contexts"),
        "segment_diff_blocks_end": after.get("agentkv_segment_diff_blocks"),
        "wall_s": wall,
        "chats": chats,
    }


def print_table(result, out=sys.stdout):
    """A short human-readable summary of run()'s result."""
    r = result
    share = "server default" if r["kv_sharing"] is None else ("on" if r["kv_sharing"] else "off")
    pct = 100.0 * r["prefill_computed"] / max(1, r["prompt_tokens"])
    held = f"{r['kv_blocks_used_end']:.0f} blocks" if r["kv_blocks_used_end"] is not None else "?"
    if r["kv_bytes_end"] is not None:
        held += f" ({r['kv_bytes_end'] / 2**20:.1f} MiB)"
    rows = [
        ("group chats x agents x turns", f"{r['concurrency']} x {r['agents']} x {r['turns']} on {r['model']}"),
        ("kv_sharing / recompute", f"{share} / {'server default' if r['recompute'] is None else r['recompute']}"),
        ("prompt tokens", f"{r['prompt_tokens']}"),
        ("prefill tokens computed", f"{r['prefill_computed']:.0f} ({pct:.0f}% of prompt tokens)"),
        ("cached (exact prefix hits)", f"{r['cached_tokens']}"),
        ("shared / recomputed tokens", f"{r['shared_tokens']} / {r['recomputed_tokens']} in {r['segments']} segments"),
        ("sharing modes of the replies", ", ".join(f"{m}: {n}" for m, n in r["modes"].items())),
        ("TTFT p50 / p99", f"{r['ttft_p50_s'] * 1000:.0f} / {r['ttft_p99_s'] * 1000:.0f} ms"),
        ("turn latency p50 / p99", f"{r['turn_p50_s'] * 1000:.0f} / {r['turn_p99_s'] * 1000:.0f} ms"),
        ("KV held at the end", held),
        ("wall time", f"{r['wall_s']:.1f} s"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}", file=out)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Run an N-agent round-robin group chat against a running agentkv server (or any OpenAI-"
                    "compatible one) and measure what KV sharing saves: each agent sends its own persona as the "
                    "system prompt followed by the whole transcript, as multi-agent frameworks do.",
        epilog="Start a server first, e.g. `build/agentkv serve -m smollm2 --port 8080`, then run this with the "
               "venv's Python (~/.cache/agentkv/venv/bin/python, which has the openai client). Compare "
               "--kv-sharing on and off on fresh servers: a second run on the same server gets prefix-cache "
               "hits from the first.")
    p.add_argument("--base-url", default="http://127.0.0.1:8080/v1", help="the server's OpenAI base URL (default: %(default)s)")
    p.add_argument("--model", default="smollm2", help="model id the server serves (default: %(default)s)")
    p.add_argument("--agents", type=int, default=8, help="agents taking turns in each chat (default: %(default)s)")
    p.add_argument("--turns", type=int, default=24, help="replies in each chat, in total (default: %(default)s)")
    p.add_argument("--kv-sharing", choices=["on", "off", "server"], default="server",
                   help="send kv_sharing true or false with every request, or leave it to the server's "
                        "--chat-sharing default (default: %(default)s)")
    p.add_argument("--recompute", type=float, default=None,
                   help="share (0..1) of each reused message's tokens the server recomputes exactly "
                        "(default: the server's --recompute)")
    p.add_argument("--concurrency", type=int, default=1,
                   help="independent group chats (different topics) run at once, one thread each (default: %(default)s)")
    p.add_argument("--topic", type=int, default=0, help="topic of the first chat; chat j uses topic + j (default: %(default)s)")
    p.add_argument("--roles", choices=ROLE_LAYOUTS, default="user",
                   help="transcript roles: all user, or user/assistant alternating by position for chat "
                        "templates that require it, such as Gemma's (default: %(default)s)")
    p.add_argument("--max-tokens", type=int, default=32, help="tokens per reply, greedy (default: %(default)s)")
    p.add_argument("--api-key", default=None, help="the server's --api-key, if it has one")
    p.add_argument("--show-replies", action="store_true", help="print the transcript of each chat")
    p.add_argument("--json", metavar="FILE", help="also write the measurements (and every reply) to FILE as JSON")
    args = p.parse_args(argv)
    if args.agents < 1 or args.turns < 1 or args.concurrency < 1:
        p.error("--agents, --turns and --concurrency must be at least 1")
    if args.recompute is not None and not 0 <= args.recompute <= 1:
        p.error("--recompute must be in [0, 1]")
    return args


def main(argv=None):
    a = parse_args(argv)
    kv = {"on": True, "off": False, "server": None}[a.kv_sharing]
    import openai
    try:
        result = run(a.base_url, a.model, a.agents, a.turns, kv, a.recompute, a.concurrency, a.topic, 0, a.roles,
                     a.max_tokens, a.api_key)
    except openai.BadRequestError as e:
        hint = " (this model's chat template needs --roles alternating)" if "alternate" in str(e) and a.roles == "user" else ""
        raise SystemExit(f"group_chat: error: the server refused a request: {e}{hint}")
    if a.show_replies:
        for c in result["chats"]:
            print(f"Moderator: {topic(c['topic'])}")
            for rec in c["turns"]:
                print(f"{rec['speaker']}: {transcript_text(rec['speaker'], rec['text'])}")
    print_table(result)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
