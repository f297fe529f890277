"""End to end: KV-PRM step scoring of a resident agent, POST /v1/agents/{id}/score (issue 7).

Run under pytest (conftest.py starts and stops the server; the head is fitted into a pytest temp dir).
Fits a small verify head with `agentkv fit-prm` on the committed step proposals, serves SmolLM2 with
it and checks: the reply's shape and the probe named in it and in /v1/models; scores resumed from the
agent's resident KV (cached tokens); a step's score does not depend on the other steps of the
request (one batched forward scores each exactly as alone); scoring leaves the agent as it was (same
resident tokens, and the same greedy answer afterwards as a fork taken before scoring); bad requests
get their 4xx naming the field; a server given a head for a model it does not serve, or a damaged
head file, refuses to start with one line naming the file.
The same for a verifier with trained LoRA adapters (issue 20: `fit-prm --lora`, `serve --prm-adapter`):
the adapted log-odds are the score, scoring leaves the agent as it was (the adapters are on for the
verify token only), each step scores as alone; `bench-prm --adapter` gives the KV-PRM and the text PRM
the same scores with the adapters on; a file for another model, a damaged one, or adapters together
with a calibration for the same model are refused at start.
"""
import os
import subprocess

import pytest

import http_raw

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SYSTEM = ("You solve math word problems. Write one step per line as 'Step k: <calculation> = <number>', "
          "using only numbers from the problem or from earlier steps. End with 'Answer: <number>'.")
PROBLEM = "Lucy buys 4 packs with 3 coins in each pack, then finds 5 more coins. How many coins does she have?"
STEPS = ["Step 1: 4 * 3 = 12", "Step 1: 4 + 3 = 7", "Step 1: 4 coins * 3 = 12\n", "Step 1: 12 + 5 = 17"]


