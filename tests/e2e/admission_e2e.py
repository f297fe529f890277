"""End to end: admission before work (issue 21, defect 5). With most of a small KV budget pinned by an
agent's resident context, a request whose worst case (prompt + max_tokens, or a round's sum) cannot fit
the KV that is not pinned is refused at once, before any prefill, with one status on every route: 507,
a message naming the blocks it needs and those free of pins, and Retry-After (the pins can go). The
server keeps serving, a request that fits is answered, and no block is left behind once the agents go.
"""
import json
import time

import pytest

from http_raw import metrics, request

KV_MEM = "48M"  # smollm2: a few hundred blocks of 16 tokens
FAST_S = 1.0    # a refusal does no work: well under a second (a prefill of the request takes longer)


@pytest.fixture(scope="module")
def port(module_servers):
    _, p = module_servers.start(kv_mem=KV_MEM)
    return p


def post(port, path, body):
    t0 = time.time()
    r = request(port, "POST", path, body, timeout=300)
    assert r is not None, path
    return r, time.time() - t0


def check_refused(r, dt, what):
    assert r.status == 507, (what, r.status, r.body[:400])
    err = r.json()["error"]
    assert "KV blocks" in err["message"] and "free of pins" in err["message"], (what, err)
    assert r.headers.get("retry-after") == "2", (what, r.headers)
    assert dt < FAST_S, (what, f"refused after {dt:.2f}s: work was done first")


def text_of_tokens(n):
    # " a" is one token in smollm2's vocabulary: n of them are about n tokens.
    return " ".join(["a"] * n)


def test_refused_up_front_when_pins_hold_the_kv(port):
    m0 = metrics(port)
    total, bs = int(m0["agentkv_kv_blocks_total"]), 16
    # One agent whose resident context pins about 80% of the budget.
    big = post(port, "/v1/agents", {"model": "smollm2", "prefill": True,
                                    "messages": [{"role": "user", "content": text_of_tokens(int(total * bs * 0.8))}]})[0]
    assert big.status == 201, big.body[:400]
    big_id = big.json()["id"]
    small_ids = []
    for _ in range(3):  # agents without resident KV (nothing pinned for them)
        r = post(port, "/v1/agents", {"model": "smollm2", "prefill": False,
                                      "messages": [{"role": "system", "content": "Answer briefly."}]})[0]
        assert r.status == 201, r.body[:400]
        small_ids.append(r.json()["id"])
    m = metrics(port)
    pinned = m["agentkv_kv_blocks_used"] - m["agentkv_segment_blocks"]
    unpinned = total - pinned
    assert pinned > 0.7 * total, m
    # max_tokens whose blocks alone are more than the unpinned KV, but fewer than the whole budget.
    over = int((unpinned + 8) * bs)
    assert over < total * bs
    finished_before = m["agentkv_tokens_prefilled_total"]

    r, dt = post(port, "/v1/completions", {"model": "smollm2", "prompt": "Once upon a time", "max_tokens": over})
    check_refused(r, dt, "completion")
    chat = {"model": "smollm2", "messages": [{"role": "user", "content": "Tell a story."}], "max_tokens": over}
    r, dt = post(port, "/v1/chat/completions", chat)
    check_refused(r, dt, "chat completion")
    r, dt = post(port, "/v1/chat/completions", dict(chat, stream=True))
    check_refused(r, dt, "streamed chat completion")  # a status, not a stream that fails later
    r, dt = post(port, "/v1/completions", {"model": "smollm2", "prompt": "Once", "max_tokens": over, "stream": True})
    check_refused(r, dt, "streamed completion")
    r, dt = post(port, f"/v1/agents/{small_ids[0]}/respond",
                 {"messages": [{"role": "user", "content": "Go on."}], "max_tokens": over})
    check_refused(r, dt, "agent respond")
    # A round runs in waves when its turns do not all fit at once (engine/collective_round.h), so it is
    # refused up front only when one turn alone cannot fit.
    r, dt = post(port, "/v1/rounds", {"agents": small_ids, "shared": "Discuss.", "max_tokens": over})
    check_refused(r, dt, "round")
    assert "round of 3 agents" in r.json()["error"]["message"], r.body[:400]
    # Nothing was computed for any of them.
    assert metrics(port)["agentkv_tokens_prefilled_total"] == finished_before

    # The server keeps serving: a request that fits is answered, streamed to its [DONE].
    r, _ = post(port, "/v1/completions", {"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 4})
    assert r.status == 200, r.body[:400]
    assert r.json()["choices"][0]["finish_reason"] in ("stop", "length")
    r, _ = post(port, "/v1/chat/completions", dict(chat, max_tokens=4, stream=True))
    assert r.status == 200, r.body[:400]
    events = [line[6:] for line in r.body.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    assert all('"error"' not in e for e in events), events
    r, _ = post(port, f"/v1/agents/{small_ids[0]}/respond",
                {"messages": [{"role": "user", "content": "Hi."}], "max_tokens": 4})
    assert r.status == 200, r.body[:400]

    # /metrics is current when a round's reply comes (issue 21, defect 11: it lagged ~3 s after a large
    # round): read once, it holds every agent's new context and no running request.
    r, _ = post(port, "/v1/rounds", {"agents": small_ids, "shared": "Say hello.", "max_tokens": 4})
    assert r.status == 200, r.body[:400]
    m = metrics(port)
    assert m["agentkv_kv_retained_contexts"] == 1 + len(small_ids) and m["agentkv_requests_running"] == 0, m

    # A request that can never fit, whatever is released, gets the same status and no Retry-After.
    r, dt = post(port, "/v1/completions", {"model": "smollm2", "prompt": "hi", "n": 16, "max_tokens": total * bs})
    assert r.status == 507 and "retry-after" not in r.headers, (r.status, r.headers, r.body[:300])

    for i in [big_id, *small_ids]:
        assert request(port, "DELETE", f"/v1/agents/{i}").status == 200
    deadline = time.time() + 10
    while True:
        m = metrics(port)
        if (m["agentkv_requests_running"] == 0 and m["agentkv_kv_blocks_used"] == m["agentkv_segment_blocks"]) or \
                time.time() > deadline:
            break
        time.sleep(0.1)
    assert m["agentkv_requests_running"] == 0 and m["agentkv_kv_blocks_used"] == m["agentkv_segment_blocks"], m
    assert m["agentkv_kv_retained_contexts"] == 0, m
