"""End to end: the agents and rounds API of an `agentkv serve` this test starts (both models).

Run under pytest (conftest.py), one test per model (test_agents_and_rounds[smollm2], [gemma3]), each
with its own server. The server serves both models; on the test's model: 25 agents with personas, 3
all-gather rounds (the first with caller text, then every agent's previous answers), every agent reusing its resident context; a fresh agent's first greedy
answer equals /v1/chat/completions on the same messages; fork; TTL expiry; API errors leave agents
untouched; deleting agents returns their KV blocks (all of them at the end, read from /metrics).
Rounds share the block's KV collectively (TokenDance) when the model passed the server's start-up
quality gate, and a round at recompute 1 gives exactly the answers of the same round with sharing
off (kv_sharing false), on forks of the same agents.
"""
import re
import time

import pytest

import http_raw

MODELS = ["smollm2", "gemma3"]
N_AGENTS = 25
ROUNDS = 3
MAX_TOKENS = 8
BLOCK = 16  # the server's KV block size: a resumed context may lose at most one partial block

NAMES = ["Ada", "Bram", "Cleo", "Dov", "Esme", "Finn", "Gia", "Hugo", "Ines", "Jude", "Kai", "Lena", "Milo",
         "Nia", "Otto", "Pia", "Quinn", "Rosa", "Sami", "Tess", "Uma", "Vic", "Wren", "Xavi", "Yara"]
JOBS = ["baker", "blacksmith", "teacher", "farmer", "doctor", "painter", "fisher", "tailor", "miller", "carpenter"]
TRAITS = ["cheerful", "grumpy", "curious", "shy", "talkative", "careful", "bold", "dreamy"]


class Api(http_raw.JsonApi):
    def metric(self, name, model):
        text = self.call("GET", "/metrics")
        m = re.search(r"^%s\{model=\"%s\"\} (\S+)$" % (name, model), text, re.M)
        assert m, (name, model)
        return float(m.group(1))

    def wait_metric(self, name, model, pred, what):
        # Releases run on the engine thread after the reply; the metrics snapshot follows its next step.
        deadline = time.time() + 10
        while time.time() < deadline:
            v = self.metric(name, model)
            if pred(v):
                return v
            time.sleep(0.05)
        raise AssertionError(f"{what}: {name}{{model={model}}} = {self.metric(name, model)}")


def persona(i):
    return (f"You are {NAMES[i]}, a {TRAITS[i % len(TRAITS)]} {JOBS[i % len(JOBS)]} in the village of Elm Hollow. "
            f"You have lived here for {10 + 3 * i} years and you know everyone. Speak in the first person.")