@pytest.fixture(scope="module")
def head(agentkv, tmp_path_factory):
    # 8 train problems of the committed proposals: a head in well under a minute; its quality is the
    # model test's business (tests/model/prm_fit_test.cpp), here only its use.
    path = str(tmp_path_factory.mktemp("prm_score_e2e") / "prm_head.json")
    r = subprocess.run([agentkv, "fit-prm", "-m", "smollm2", "--steps", os.path.join(SRC, "tests/data/prm/arith_steps.tsv"),
                        "--train", "8", "--heldout", "0", "--layer", "8", "--l2", "0.01", "-t", "2", "-o", path],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(path)
    return path


@pytest.fixture(scope="module")
def adapters(agentkv, tmp_path_factory):
    # Two train problems, one epoch: a real fit in well under a minute; how well it verifies is the
    # benchmark's business (BENCHMARKS.md), here only its use.
    path = str(tmp_path_factory.mktemp("prm_score_e2e") / "prm_adapters.gguf")
    r = subprocess.run([agentkv, "fit-prm", "-m", "smollm2", "--steps", os.path.join(SRC, "tests/data/prm/arith_steps.tsv"),
                        "--lora", "--rank", "4", "--train", "2", "--heldout", "0", "-t", "2", "-o", path],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(path)
    return path


def assert_unchanged_by_scoring(api, agent, twin):
    # Scoring wrote nothing into the agent: same resident context, same greedy answer as its twin.
    after = api.call("GET", f"/v1/agents/{agent['id']}")
    assert after["resident_tokens"] == agent["resident_tokens"] and after["messages"] == agent["messages"], after
    gen = {"max_tokens": 24, "temperature": 0}
    a1 = api.call("POST", f"/v1/agents/{agent['id']}/respond", gen)
    a2 = api.call("POST", f"/v1/agents/{twin}/respond", gen)
    assert a1["message"]["content"] == a2["message"]["content"], (a1, a2)


def refused(binary, args, needle):
    r = subprocess.run([binary, "serve", *args, "--port", "0", "--round-sharing", "off", "-t", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_scores_a_resident_agent_without_changing_it(servers, head):
    _, port = servers.start(extra_args=("--prm-calibration", head), kv_mem="512M")
    api = http_raw.JsonApi(port)
    models = api.call("GET", "/v1/models")["data"]
    assert models[0]["verifier"]["kind"] == "probe", models

    agent = api.call("POST", "/v1/agents", {"model": "smollm2", "name": "Solver", "system": SYSTEM,
                                            "messages": [{"role": "user", "content": PROBLEM}]}, expect=201)
    aid = agent["id"]
    twin = api.call("POST", f"/v1/agents/{aid}/fork", {"name": "Twin"}, expect=201)["id"]

    got = api.call("POST", f"/v1/agents/{aid}/score", {"steps": STEPS})
    assert got["object"] == "agent.step_scores" and got["agent"] == aid, got
    assert got["verifier"] == {"kind": "probe", "layer": 8}, got
    scores = got["scores"]
    assert [s["index"] for s in scores] == list(range(len(STEPS))), got
    for s in scores:
        assert 0.0 < s["probability"] < 1.0 and s["tokens"] > 3, s
        assert s["logodds"] is None, s  # the probe stops at its layer: no logits are read
    # The context resumed from the resident KV: only the assistant turn's header is new.
    assert got["usage"]["cached_tokens"] >= agent["resident_tokens"] - 16, (got, agent)
    assert got["usage"]["context_tokens"] > agent["resident_tokens"], (got, agent)
    # A step with and without the newline is the same step.
    assert scores[2]["tokens"] == api.call("POST", f"/v1/agents/{aid}/score",
                                            {"steps": [STEPS[2].rstrip()]})["scores"][0]["tokens"]

    # Batch invariance: each step alone scores exactly as in the batch.
    for i, step in enumerate(STEPS):
        alone = api.call("POST", f"/v1/agents/{aid}/score", {"steps": [step]})["scores"][0]
        assert alone["score"] == scores[i]["score"], (i, alone, scores[i])

    # An accepted prefix: the next step is scored after it.
    two = api.call("POST", f"/v1/agents/{aid}/score", {"prefix": "Step 1: 4 * 3 = 12\n",
                                                      "steps": ["Step 2: 12 + 5 = 17", "Step 2: 12 - 5 = 7"]})
    assert two["usage"]["context_tokens"] > got["usage"]["context_tokens"], two
    assert len(two["scores"]) == 2

    assert_unchanged_by_scoring(api, agent, twin)

    # Bad requests: 4xx naming the field, and the agent still serves.
    for body, param in [({}, "steps"), ({"steps": []}, "steps"), ({"steps": "Step 1: 1 + 1 = 2"}, "steps"),
                        ({"steps": [""]}, "steps[0]"), ({"steps": ["ok", 3]}, "steps[1]"),
                        ({"steps": ["x"] * 257}, "steps"), ({"steps": ["x"], "temperature": 0}, "temperature"),
                        ({"steps": ["x"], "prefix": 7}, "prefix")]:
        err = api.call("POST", f"/v1/agents/{aid}/score", body, expect=400)
        assert err["error"]["param"] == param, (body, err)
    api.call("POST", "/v1/agents/agent-nope/score", {"steps": ["x"]}, expect=404)
    api.call("GET", f"/v1/agents/{aid}/score", expect=405)
    assert len(api.call("POST", f"/v1/agents/{aid}/score", {"steps": STEPS[:1]})["scores"]) == 1


def test_head_for_another_model_or_damaged_is_refused_at_start(agentkv, head, tmp_path):
    # A head for a model the server does not serve, and a damaged head, are refused at start-up.
    refused(agentkv, ["-m", "gemma3", "--prm-calibration", head], head)
    with open(head) as f:
        text = f.read()
    bad = str(tmp_path / "prm_head_bad.json")
    with open(bad, "w") as f:
        f.write(text[: len(text) // 2])
    refused(agentkv, ["-m", "smollm2", "--prm-calibration", bad], bad)


def test_lora_verifier_scores_a_resident_agent_without_changing_it(servers, adapters):
    _, port = servers.start(extra_args=("--prm-adapter", adapters), kv_mem="512M")
    api = http_raw.JsonApi(port)
    verifier = api.call("GET", "/v1/models")["data"][0]["verifier"]
    assert verifier["kind"] == "lora" and "rank 4" in verifier["summary"], verifier

    agent = api.call("POST", "/v1/agents", {"model": "smollm2", "name": "Solver", "system": SYSTEM,
                                            "messages": [{"role": "user", "content": PROBLEM}]}, expect=201)
    aid = agent["id"]
    twin = api.call("POST", f"/v1/agents/{aid}/fork", {"name": "Twin"}, expect=201)["id"]
    got = api.call("POST", f"/v1/agents/{aid}/score", {"steps": STEPS})
    assert got["verifier"] == {"kind": "lora"}, got
    for s in got["scores"]:
        # The adapted answer log-odds are the score, uncalibrated.
        assert s["logodds"] is not None and s["score"] == pytest.approx(s["logodds"], abs=1e-6), s
        assert 0.0 < s["probability"] < 1.0, s
    for i, step in enumerate(STEPS):
        alone = api.call("POST", f"/v1/agents/{aid}/score", {"steps": [step]})["scores"][0]
        assert alone["score"] == got["scores"][i]["score"], (i, alone, got["scores"][i])
    assert_unchanged_by_scoring(api, agent, twin)


def test_lora_verifier_reads_the_cache_as_the_text_prm_reencodes(agentkv, adapters):
    # bench-prm scores one step both ways with the adapters on: the last column is their score delta.
    r = subprocess.run([agentkv, "bench-prm", "-m", "smollm2", "--adapter", adapters, "--lengths", "48,160",
                        "--repeats", "1", "-t", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and l[2].isdigit()]
    assert len(rows) == 2, r.stdout
    for row in rows:
        assert float(row.strip("| ").split("|")[-1]) == 0.0, r.stdout


def test_adapters_for_another_model_damaged_or_beside_a_calibration_are_refused(agentkv, adapters, head, tmp_path):
    refused(agentkv, ["-m", "gemma3", "--prm-adapter", adapters], adapters)
    with open(adapters, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0x40
    bad = str(tmp_path / "prm_adapters_bad.gguf")
    with open(bad, "wb") as f:
        f.write(bytes(data))
    refused(agentkv, ["-m", "smollm2", "--prm-adapter", bad], bad)
    refused(agentkv, ["-m", "smollm2", "--prm-calibration", head, "--prm-adapter", adapters], "already has a verifier")
    r = subprocess.run([agentkv, "bench-prm", "-m", "smollm2", "--adapter", adapters, "--calibration", head,
                        "--lengths", "48"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "not both" in r.stderr, r
