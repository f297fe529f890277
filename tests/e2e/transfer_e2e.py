"""End to end: an agent's context handed to another model family through the server,
POST /v1/agents/{id}/transfer (issue 19, deliverable 4).

Fits a small SmolLM2 -> Gemma 3 map at test time (4 passages of Exodus from scripts/make_transfer_corpus.sh,
~12 s on two cores; its quality is the model tests' business, here only its use) and checks:
- serve refuses the map, with one line and a non-zero exit, when its receiver is not served, and when
  the file is damaged (a truncated copy);
- a SmolLM2 agent's context transferred to Gemma 3: the new agent holds Gemma 3's rendering of the same
  messages, its K/V projected (method "transfer", all but BOS transferred), answers a turn resumed
  from that context, and the reply validates against docs/openapi.json;
- the sender is unchanged: its next greedy answer equals that of a twin made in another server
  process (no block shared), and its resident tokens stay;
- after that answer the sender's cache lacks the closing marker of its rendering: the receiver
  computes the tokens the sender does not hold itself and projects the rest;
- recompute (hybrid by deviation) reports its check layers, recomputed tokens and native work, and at
  share 1 is Gemma 3's native prefill exactly too (byte-identical reply); so does rare_share (hybrid by
  rarity, ranked by the token counts the map keeps), which does not combine with recompute, and whose
  rare_max_tokens caps the count of rare tokens (a 400 without rare_share);
- native_last covering the context (share 1; or native_share 1) is Gemma 3's native prefill exactly: the receiver's
  greedy reply is byte-identical to a native Gemma 3 agent's with the same messages (in the other
  process, so that neither reads the other's blocks from the prefix cache);
- /metrics counts the transfers and transferred tokens per receiver model;
- errors: unknown agent or model 404, the agent's own model and a pair without a map 400 naming it,
  bad fields 400 naming them, an agent without a resident context 409.
- the reverse direction with both maps served: a Gemma 3 agent handed to SmolLM2 answers, at share 1
  byte-identical to a native SmolLM2 agent; the transferred agent handed back to Gemma 3 answers too;
  the Gemma 3 sender is unchanged.
"""
import math
import os
import re
import subprocess

import pytest

import http_raw
from conftest import SRC
from openapi_e2e import check_reply, load_doc

SYSTEM = "You are a dispatcher's assistant. Answer in one short sentence."
MESSAGES = [
    {"role": "user", "content": "Remember this: the courier's name is Tamsin and the parcel goes to Harbour Street 12."},
    {"role": "assistant", "content": "Noted: Tamsin takes the parcel to Harbour Street 12."},
]
QUESTION = {"messages": [{"role": "user", "content": "Who takes the parcel, and where?"}], "max_tokens": 24,
            "temperature": 0}
MAP_ARGS = ("--chat-sharing", "off")


