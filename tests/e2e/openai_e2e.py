"""End to end: the official `openai` Python client (PyPI) against an `agentkv serve` this module starts.

Run under pytest (conftest.py gives the binary and starts and stops the server). Checks chat and text
completions, streaming and not, n=3, logprobs, cached prompt tokens on a repeated request, greedy
output equal to `agentkv generate`, OpenAI-style errors, and a clean SIGTERM shutdown. The test
functions share one server and run in file order; the last one shuts it down.
"""
import re
import signal
import subprocess
import time
import urllib.request

import openai
import pytest
from openai import OpenAI

QUESTION = "What is the capital of France?"
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server(module_servers):
    return module_servers.start(kv_mem="512M")


@pytest.fixture(scope="module")
def client(server):
    _, port = server
    return OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def generate_cli(agentkv):
    def run(chat, prompt, n):
        args = [agentkv, "generate", "-m", "smollm2", "-p", prompt, "-n", str(n), "-q"]
        if chat:
            args.append("--chat")
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        return out[:-1] if out.endswith("\n") else out  # the CLI ends its output with a newline
    return run


def test_models_list(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["smollm2"], ids


def test_chat_greedy_equals_cli_then_cached_then_streamed(client, generate_cli):
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


def test_text_completion_greedy_equals_cli_and_streamed(client, generate_cli):
    c = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=12, temperature=0)
    assert c.object == "text_completion"
    assert c.choices[0].text == generate_cli(False, PROMPT, 12), (c.choices[0].text, generate_cli(False, PROMPT, 12))
    cs = list(client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=12, temperature=0, stream=True))
    assert "".join(x.choices[0].text for x in cs) == c.choices[0].text


def test_n3_sampled_choices_reproducible_with_seed(client):
    n3 = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Say a colour."}],
                                        n=3, temperature=0.9, seed=7, max_tokens=12)
    assert sorted(ch.index for ch in n3.choices) == [0, 1, 2], n3.choices
    n3b = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Say a colour."}],
                                         n=3, temperature=0.9, seed=7, max_tokens=12)
    assert [ch.message.content for ch in n3.choices] == [ch.message.content for ch in n3b.choices]


def test_logprobs_chat_and_completions(client):
    lp = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": QUESTION}],
                                        temperature=0, max_tokens=6, logprobs=True, top_logprobs=3)
    content = lp.choices[0].logprobs.content
    assert len(content) == lp.usage.completion_tokens, (len(content), lp.usage)
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.logprob - 1e-6  # greedy picks the top token
        assert e.token == e.top_logprobs[0].token
    clp = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=4, temperature=0, logprobs=2)
    assert len(clp.choices[0].logprobs.token_logprobs) == 4
    assert all(len(t) == 2 for t in clp.choices[0].logprobs.top_logprobs)


def test_errors_are_openai_error_objects(client):
    with pytest.raises(openai.NotFoundError) as e:  # an unknown model is not accepted
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    assert "nope" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:  # temperature 5 is not accepted
        client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "hi"}], temperature=5)
    assert "temperature" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:  # a huge max_tokens is not accepted
        client.completions.create(model="smollm2", prompt="hi", max_tokens=10**7)
    assert "max_tokens" in str(e.value)


def test_disconnect_mid_stream_cancels_and_frees_blocks(client, server):
    _, port = server
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
        # Blocks still used belong to the chat-sharing cache's kept contexts (finished requests), no more.
        if float(vals["agentkv_requests_cancelled_total"]) >= 1 and \
                float(vals["agentkv_kv_blocks_used"]) == float(vals["agentkv_segment_blocks"]):
            break
        assert time.time() < deadline, vals
        time.sleep(0.2)


def test_sigterm_finishes_cleanly(server):
    proc, _ = server
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    assert rc == 0, rc
