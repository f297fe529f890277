#!/usr/bin/env python3
"""End to end: the official `openai` Python client (PyPI) against an `agentkv serve` this test starts.

Usage: openai_e2e.py AGENTKV_BINARY
Checks chat and text completions, streaming and not, n=3, logprobs, cached prompt tokens on a repeated
request, greedy output equal to `agentkv generate`, OpenAI-style errors, and a clean SIGTERM shutdown.
"""
import re
import signal
import subprocess
import sys
import time
import urllib.request

import openai
from openai import OpenAI

from http_raw import start_server

BIN = sys.argv[1]
QUESTION = "What is the capital of France?"


def generate_cli(chat, prompt, n):
    args = [BIN, "generate", "-m", "smollm2", "-p", prompt, "-n", str(n), "-q"]
    if chat:
        args.append("--chat")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return out[:-1] if out.endswith("\n") else out  # the CLI ends its output with a newline


def main():
    proc, port = start_server(BIN, kv_mem="512M")
    ok = False
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=300)
        ids = [m.id for m in client.models.list().data]
        assert ids == ["smollm2"], ids

        # Chat, greedy, not streamed: equals the CLI's greedy answer.
        r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": QUESTION}],
                                           temperature=0, max_tokens=24)
        text = r.choices[0].message.content
        assert r.object == "chat.completion" and r.choices[0].message.role == "assistant", r
        assert text == generate_cli(True, QUESTION, 24), (text, generate_cli(True, QUESTION, 24))
        assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0, r.usage
        assert r.choices[0].finish_reason in ("stop", "length"), r.choices[0]

        # The same request again: its prompt's full blocks come from the prefix cache.
        r2 = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": QUESTION}],
                                            temperature=0, max_tokens=24)
        assert r2.choices[0].message.content == text
        cached = r2.usage.prompt_tokens_details.cached_tokens
        assert cached >= 16 and cached < r2.usage.prompt_tokens, r2.usage

        # Chat, streamed: the deltas add up to the same text; the last chunk carries usage.
        chunks = list(client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": QUESTION}], temperature=0, max_tokens=24,
            stream=True, stream_options={"include_usage": True}))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == text, (streamed, text)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == r.usage.completion_tokens

        # Text completion, greedy: equals the CLI.
        prompt = "The capital of France is"
        c = client.completions.create(model="smollm2", prompt=prompt, max_tokens=12, temperature=0)
        assert c.object == "text_completion"
        assert c.choices[0].text == generate_cli(False, prompt, 12), (c.choices[0].text, generate_cli(False, prompt, 12))
        cs = list(client.completions.create(model="smollm2", prompt=prompt, max_tokens=12, temperature=0, stream=True))
        assert "".join(x.choices[0].text for x in cs) == c.choices[0].text

        # n = 3 with sampling: three choices, indexed 0..2, reproducible with a seed.
        n3 = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Say a colour."}],
                                            n=3, temperature=0.9, seed=7, max_tokens=12)
        assert sorted(ch.index for ch in n3.choices) == [0, 1, 2], n3.choices
        n3b = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Say a colour."}],
                                             n=3, temperature=0.9, seed=7, max_tokens=12)
        assert [ch.message.content for ch in n3.choices] == [ch.message.content for ch in n3b.choices]

        # Logprobs: chat (top_logprobs) and completions (legacy arrays).
        lp = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": QUESTION}],
                                            temperature=0, max_tokens=6, logprobs=True, top_logprobs=3)
        content = lp.choices[0].logprobs.content
        assert len(content) == lp.usage.completion_tokens, (len(content), lp.usage)
        for e in content:
            assert e.logprob <= 0 and len(e.top_logprobs) == 3
            assert e.top_logprobs[0].logprob >= e.logprob - 1e-6  # greedy picks the top token
            assert e.token == e.top_logprobs[0].token
        clp = client.completions.create(model="smollm2", prompt=prompt, max_tokens=4, temperature=0, logprobs=2)
        assert len(clp.choices[0].logprobs.token_logprobs) == 4
        assert all(len(t) == 2 for t in clp.choices[0].logprobs.top_logprobs)

        # Errors come back as OpenAI error objects with 4xx statuses.
        try:
            client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
            raise AssertionError("unknown model accepted")
        except openai.NotFoundError as e:
            assert "nope" in str(e)
        try:
            client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "hi"}], temperature=5)
            raise AssertionError("temperature 5 accepted")
        except openai.BadRequestError as e:
            assert "temperature" in str(e)
        try:
            client.completions.create(model="smollm2", prompt="hi", max_tokens=10**7)
            raise AssertionError("huge max_tokens accepted")
        except openai.BadRequestError as e:
            assert "max_tokens" in str(e)

        # A client that disconnects mid-stream: its request is cancelled and its KV blocks freed.
        stream = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": QUESTION}],
                                                temperature=0, max_tokens=400, stream=True)
        for i, _ in enumerate(stream):
            if i == 2:
                break
        stream.close()
        deadline = time.time() + 60
        while True:
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
            vals = dict(re.findall(r'^(agentkv_\w+)\{model="smollm2"\} (\S+)$', metrics, re.M))
            if float(vals["agentkv_requests_cancelled_total"]) >= 1 and float(vals["agentkv_kv_blocks_used"]) == 0:
                break
            assert time.time() < deadline, vals
            time.sleep(0.2)

        # SIGTERM: the server finishes cleanly.
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        assert rc == 0, rc
        ok = True
    finally:
        if proc.poll() is None:
            proc.kill()
    print("openai e2e: ok" if ok else "openai e2e: FAILED")


if __name__ == "__main__":
    main()
