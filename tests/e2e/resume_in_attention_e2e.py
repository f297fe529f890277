"""End to end: rounds of agents on an `agentkv serve --resume-in-attention on --diff-format int4` this test
starts (SmolLM2): diffs stored int4, each turn reading its own round's run losslessly.

The server's start-up quality gate measures the rounds' sharing path as served (read in attention); on
a pass, 12 agents run 3 all-gather rounds sharing each block (TokenDance), every turn reading its
master + diff context inside attention. Checked: the gate names the path, every round shares and
answers, the contexts stay master + diff between rounds (/metrics), a context fork answers the next
round exactly as its original does (both read in attention, greedy), and deleting every agent gives
every block back. The same with --master-context agent (each round's block master computed in a sharing
agent's own context, the one the prefix cache holds most of): the gate names and measures that path too,
and every round's report names where its master was computed. A bad --master-context stops the
start with one line.
"""
import subprocess

import pytest

import http_raw

MODEL = "smollm2"
N_AGENTS = 12
ROUNDS = 3
MAX_TOKENS = 12
NAMES = ["Ada", "Bram", "Cleo", "Dov", "Esme", "Finn", "Gia", "Hugo", "Ines", "Jude", "Kai", "Lena"]


@pytest.mark.parametrize("master", ["block", "agent"])
def test_rounds_read_in_attention(servers, master):
    proc, port = servers.start(models=[MODEL], kv_mem="1G", round_sharing=True,
                               extra_args=["--resume-in-attention", "on", "--diff-format", "int4",
                                           "--master-context", master])
    api = http_raw.ModelMetricsApi(port, MODEL)
    info = [m for m in api.call("GET", "/v1/models")["data"] if m["id"] == MODEL][0]["kv_sharing"]
    print(f"gate: {info.get('quality_gate')}", flush=True)
    assert "read in attention" in info.get("quality_gate", ""), info
    assert ("masters in an agent's context" in info["quality_gate"]) == (master == "agent"), info
    assert info["rounds"], f"the gate did not pass on the path read in attention: {info}"
    ids = [api.call("POST", "/v1/agents", {"model": MODEL, "name": n,
                                           "system": f"You are {n}, a villager of Elm Hollow. Answer briefly."},
                    expect=201)["id"] for n in NAMES]
    for r in range(ROUNDS):
        body = {"agents": ids, "max_tokens": MAX_TOKENS, "temperature": 0}
        if r == 0:
            body["shared"] = "Town crier: The old bridge washed away in last night's storm."
            body["instruction"] = "What should the village do? Answer in one sentence."
        out = api.call("POST", "/v1/rounds", body)
        ks = out["kv_sharing"]
        assert ks["mode"] == "tokendance" and ks["agents"] == N_AGENTS and ks["segment_tokens"] > 0, ks
        assert 0 < ks["recomputed_tokens"] < N_AGENTS * ks["segment_tokens"], ks
        assert ks["master_context"] == master, ks  # 1G holds an agent's context as the master: no fallback
        assert len(out["answers"]) == N_AGENTS
        for a, aid in zip(out["answers"], ids):
            assert a["agent"] == aid and a["finish_reason"] in ("stop", "length"), a
            assert a["message"]["content"].strip(), a
        print(f"round {r + 1}: segment {ks['segment_tokens']} tokens, recomputed {ks['recomputed_tokens']}", flush=True)
        api.wait_metric("agentkv_kv_retained_compact_contexts", lambda v: v == N_AGENTS, "contexts kept as master + diff")

    # A fork of a compact context is read the same way: the original and its fork answer one more
    # round (sharing off: nothing blended now, only the resumed contexts read in attention) identically.
    twins = [ids[0], api.call("POST", f"/v1/agents/{ids[0]}/fork", {"name": "Twin"}, expect=201)["id"]]
    answers = []
    for aid in twins:
        out = api.call("POST", "/v1/rounds", {"agents": [aid], "shared": "Mayor: The new bridge opens tomorrow.",
                                              "instruction": "Will you come? One sentence.",
                                              "max_tokens": MAX_TOKENS, "temperature": 0, "kv_sharing": False})
        answers.append(out["answers"][0]["message"]["content"])
    assert answers[0] == answers[1], answers

    for aid in ids + twins[1:]:
        api.call("DELETE", f"/v1/agents/{aid}")
    api.wait_metric("agentkv_kv_retained_contexts", lambda v: v == 0, "every agent deleted")
    api.wait_metric("agentkv_kv_blocks_used", lambda v: v == api.metric("agentkv_segment_blocks"), "every block back")
    http_raw.stop_server(proc)
    assert proc.returncode == 0


def test_bad_master_context_is_a_one_line_error(agentkv):
    for bad in ["agents", "Block", ""]:
        out = subprocess.run([agentkv, "serve", "-m", MODEL, "--port", "0", "--master-context", bad],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and "--master-context" in out.stderr, (bad, out.returncode, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