def check_model(api, model):
    agents = []
    for i in range(N_AGENTS):
        a = api.call("POST", "/v1/agents", {"model": model, "name": NAMES[i], "system": persona(i)}, expect=201)
        assert a["object"] == "agent" and a["model"] == model and a["resident_tokens"] > 10, a
        agents.append(a)
    ids = [a["id"] for a in agents]
    assert api.metric("agentkv_agents_resident", model) == N_AGENTS
    api.wait_metric("agentkv_kv_retained_contexts", model, lambda v: v == N_AGENTS, "contexts pinned at creation")

    # A fresh agent answers exactly like a chat completion on the same messages (greedy): its resident
    # context was prefilled as prompt tokens, the same computation the completion does.
    question = "What do you like most about your work? Answer in one sentence."
    probe = api.call("POST", "/v1/agents", {"model": model, "name": "Probe", "system": persona(3)}, expect=201)
    ans = api.call("POST", f"/v1/agents/{probe['id']}/respond",
                   {"messages": [{"role": "user", "content": question}], "max_tokens": 16, "temperature": 0})
    chat = api.call("POST", "/v1/chat/completions",
                    {"model": model, "max_tokens": 16, "temperature": 0,
                     "messages": [{"role": "system", "content": persona(3)}, {"role": "user", "content": question}]})
    assert ans["message"]["content"] == chat["choices"][0]["message"]["content"], (ans, chat)
    assert ans["usage"]["prompt_tokens_details"]["cached_tokens"] >= probe["resident_tokens"] - BLOCK, (ans, probe)

    # Fork: the child continues from the parent's context; the parent is unchanged.
    child = api.call("POST", f"/v1/agents/{probe['id']}/fork", {"name": "Probe2"}, expect=201)
    assert child["resident_tokens"] == api.call("GET", f"/v1/agents/{probe['id']}")["resident_tokens"], child
    c_ans = api.call("POST", f"/v1/agents/{child['id']}/respond",
                     {"messages": [{"role": "user", "content": "And what do you dislike?"}], "max_tokens": 8,
                      "temperature": 0})
    assert c_ans["usage"]["prompt_tokens_details"]["cached_tokens"] >= child["resident_tokens"] - BLOCK, c_ans
    assert api.call("GET", f"/v1/agents/{probe['id']}")["messages"] == 3
    assert api.call("GET", f"/v1/agents/{child['id']}")["messages"] == 5

    # Errors change nothing.
    before = api.call("GET", f"/v1/agents/{ids[0]}")
    api.call("POST", "/v1/rounds", {"agents": [ids[0], "agent-nope"], "shared": "x"}, expect=404)
    api.call("POST", "/v1/rounds", {"agents": [ids[0], ids[0]], "shared": "x"}, expect=400)
    api.call("POST", "/v1/rounds", {"agents": [ids[0]]}, expect=400)  # nobody answered yet, no shared text
    api.call("POST", f"/v1/agents/{ids[0]}/respond", {"max_tokens": "many"}, expect=400)
    api.call("POST", f"/v1/agents/{ids[0]}/respond", {"tools": []}, expect=400)
    api.call("POST", f"/v1/agents/{ids[0]}/respond", {"max_tokens": 10 ** 9}, expect=400)
    api.call("POST", "/v1/agents", {"model": model, "ttl_seconds": -5}, expect=400)
    api.call("POST", "/v1/agents", {"model": "no-such-model"}, expect=404)
    api.call("PUT", f"/v1/agents/{ids[0]}", {}, expect=405)
    api.call("POST", f"/v1/agents/{ids[0]}/dance", {}, expect=404)
    after = api.call("GET", f"/v1/agents/{ids[0]}")
    assert before["messages"] == after["messages"] and before["resident_tokens"] == after["resident_tokens"]

    # Three all-gather rounds for all 25 agents, sharing the block's KV if the model passed the gate.
    info = [m for m in api.call("GET", "/v1/models")["data"] if m["id"] == model][0]["kv_sharing"]
    sharing_on = info["rounds"]
    print(f"{model}: kv sharing in rounds: {sharing_on} ({info.get('quality_gate')})", flush=True)
    last_completion = {}
    for r in range(ROUNDS):
        resident = {a["id"]: a["resident_tokens"] for a in api.call("GET", "/v1/agents")["data"]}
        body = {"agents": ids, "max_tokens": MAX_TOKENS, "temperature": 0}
        if r == 0:
            body["shared"] = "Town crier: The old bridge washed away in last night's storm."
            body["instruction"] = "What should the village do? Answer in one sentence."
        out = api.call("POST", "/v1/rounds", body)
        assert out["object"] == "round" and len(out["answers"]) == N_AGENTS, out
        ks = out["kv_sharing"]
        if sharing_on:
            assert ks["mode"] == "tokendance" and ks["agents"] == N_AGENTS and ks["segment_tokens"] > 0, ks
            assert 0 < ks["recomputed_tokens"] < N_AGENTS * ks["segment_tokens"], ks
        else:
            assert ks["mode"] == "exact" and "quality gate" in ks["reason"], ks
        if r > 0:
            for i, a in enumerate(out["answers"][:3]):
                assert f"{NAMES[i]}: " in out["shared"], out["shared"][:300]
        for a, aid in zip(out["answers"], ids):
            assert a["agent"] == aid and a["finish_reason"] in ("stop", "length"), a
            u = a["usage"]
            assert 0 < u["completion_tokens"] <= MAX_TOKENS or a["finish_reason"] == "stop", a
            # The whole resident context is reused, up to one block cut at the divergence point and
            # the agent's last answer where the template rewrites it (Gemma's trims whitespace).
            slack = BLOCK + (last_completion.get(aid, 0) if model == "gemma3" else 0)
            assert u["prompt_tokens_details"]["cached_tokens"] >= resident[aid] - slack, (r, a, resident[aid])
            last_completion[aid] = u["completion_tokens"]
        cached = out["usage"]["prompt_tokens_details"]["cached_tokens"]
        print(f"{model} round {r + 1}: {N_AGENTS} answers, prompt tokens {out['usage']['prompt_tokens']}, "
              f"cached {cached}", flush=True)
    for a in api.call("GET", "/v1/agents")["data"]:
        if a["id"] in ids:
            assert a["messages"] == 1 + 2 * ROUNDS, a
    # Between rounds every shared agent's context is kept as master + sparse diff, not densely.
    if sharing_on:
        api.wait_metric("agentkv_kv_retained_compact_contexts", model, lambda v: v == N_AGENTS, "compact contexts")

    # Sharing at recompute 1 is exact: forks of the same agents answer a round identically with it and
    # without it (greedy; the same piecewise tokenization either way).
    twins = [[api.call("POST", f"/v1/agents/{aid}/fork", {"name": f"Twin{k}"}, expect=201)["id"]
              for k, aid in enumerate(ids[:4])] for _ in range(2)]
    same = {"shared": "Town crier: The new bridge opens tomorrow at noon.\nMayor: Everyone is invited.",
            "instruction": "Will you come? Answer in one sentence.", "max_tokens": MAX_TOKENS, "temperature": 0}
    exact = api.call("POST", "/v1/rounds", dict(same, agents=twins[0], kv_sharing=False))
    assert exact["kv_sharing"]["mode"] == "exact" and exact["kv_sharing"]["reason"] == "kv_sharing is false", exact
    full = api.call("POST", "/v1/rounds", dict(same, agents=twins[1], recompute=1))
    if sharing_on:
        assert full["kv_sharing"]["mode"] == "tokendance", full["kv_sharing"]
        assert full["kv_sharing"]["recomputed_tokens"] == 4 * full["kv_sharing"]["segment_tokens"], full["kv_sharing"]
    assert [a["message"]["content"] for a in exact["answers"]] == [a["message"]["content"] for a in full["answers"]], \
        (exact["answers"], full["answers"])
    # A second round (the default all-gather block: their identical answers) resumes the shared twins from
    # master–diff storage, rebuilt bit for bit: the answers stay identical.
    again = {"max_tokens": MAX_TOKENS, "temperature": 0, "instruction": "Anything else? One sentence."}
    exact2 = api.call("POST", "/v1/rounds", dict(again, agents=twins[0], kv_sharing=False))
    full2 = api.call("POST", "/v1/rounds", dict(again, agents=twins[1], recompute=1))
    assert exact2["shared"] == full2["shared"]
    assert [a["message"]["content"] for a in exact2["answers"]] == [a["message"]["content"] for a in full2["answers"]], \
        (exact2["answers"], full2["answers"])
    api.call("POST", "/v1/rounds", dict(same, agents=twins[0], recompute=1.5), expect=400)
    api.call("POST", "/v1/rounds", dict(same, agents=twins[0], kv_sharing="yes"), expect=400)
    for aid in twins[0] + twins[1]:
        api.call("DELETE", f"/v1/agents/{aid}")

    # TTL: an idle agent past its TTL is removed and its context released.
    # The count is known (the round agents, the probe and its child); the metrics snapshot lags the engine
    # by a step, so each expected value is waited for rather than read once.
    resident_n = len(ids) + 2
    api.wait_metric("agentkv_kv_retained_contexts", model, lambda v: v == resident_n, "resident contexts")
    short = api.call("POST", "/v1/agents", {"model": model, "system": "You are brief.", "ttl_seconds": 2}, expect=201)
    api.wait_metric("agentkv_kv_retained_contexts", model, lambda v: v == resident_n + 1, "short-lived agent resident")
    time.sleep(4)  # TTL 2 s, and the sweeper wakes once a second
    api.call("GET", f"/v1/agents/{short['id']}", expect=404)
    api.wait_metric("agentkv_kv_retained_contexts", model, lambda v: v == resident_n, "expired agent released")

    # Deleting agents gives their blocks back; after the last one, nothing is pinned or used.
    used = api.wait_metric("agentkv_kv_blocks_used", model, lambda v: v > 0, "blocks used by resident agents")
    api.call("DELETE", f"/v1/agents/{ids[0]}")
    api.call("GET", f"/v1/agents/{ids[0]}", expect=404)
    api.call("DELETE", f"/v1/agents/{ids[0]}", expect=404)
    api.wait_metric("agentkv_kv_blocks_used", model, lambda v: v < used, "a deleted agent's blocks return")
    for aid in ids[1:] + [probe["id"], child["id"]]:
        api.call("DELETE", f"/v1/agents/{aid}")
    # What is still used is the chat-sharing cache's kept context of the chat completion above.
    kept = api.metric("agentkv_segment_blocks", model)
    api.wait_metric("agentkv_kv_blocks_used", model, lambda v: v == kept, "every agent deleted")
    assert api.metric("agentkv_kv_retained_contexts", model) == 0
    assert api.metric("agentkv_agents_resident", model) == 0


@pytest.mark.parametrize("model", MODELS)
def test_agents_and_rounds(servers, model):
    proc, port = servers.start(models=MODELS, kv_mem="2G", round_sharing=True)
    check_model(Api(port), model)
    proc.terminate()
    rc = proc.wait(timeout=60)
    assert rc == 0, f"server rc={rc}"
