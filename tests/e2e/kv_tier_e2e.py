"""End to end: the KV disk tier (issue 18, first slice) through `agentkv serve --kv-disk`, both models, with
the official openai client. Per model, a server whose KV budget holds about two of the prompts below, on a
fresh tier directory:

- a prompt, then other prompts until its blocks are pushed out of RAM, then the prompt again: its prefix
  comes back from disk (tier hits in /metrics, cached_tokens in the usage) and the greedy reply is
  byte-identical to the first one, which was prefilled;
- a restarted server on the same directory restores the prompt from disk and answers the same;
- every record corrupted (one payload byte flipped): the next request counts rejected records, computes the
  prompt again, answers the same, and no corrupted file is left behind.
"""
import glob
import os
import random
import re
import time
import urllib.request

import pytest

import http_raw

MODELS = ["smollm2", "gemma3"]
KV_MEM = "24M"  # ~65 SmolLM2 / ~81 Gemma 3 blocks of 16 tokens: two prompts of ~600 tokens, not four
WORDS = ("river stone lantern harvest mill ford cart barley orchard meadow ledger copper weaver shepherd "
         "bridge tower market candle thread anchor rope salt timber cellar forge spindle kettle").split()


def prompt_text(seed, n_words=450):
    rng = random.Random(seed)
    return f"Record {seed}: " + " ".join(rng.choice(WORDS) for _ in range(n_words)) + "\nSummary:"


def tier_metrics(port, model):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    pat = r'^(agentkv_kv_tier_\w+)\{model="%s",tier="disk"\} (\S+)$' % re.escape(model)
    return {k: float(v) for k, v in re.findall(pat, text, re.M)}


def complete(port, model, text):
    from openai import OpenAI
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=600)
    r = client.completions.create(model=model, prompt=text, max_tokens=16, temperature=0)
    return r.choices[0].text, r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens


def wait_for_writes(port, model, at_least):
    """The tier writes in the background: waits until this many records are written."""
    deadline = time.time() + 60
    while tier_metrics(port, model).get("agentkv_kv_tier_writes_total", 0) < at_least:
        assert time.time() < deadline, f"{model}: fewer than {at_least} tier writes after 60 s"
        time.sleep(0.1)


@pytest.mark.parametrize("model", MODELS)
def test_disk_tier_restores_exactly_and_rejects_corrupt_records(servers, tmp_path, model):
    tier_dir = str(tmp_path / "tier")
    args = ["--kv-disk", tier_dir]
    proc, port = servers.start(args, models=(model,), kv_mem=KV_MEM)
    target = prompt_text(1)

    first, n_prompt, cached = complete(port, model, target)
    assert cached == 0, f"{model}: a fresh server found {cached} cached tokens"
    for seed in (2, 3, 4):  # other prompts: the target's blocks leave RAM for the tier
        complete(port, model, prompt_text(seed))
    full_blocks = n_prompt // 16
    wait_for_writes(port, model, full_blocks)

    before = tier_metrics(port, model)
    again, _, cached = complete(port, model, target)
    after = tier_metrics(port, model)
    assert again == first, f"{model}: the reply after a restore from disk differs from the prefilled one"
    restored = after["agentkv_kv_tier_hits_total"] - before["agentkv_kv_tier_hits_total"]
    assert restored >= full_blocks - 1, f"{model}: {restored} blocks restored of {full_blocks}"
    assert cached >= (full_blocks - 1) * 16, f"{model}: cached_tokens {cached} of {n_prompt} after the restore"
    assert after["agentkv_kv_tier_rejected_total"] == 0
    http_raw.stop_server(proc)

    # A restarted server: RAM is empty, the tier directory is not.
    proc, port = servers.start(args, models=(model,), kv_mem=KV_MEM)
    restarted, _, cached = complete(port, model, target)
    assert restarted == first, f"{model}: the reply after a restart differs"
    assert tier_metrics(port, model)["agentkv_kv_tier_hits_total"] >= full_blocks - 1
    assert cached >= (full_blocks - 1) * 16
    http_raw.stop_server(proc)

    # Every record corrupted: each is a miss, deleted, and the prompt is computed again.
    files = glob.glob(os.path.join(tier_dir, "*.kvblock"))
    assert len(files) >= full_blocks
    corrupted = {}
    for f in files:
        data = bytearray(open(f, "rb").read())
        data[len(data) // 2] ^= 0x40
        open(f, "wb").write(bytes(data))
        corrupted[f] = bytes(data)
    proc, port = servers.start(args, models=(model,), kv_mem=KV_MEM)
    recomputed, _, cached = complete(port, model, target)
    m = tier_metrics(port, model)
    assert recomputed == first, f"{model}: the reply after rejected records differs"
    assert cached == 0, f"{model}: {cached} tokens came from corrupted records"
    assert m["agentkv_kv_tier_rejected_total"] >= 1 and m["agentkv_kv_tier_hits_total"] == 0
    left = [f for f, data in corrupted.items() if os.path.exists(f) and open(f, "rb").read() == data]
    rejected = int(m["agentkv_kv_tier_rejected_total"])
    assert len(left) == len(corrupted) - rejected, f"{model}: {len(left)} corrupted files left, {rejected} rejected"
    http_raw.stop_server(proc)
