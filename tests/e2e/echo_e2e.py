"""End to end: echoes on an `agentkv serve --echo-keep 0.25` this test starts (SmolLM2, int4 diffs).

Each /v1/rounds block is every agent's last answer ("Name: text"), so from the second round on an agent's
own answer, already in its context, is quoted in the block it reads. With --echo-keep the server stores
that answer once: as the block master's rows plus a quarter of its rows, by whole KV blocks. Checked: the
start-up gate names and measures the path with echoes and passes, every round shares and answers, echoes
are stored (agentkv_echo_tokens_total grows from the second round, not in the first), the contexts stay
master + diff, deleting every agent gives every block back; a bad --echo-keep stops the start with one line.
"""
import subprocess

import http_raw

MODEL = "smollm2"
NAMES = ["Ada", "Bram", "Cleo", "Dov", "Esme", "Finn", "Gia", "Hugo"]
ROUNDS = 3
MAX_TOKENS = 40


def test_rounds_store_quoted_answers_once(servers):
    proc, port = servers.start(models=[MODEL], kv_mem="1G", round_sharing=True,
                               extra_args=["--echo-keep", "0.25", "--diff-format", "int4"])
    api = http_raw.ModelMetricsApi(port, MODEL)
    info = [m for m in api.call("GET", "/v1/models")["data"] if m["id"] == MODEL][0]["kv_sharing"]
    print(f"gate: {info.get('quality_gate')}", flush=True)
    assert "echoes keeping 0.25" in info.get("quality_gate", ""), info
    assert info["rounds"], f"the gate did not pass on the path with echoes: {info}"
    ids = [api.call("POST", "/v1/agents", {"model": MODEL, "name": n,
                                           "system": f"You are {n}, a villager of Elm Hollow. Answer in one sentence."},
                    expect=201)["id"] for n in NAMES]
    echoes = []
    for r in range(ROUNDS):
        body = {"agents": ids, "max_tokens": MAX_TOKENS, "temperature": 0}
        if r == 0:
            body["shared"] = ("Town crier: The old bridge washed away in last night's storm, and the mill road "
                              "is under water as far as the chapel.")
            body["instruction"] = "What should the village do? Answer in one sentence."
        out = api.call("POST", "/v1/rounds", body)
        ks = out["kv_sharing"]
        assert ks["mode"] == "tokendance" and ks["agents"] == len(ids) and ks["segment_tokens"] > 0, ks
        for a, aid in zip(out["answers"], ids):
            assert a["agent"] == aid and a["message"]["content"].strip(), a
        api.wait_metric("agentkv_kv_retained_compact_contexts", lambda v: v == len(ids), "contexts kept as master + diff")
        echoes.append(api.metric("agentkv_echo_tokens_total"))
        print(f"round {r + 1}: segment {ks['segment_tokens']} tokens, echo tokens so far {echoes[-1]:.0f}", flush=True)
    # Round 1's context has no earlier shared block to follow, so no echo; rounds 2 and 3 quote every answer.
    assert echoes[0] == 0, echoes
    assert echoes[1] > 0 and echoes[2] > echoes[1], echoes

    for aid in ids:
        api.call("DELETE", f"/v1/agents/{aid}")
    api.wait_metric("agentkv_kv_retained_contexts", lambda v: v == 0, "every agent deleted")
    api.wait_metric("agentkv_kv_retained_compact_blocks", lambda v: v == 0, "every compact block given back")


def test_bad_echo_keep_is_a_one_line_error(agentkv):
    for bad in ["2", "-0.1", "half", ""]:
        out = subprocess.run([agentkv, "serve", "-m", MODEL, "--port", "0", "--echo-keep", bad],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and "--echo-keep" in out.stderr, (bad, out.returncode, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