def fit_map(agentkv, d, sender, receiver):
    corpus, out = str(d / "corpus.txt"), str(d / f"{sender}-{receiver}.gguf")
    if not os.path.exists(corpus):
        subprocess.run(["bash", os.path.join(SRC, "scripts", "make_transfer_corpus.sh"), corpus, "ex:1-4"], check=True,
                       capture_output=True, timeout=120)
    r = subprocess.run([agentkv, "fit-transfer", "--from", sender, "--to", receiver, "--corpus", corpus, "--out", out,
                        "--max-passages", "4", "--max-bytes", "1500", "-t", "2"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def map_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("transfer_e2e")


@pytest.fixture(scope="module")
def s2g_map(agentkv, map_dir):
    return fit_map(agentkv, map_dir, "smollm2", "gemma3")


@pytest.fixture(scope="module")
def g2s_map(agentkv, map_dir):
    return fit_map(agentkv, map_dir, "gemma3", "smollm2")


def refused(binary, args, needle):
    r = subprocess.run([binary, "serve", *args, "--port", "0", "--round-sharing", "off", "--chat-sharing", "off",
                        "-t", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_serve_refuses_a_map_for_another_pair_or_a_damaged_one(agentkv, s2g_map, tmp_path):
    refused(agentkv, ["-m", "smollm2", "--transfer-map", s2g_map], "gemma3 is not served")
    with open(s2g_map, "rb") as f:
        data = f.read()
    truncated = tmp_path / "s2g-truncated.gguf"
    truncated.write_bytes(data[:len(data) // 2])
    refused(agentkv, ["-m", "smollm2", "-m", "gemma3", "--transfer-map", str(truncated)], str(truncated))


def model_metric(port, name, model):
    r = http_raw.request(port, "GET", "/metrics")
    assert r.status == 200, r.status
    m = re.search(rf'^{name}\{{model="{model}"\}} (\S+)$', r.body.decode(), re.M)
    assert m, name
    return float(m.group(1))


def create(api, model, **extra):
    return api.call("POST", "/v1/agents", {"model": model, "system": SYSTEM, "messages": MESSAGES, **extra}, expect=201)


def transfer(doc, port, agent_id, body, expect=201):
    r = http_raw.request(port, "POST", f"/v1/agents/{agent_id}/transfer", body=body, timeout=300)
    assert r is not None and r.status == expect, (body, r and r.status, r and r.body[:500])
    check_reply(doc, "POST", f"/v1/agents/{agent_id}/transfer", r)
    return r.json()


def answer(api, agent_id):
    return api.call("POST", f"/v1/agents/{agent_id}/respond", QUESTION)


def test_transfer_through_the_server(servers, s2g_map):
    doc = load_doc()
    _, port = servers.start(models=("smollm2", "gemma3"), extra_args=("--transfer-map", s2g_map, *MAP_ARGS))
    # The references live in another process: nothing they compute reaches the first server's caches.
    _, ref_port = servers.start(models=("smollm2", "gemma3"), extra_args=MAP_ARGS)
    api, ref = http_raw.JsonApi(port), http_raw.JsonApi(ref_port)

    sender = create(api, "smollm2", name="Planner")
    sid = sender["id"]

    # Pure transfer: everything but the receiver's BOS is projected from the sender's cache.
    t = transfer(doc, port, sid, {"model": "gemma3", "name": "Executor", "native_last": 0})
    x = t["transfer"]
    assert t["model"] == "gemma3" and t["name"] == "Executor" and t["transferred_from"] == sid, t
    assert t["messages"] == sender["messages"] and t["resident_tokens"] == x["context_tokens"], t
    assert x["method"] == "transfer" and x["native_last"] == 0 and x["from_model"] == "smollm2", x
    assert x["sender_tokens"] == sender["resident_tokens"], (x, sender)
    assert x["native_tokens"] == 1 and x["transferred_tokens"] == x["context_tokens"] - 1, x
    assert x["seconds"] > 0, x
    # The context is Gemma 3's own rendering of the messages: a native agent's holds as many tokens.
    native_ref = create(ref, "gemma3")
    assert native_ref["resident_tokens"] == x["context_tokens"], (native_ref, x)

    # The new agent answers, resuming from the transferred context.
    got = answer(api, t["id"])
    assert got["finish_reason"] in ("stop", "length") and isinstance(got["message"]["content"], str), got
    assert got["usage"]["prompt_tokens_details"]["cached_tokens"] >= x["context_tokens"] - 8, got

    # Share 1: the receiver computes the whole context itself, which is its native prefill exactly.
    h = transfer(doc, port, sid, {"model": "gemma3", "native_last": 1 << 20})
    y = h["transfer"]
    assert y["method"] == "hybrid" and y["native_last"] == 1 << 20, y
    assert y["transferred_tokens"] == 0 and y["native_tokens"] == y["context_tokens"] == x["context_tokens"], y
    assert y["native_prefill_seconds_estimate"] is not None and y["native_prefill_seconds_estimate"] > 0, y
    assert answer(api, h["id"])["message"]["content"] == answer(ref, native_ref["id"])["message"]["content"]

    # A hybrid share in between: the last 16 tokens computed by the receiver.
    k = transfer(doc, port, sid, {"model": "gemma3", "native_last": 16})["transfer"]
    assert k["method"] == "hybrid" and k["native_tokens"] == 17 and k["transferred_tokens"] == k["context_tokens"] - 17, k

    # Hybrid by deviation: layers 0-1 native for every transferred token, the share asked for through
    # every layer; at share 1 that is native prefill exactly again.
    d = transfer(doc, port, sid, {"model": "gemma3", "recompute": 0.25, "native_last": 0})["transfer"]
    assert d["method"] == "hybrid" and d["check_layers"] == 2 and d["recompute"] == 0.25, d
    assert d["recomputed_tokens"] == math.ceil(0.25 * d["transferred_tokens"]), d
    assert 0.25 < d["native_work"] < 0.5, d
    full = transfer(doc, port, sid, {"model": "gemma3", "recompute": 1, "native_last": 0})
    f = full["transfer"]
    assert f["recomputed_tokens"] == f["transferred_tokens"] == f["context_tokens"] - 1 and f["native_work"] == 1, f
    assert answer(api, full["id"])["message"]["content"] == answer(ref, native_ref["id"])["message"]["content"]

    # The suffix as a share: 1 is native prefill exactly; a share alone asks for no 128-token minimum.
    whole = transfer(doc, port, sid, {"model": "gemma3", "native_share": 1})
    assert whole["transfer"]["transferred_tokens"] == 0 and whole["transfer"]["native_last"] == 0, whole
    assert answer(api, whole["id"])["message"]["content"] == answer(ref, native_ref["id"])["message"]["content"]
    part = transfer(doc, port, sid, {"model": "gemma3", "native_share": 0.1})["transfer"]
    assert part["native_tokens"] == 1 + math.ceil(0.1 * part["context_tokens"]), part

    # Hybrid by rarity (the map kept its fitting text's token counts): the context's rarest 5% of tokens,
    # each with 4 tokens before it and 1 after, recomputed through every layer, with no check pass; at share 1
    # every transferred token is, in order, which is native prefill exactly.
    r = transfer(doc, port, sid, {"model": "gemma3", "rare_share": 0.05, "native_last": 0})["transfer"]
    assert r["method"] == "hybrid" and r["rare_share"] == 0.05 and r["check_layers"] == 0, r
    want = math.ceil(0.05 * r["context_tokens"])
    assert want <= r["recomputed_tokens"] <= min(6 * want, r["transferred_tokens"]), r
    assert r["native_work"] == pytest.approx((1 + r["recomputed_tokens"]) / r["context_tokens"]), r
    # rare_max_tokens caps the count: one rare token, with its 4 before and 1 after, however large the share.
    one = transfer(doc, port, sid, {"model": "gemma3", "rare_share": 0.5, "rare_max_tokens": 1, "native_last": 0})
    assert one["transfer"]["rare_max_tokens"] == 1 and 1 <= one["transfer"]["recomputed_tokens"] <= 6, one
    alone = transfer(doc, port, sid, {"model": "gemma3", "rare_max_tokens": 8}, expect=400)["error"]
    assert alone["param"] == "rare_max_tokens" and "rare_share" in alone["message"], alone
    every = transfer(doc, port, sid, {"model": "gemma3", "rare_share": 1, "native_last": 0})
    assert every["transfer"]["recomputed_tokens"] == every["transfer"]["transferred_tokens"], every
    assert answer(api, every["id"])["message"]["content"] == answer(ref, native_ref["id"])["message"]["content"]
    both = transfer(doc, port, sid, {"model": "gemma3", "rare_share": 0.05, "recompute": 0.1}, expect=400)["error"]
    assert both["param"] == "rare_share" and "recompute" in both["message"], both

    # The sender is unchanged: same resident context, and the same greedy answer as an untouched twin.
    assert api.call("GET", f"/v1/agents/{sid}")["resident_tokens"] == sender["resident_tokens"]
    twin = create(ref, "smollm2")
    assert answer(api, sid)["message"]["content"] == answer(ref, twin["id"])["message"]["content"]

    # Counted per receiver model.
    assert model_metric(port, "agentkv_transfers_total", "gemma3") == 10
    assert model_metric(port, "agentkv_transferred_tokens_total", "gemma3") == \
        x["transferred_tokens"] + k["transferred_tokens"] + d["transferred_tokens"] + f["transferred_tokens"] + \
        part["transferred_tokens"] + r["transferred_tokens"] + one["transfer"]["transferred_tokens"] + \
        every["transfer"]["transferred_tokens"]
    assert model_metric(port, "agentkv_transfers_total", "smollm2") == 0

    # Naming no hybrid field, with a map that kept its fitting text's token counts (this one), the default
    # hybrid is by rarity: the context's 2% rarest tokens (at most 24), each with 4 before and 1 after, and
    # its last 10%. (A map without counts gets the last 15% and at least 128 tokens: unit-tested.)
    dflt = transfer(doc, port, sid, {"model": "gemma3"})["transfer"]
    assert dflt["rare_share"] == 0.02 and dflt["rare_max_tokens"] == 24 and dflt["native_share"] == 0.1 and \
        dflt["native_last"] == 0 and dflt["method"] == "hybrid", dflt
    assert dflt["native_tokens"] == 1 + math.ceil(0.1 * dflt["context_tokens"]), dflt
    want = min(24, math.ceil(0.02 * dflt["context_tokens"]))
    assert want <= dflt["recomputed_tokens"] <= 6 * want, dflt
    assert dflt["native_work"] == pytest.approx((dflt["native_tokens"] + dflt["recomputed_tokens"]) /
                                                dflt["context_tokens"]), dflt

    # After a turn the sender's cache holds its rendering up to its answer but not the closing marker:
    # the receiver computes what the sender lacks itself, projects the rest, and answers.
    z = transfer(doc, port, sid, {"model": "gemma3", "native_last": 0})
    w = z["transfer"]
    assert w["context_tokens"] > x["context_tokens"] and w["sender_tokens"] > x["sender_tokens"], (w, x)
    assert w["method"] == "hybrid" and 1 < w["native_tokens"] < 8, w
    assert w["transferred_tokens"] + w["native_tokens"] == w["context_tokens"], w
    assert answer(api, z["id"])["finish_reason"] in ("stop", "length")

    # Errors.
    transfer(doc, port, "agent-missing", {"model": "gemma3"}, expect=404)
    transfer(doc, port, sid, {"model": "nope"}, expect=404)
    own = transfer(doc, port, sid, {"model": "smollm2"}, expect=400)["error"]
    assert own["param"] == "model" and "another served model" in own["message"], own
    back = transfer(doc, port, t["id"], {"model": "smollm2"}, expect=400)["error"]
    assert back["param"] == "model" and "gemma3 -> smollm2" in back["message"], back
    for body, field in (({}, "model"), ({"model": "gemma3", "native_last": -1}, "native_last"),
                        ({"model": "gemma3", "recompute": 1.5}, "recompute"), ({"model": "gemma3", "recompute": "all"}, "recompute"),
                        ({"model": "gemma3", "native_last": "all"}, "native_last"), ({"model": "gemma3", "colour": 1}, "colour"),
                        ({"model": "gemma3", "native_share": 2}, "native_share"),
                        ({"model": "gemma3", "rare_share": -0.1}, "rare_share")):
        assert transfer(doc, port, sid, body, expect=400)["error"]["param"] == field, body
    empty = api.call("POST", "/v1/agents", {"model": "smollm2", "prefill": False}, expect=201)
    transfer(doc, port, empty["id"], {"model": "gemma3"}, expect=409)
    # The refusals left the sender idle and as it was.
    assert api.call("GET", f"/v1/agents/{sid}")["busy"] is False


def test_transfer_back_and_forth_with_both_maps(servers, s2g_map, g2s_map):
    doc = load_doc()
    maps = ("--transfer-map", f"{s2g_map},{g2s_map}", *MAP_ARGS)
    _, port = servers.start(models=("smollm2", "gemma3"), extra_args=maps)
    _, ref_port = servers.start(models=("smollm2", "gemma3"), extra_args=MAP_ARGS)
    api, ref = http_raw.JsonApi(port), http_raw.JsonApi(ref_port)

    sender = create(api, "gemma3", name="Planner")
    sid = sender["id"]
    t = transfer(doc, port, sid, {"model": "smollm2", "name": "Executor", "native_last": 0})
    x = t["transfer"]
    assert t["model"] == "smollm2" and x["from_model"] == "gemma3" and x["method"] == "transfer", x
    native_ref = create(ref, "smollm2")
    assert native_ref["resident_tokens"] == x["context_tokens"], (native_ref, x)
    assert x["transferred_tokens"] == x["context_tokens"] - x["native_tokens"] and x["native_tokens"] <= 1, x
    got = answer(api, t["id"])
    assert got["finish_reason"] in ("stop", "length") and isinstance(got["message"]["content"], str), got

    # Share 1 through the deviation path: SmolLM2's native prefill exactly.
    full = transfer(doc, port, sid, {"model": "smollm2", "recompute": 1, "native_last": 0})
    assert full["transfer"]["native_work"] == 1, full
    assert answer(api, full["id"])["message"]["content"] == answer(ref, native_ref["id"])["message"]["content"]

    # The default hybrid, then the executor's context handed back to Gemma 3 (after its own turn).
    dflt = transfer(doc, port, sid, {"model": "smollm2"})["transfer"]
    assert dflt["rare_share"] == 0.02 and dflt["method"] == "hybrid", dflt
    back = transfer(doc, port, t["id"], {"model": "gemma3", "name": "Reviewer"})
    assert back["model"] == "gemma3" and back["transfer"]["from_model"] == "smollm2", back
    assert answer(api, back["id"])["finish_reason"] in ("stop", "length")

    # The Gemma 3 sender is unchanged.
    assert api.call("GET", f"/v1/agents/{sid}")["resident_tokens"] == sender["resident_tokens"]
    twin = create(ref, "gemma3")
    assert answer(api, sid)["message"]["content"] == answer(ref, twin["id"])["message"]["content"]
    assert model_metric(port, "agentkv_transfers_total", "smollm2") == 3
    assert model_metric(port, "agentkv_transfers_total", "gemma3") == 1
