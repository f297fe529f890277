"""End to end: several agentkv servers sharing KV through Redis, behind nginx (issue 18).

The test makes its own small cluster and removes it at the end: three simulated hosts (network
namespaces on a bridge, netns.Hosts; loopback where namespaces cannot be made, printed), one
redis-server, two `agentkv serve --kv-redis` (A and B, SmolLM2, exact path: --chat-sharing off), nginx in front of them from
deploy/nginx-agentkv.conf.in (consistent hash on X-Agent-Id), and a reference server with no tier on
loopback, which computes every reply the exact way (full prefill) for comparison. Clients are the
official openai client.

- A round's shared block computed on A is fetched by B from Redis: B prefills none of it (its
  /metrics prefill counter moves by the agent's own tokens only), and B's replies are byte-identical
  to the reference's.
- Through nginx, every turn of an agent lands on one home server (its second turn reuses the first
  from RAM), the agents spread over both servers, and the replies equal the reference's.
- An agent exported from A (GET /v1/agents/{id}/export) and imported on B (POST /v1/agents/import)
  gets its context from Redis and answers its next turn byte-identically to its twin left on A.
- Chat sharing across servers (requests with "kv_sharing": true; the servers' default stays off): a
  group chat's messages computed on A are blended on B from the master B fetches through Redis (A's
  segment index record, the master's blocks), not prefilled there first; B's reply equals A's to the
  same request, and B's /metrics count the record as a redis_segments hit.
- Corrupted, truncated, wrong-fingerprint and wrong-version records in Redis are each rejected (counted,
  deleted) by B and the blocks recomputed, with B's reply unchanged.
- Redis hung (SIGSTOP) during a round: lookups time out into recomputing, every reply right.
- Redis killed mid-round, then started again empty: every request answers, right; the servers count
  fallbacks and resume writing.
- Server A killed mid-round: nginx retries its requests on B; every request answers, right.
"""
import concurrent.futures
import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

import pytest

import http_raw
import netns

MODEL = "smollm2"
BLOCK = 16
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = ("river stone lantern harvest mill ford cart barley orchard meadow ledger copper weaver shepherd "
         "bridge tower market candle thread anchor rope salt timber cellar forge spindle kettle").split()
# Every server answers on the exact path by default (chat sharing blends approximate KV, which is never written to a
# tier, and would make replies depend on which messages a server saw before), so replies compare byte
# for byte.
EXACT = ["--chat-sharing", "off"]
NAMES = ["Ada", "Bram", "Cleo", "Dov", "Esme", "Finn", "Gia", "Hugo", "Ines", "Jude", "Kai", "Lena"]


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_port(host, port, what, proc=None, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"{what} exited early (rc={proc.returncode}) {err}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {host}:{port} in {timeout} s")


def transcript(seed, n_lines=24):
    """A group chat's shared history: what every agent of the round reads."""
    import random
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        who = NAMES[i % len(NAMES)]
        lines.append(f"{who}: " + " ".join(rng.choice(WORDS) for _ in range(14)) + ".")
    return "\n".join(lines)


def messages_for(name, shared, question="What should the village do next? Answer in one sentence."):
    # The history first: block 0 of every round's prompt is its own (the bad-records test relies on it).
    return [{"role": "system", "content": shared + "\n(The village council's group chat so far.)"},
            {"role": "user", "content": f"You are {name}. {question}"}]


class Redis:
    def __init__(self, hosts, tmp):
        self.hosts, self.tmp = hosts, tmp
        self.host = hosts.addr["redis"]
        self.port = 6379 if hosts.mode == "netns" else free_port()
        self.proc = None

    def start(self):
        # No persistence: a restarted Redis is an empty one (the "flushed" fault).
        self.proc = subprocess.Popen([*self.hosts.prefix("redis"), "redis-server", "--bind", self.host, "--port",
                                      str(self.port), "--save", "", "--appendonly", "no", "--dir", self.tmp,
                                      "--protected-mode", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.host, self.port, "redis-server", self.proc)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def client(self):
        import redis
        return redis.Redis(host=self.host, port=self.port, socket_timeout=10)


class Cluster:
    def __init__(self, agentkv, tmp):
        self.tmp = tmp
        self.hosts = netns.Hosts(["redis", "a", "b"])
        print(f"\ncluster hosts: {self.hosts.mode}: {self.hosts.reason}")
        self.procs = {}
        self.ports = {}
        self.nginx = None
        try:
            self.redis = Redis(self.hosts, tmp)
            self.redis.start()
            self.agentkv = agentkv
            for name in ("a", "b"):
                self.start_server(name)
            self.ref_proc, self.ref_port = http_raw.start_server(agentkv, EXACT, models=(MODEL,))
            self.start_nginx()
        except BaseException:
            self.close()
            raise

    def tier_args(self):
        return ["--kv-redis", f"{self.redis.host}:{self.redis.port}", "--kv-redis-timeout-ms", "200", *EXACT]

    def start_server(self, name):
        proc, port = http_raw.start_server(self.agentkv, self.tier_args(), models=(MODEL,),
                                           host=self.hosts.addr[name], prefix=self.hosts.prefix(name))
        self.procs[name], self.ports[name] = proc, port

    def url(self, name):
        return f"http://{self.hosts.addr[name]}:{self.ports[name]}"

    def start_nginx(self):
        prefix = os.path.join(self.tmp, "nginx")
        os.makedirs(prefix, exist_ok=True)
        self.nginx_port = free_port()
        with open(os.path.join(SRC, "deploy", "nginx-agentkv.conf.in")) as f:
            conf = f.read()
        upstreams = "\n".join(f"    server {self.hosts.addr[n]}:{self.ports[n]} max_fails=1 fail_timeout=5s;"
                              for n in ("a", "b"))
        conf = (conf.replace("@UPSTREAMS@", upstreams).replace("@PREFIX@", prefix)
                .replace("@LISTEN@", f"127.0.0.1:{self.nginx_port}"))
        assert not re.search(r"@[A-Z]+@", conf), "a placeholder of the nginx template was left unfilled"
        with open(os.path.join(prefix, "nginx.conf"), "w") as f:
            f.write(conf)
        self.nginx = subprocess.Popen(["nginx", "-p", prefix, "-c", "nginx.conf", "-g", "daemon off;"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_port("127.0.0.1", self.nginx_port, "nginx", self.nginx)

    def close(self):
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.terminate()  # SIGTERM: the master stops its workers (SIGKILL would orphan them)
            try:
                self.nginx.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
        for proc in [*self.procs.values(), getattr(self, "ref_proc", None)]:
            if proc is not None and proc.poll() is None:
                http_raw.stop_server(proc)
        redis = getattr(self, "redis", None)
        if redis and redis.proc and redis.proc.poll() is None:
            redis.kill()
        self.hosts.close()

    def metrics(self, name):
        url = self.url(name) if name != "ref" else f"http://127.0.0.1:{self.ref_port}"
        with urllib.request.urlopen(url + "/metrics", timeout=60) as r:
            text = r.read().decode()
        out = {}
        for k, labels, v in re.findall(r'^(agentkv_\w+)\{([^}]*)\} (\S+)$', text, re.M):
            if f'model="{MODEL}"' not in labels:
                continue
            tier = re.search(r'tier="(\w+)"', labels)
            out[k + (f"[{tier.group(1)}]" if tier else "")] = float(v)
        return out

    def redis_writes(self, name):
        return self.metrics(name).get("agentkv_kv_tier_writes_total[redis]", 0)

    def wait_writes(self, name, at_least, timeout=60):
        """Writes are in the background: waits until server `name` has written this many records."""
        deadline = time.time() + timeout
        while (w := self.redis_writes(name)) < at_least:
            assert time.time() < deadline, f"server {name}: {w} Redis writes after {timeout} s, expected {at_least}"
            time.sleep(0.1)

    def client(self, base_url, agent=None):
        from openai import OpenAI
        headers = {"X-Agent-Id": agent} if agent else None
        return OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0, timeout=600,
                      default_headers=headers)

    def chat(self, target, messages, agent=None, max_tokens=12):
        """One greedy chat turn on server a, b, ref, or through nginx; (text, usage, upstream)."""
        base = {"ref": f"http://127.0.0.1:{self.ref_port}",
                "nginx": f"http://127.0.0.1:{self.nginx_port}"}.get(target) or self.url(target)
        raw = self.client(base, agent).chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0)
        r = raw.parse()
        return r.choices[0].message.content, r.usage, raw.headers.get("x-agentkv-upstream")


@pytest.fixture(scope="module")
def cluster(agentkv):
    for tool in ("redis-server", "nginx"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ["PATH"].split(os.pathsep)
                   + ["/usr/sbin", "/usr/bin"]):
            pytest.fail(f"{tool} is not installed: scripts/setup.sh installs it (Debian packages)")
    os.environ["PATH"] += os.pathsep + "/usr/sbin"
    with tempfile.TemporaryDirectory(prefix="agentkv-cluster-") as tmp:
        c = Cluster(agentkv, tmp)
        try:
            yield c
        finally:
            c.close()


def test_a_round_computed_on_a_is_fetched_by_b(cluster):
    shared = transcript(1)
    agents = ["Ada", "Bram", "Cleo", "Dov"]
    ref = {n: cluster.chat("ref", messages_for(n, shared)) for n in agents}
    # What of agent 1's prompt the shared block is: the reference, having computed agent 0, reuses it.
    shared_cached = ref["Bram"][1].prompt_tokens_details.cached_tokens
    assert shared_cached >= 20 * BLOCK, f"the shared block should be long: {shared_cached} tokens reused"

    written = cluster.redis_writes("a")
    text, usage, _ = cluster.chat("a", messages_for("Ada", shared))
    assert text == ref["Ada"][0]
    cluster.wait_writes("a", written + usage.prompt_tokens // BLOCK)

    before = cluster.metrics("b")
    text, usage, _ = cluster.chat("b", messages_for("Bram", shared))
    after = cluster.metrics("b")
    assert text == ref["Bram"][0], "B's reply with blocks from Redis differs from the exact prefill"
    # The tiers hold full blocks: every full block of the shared block comes from Redis; its last,
    # partial block (< 16 tokens, shared with the agent's own text) is computed with the agent's text.
    full = shared_cached // BLOCK * BLOCK
    assert usage.prompt_tokens_details.cached_tokens == full, "every full shared block came from Redis"
    assert after["agentkv_kv_tier_hits_total[redis]"] - before["agentkv_kv_tier_hits_total[redis]"] == full // BLOCK
    prefilled = after["agentkv_tokens_prefilled_total"] - before["agentkv_tokens_prefilled_total"]
    assert prefilled == usage.prompt_tokens - full, \
        f"B prefilled {prefilled} tokens: none of the shared block's {full} in full blocks may be among them"
    print(f"B: {usage.prompt_tokens} prompt tokens, {full} from Redis, {prefilled:.0f} prefilled "
          f"({shared_cached - full} of them the shared block's partial last block)")
    for name in agents[2:]:  # the rest of the round on B: from its RAM now
        text, usage, _ = cluster.chat("b", messages_for(name, shared))
        assert text == ref[name][0]
        assert usage.prompt_tokens_details.cached_tokens >= full


def test_nginx_keeps_each_agent_on_one_home_server(cluster):
    shared = transcript(2)
    homes = {}
    for name in NAMES:
        first = messages_for(name, shared)
        text, usage1, up1 = cluster.chat("nginx", first, agent=name)
        assert text == cluster.chat("ref", first)[0]
        second = first + [{"role": "assistant", "content": text},
                          {"role": "user", "content": "And who should do it? One name."}]
        text2, usage2, up2 = cluster.chat("nginx", second, agent=name)
        assert text2 == cluster.chat("ref", second)[0]
        assert up1 and up1 == up2, f"{name}'s turns went to {up1} and {up2}"
        # The first turn's context, less its last blocks (the template closes the turn differently
        # from how the reply was generated) and what a shared-history blend left approximate.
        assert usage2.prompt_tokens_details.cached_tokens >= (usage1.prompt_tokens // BLOCK - 3) * BLOCK, \
            f"{name}'s second turn should reuse the first from its home server's RAM"
        homes[name] = up1
    assert len(set(homes.values())) == 2, f"every agent went to one server: {homes}"


def api(server, method, path, body=None, expect=200):
    """One JSON call of agentkv's own API (agents, migration) on server a or b."""
    return http_raw.JsonApi(server[1], server[0]).call(method, path, body, expect)


def test_an_agent_migrated_from_a_to_b_answers_like_its_unmigrated_twin(cluster):
    a, b = (cluster.hosts.addr["a"], cluster.ports["a"]), (cluster.hosts.addr["b"], cluster.ports["b"])
    agent = api(a, "POST", "/v1/agents", {"model": MODEL, "name": "Mira", "system": transcript(9)}, expect=201)
    turn1 = api(a, "POST", f"/v1/agents/{agent['id']}/respond",
                {"messages": [{"role": "user", "content": "You are Mira. What worries you most? One sentence."}],
                 "max_tokens": 12, "temperature": 0})
    assert turn1["message"]["content"]
    twin = api(a, "POST", f"/v1/agents/{agent['id']}/fork", {"name": "Mira-twin"}, expect=201)

    doc = api(a, "GET", f"/v1/agents/{agent['id']}/export")
    assert doc["object"] == "agent.export" and doc["model"] == MODEL and len(doc["messages"]) == 3
    assert doc["resident_tokens"] > 500 and doc["kv"]["published"], doc["kv"]
    before = cluster.metrics("b")
    moved = api(b, "POST", "/v1/agents/import", doc, expect=201)
    after = cluster.metrics("b")
    assert moved["imported_from"] == agent["id"] and moved["name"] == "Mira"
    usage = moved["usage"]
    restored = after["agentkv_kv_tier_hits_total[redis]"] - before["agentkv_kv_tier_hits_total[redis]"]
    assert usage["cached_tokens"] == restored * BLOCK, (usage, restored)
    # Every full block of the exported context came from Redis; B computed at most the last two (the
    # answer as the chat template renders it may tokenize other than it was generated).
    assert usage["cached_tokens"] >= usage["context_tokens"] - 2 * BLOCK, usage
    prefilled = after["agentkv_tokens_prefilled_total"] - before["agentkv_tokens_prefilled_total"]
    assert prefilled == usage["computed_tokens"]
    api(a, "DELETE", f"/v1/agents/{agent['id']}")  # migrated: the original goes
    api(a, "GET", f"/v1/agents/{agent['id']}/export", expect=404)

    question = {"messages": [{"role": "user", "content": "And what would you do about it? One sentence."}],
                "max_tokens": 16, "temperature": 0}
    on_b = api(b, "POST", f"/v1/agents/{moved['id']}/respond", question)
    on_a = api(a, "POST", f"/v1/agents/{twin['id']}/respond", question)
    assert on_b["message"]["content"] == on_a["message"]["content"], "the migrated agent answers otherwise"
    print(f"migrated: {usage['context_tokens']} context tokens, {usage['cached_tokens']} restored from Redis, "
          f"{usage['computed_tokens']} computed on B; next turn identical to the twin's")
    # A malformed document is refused, and nothing is added.
    n_agents = len(api(b, "GET", "/v1/agents")["data"])
    for bad in ({**doc, "format": 2}, {**doc, "object": "agent"}, {**doc, "messages": "hi"}, {**doc, "extra": 1},
                {**doc, "segments": [1]}, {**doc, "resident_tokens": -1}):
        api(b, "POST", "/v1/agents/import", bad, expect=400)
    api(b, "POST", "/v1/agents/import", {**doc, "model": "no-such-model"}, expect=404)
    assert len(api(b, "GET", "/v1/agents")["data"]) == n_agents


def test_a_chat_master_made_on_a_is_fetched_by_b(cluster):
    """A group chat with chat sharing on: B finds the messages' master through Redis."""
    import random
    rng = random.Random(40)
    said = [{"role": "user", "content": f"{who}: " + " ".join(rng.choice(WORDS) for _ in range(30)) + "."}
            for who in ("Ada", "Bram", "Cleo")]

    def turn(server, name):
        msgs = [{"role": "system", "content": f"You are {name}, on the village council."}, *said,
                {"role": "user", "content": f"{name}, what do you say? One sentence."}]
        r = cluster.client(cluster.url(server)).chat.completions.create(
            model=MODEL, messages=msgs, max_tokens=8, temperature=0, extra_body={"kv_sharing": True})
        return r.choices[0].message.content, r.model_extra["kv_sharing"], r.usage

    r = cluster.redis.client()
    seg_keys = set(r.keys("agentkv:seg:*"))
    written = cluster.redis_writes("a")
    _, made, usage = turn("a", "Dov")  # A computes the chat: its context is the messages' master
    assert made["fetched_masters"] == 0, made
    cluster.wait_writes("a", written + usage.prompt_tokens // BLOCK)
    # Written in the background after the reply (A's /metrics is a snapshot taken with the reply).
    deadline = time.time() + 60
    while not set(r.keys("agentkv:seg:*")) - seg_keys:
        assert time.time() < deadline, "A wrote no segment index record in 60 s"
        time.sleep(0.1)
    on_a, local, _ = turn("a", "Esme")  # blended from A's own master
    assert local["segments"] >= 1 and local["fetched_masters"] == 0, local

    before = cluster.metrics("b")
    on_b, fetched, _ = turn("b", "Esme")  # B never saw the chat
    after = cluster.metrics("b")
    assert fetched["fetched_masters"] >= 1, fetched
    assert fetched["master_tokens_restored"] > 0, fetched
    assert fetched["segments"] >= 1 and fetched["mode"] == "tokendance", fetched
    hits = "agentkv_kv_tier_hits_total[redis_segments]"
    assert after[hits] - before.get(hits, 0) >= 1, "B's /metrics count no segment record fetched"
    assert on_b == on_a, "the blend from the fetched master answers otherwise than from A's own"
    print(f"B fetched {fetched['fetched_masters']} master(s): {fetched['master_tokens_restored']} tokens restored, "
          f"{fetched['master_tokens_computed']} computed; {fetched['segment_tokens']} prompt tokens blended")


def fnv1a(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def rechecksum(record):
    body = record[:-8]
    return body + struct.pack("<Q", fnv1a(body))


def corrupt(record, kind):
    """The record spoiled one way (its layout: kv/tier_record.cpp: magic 8 bytes, u32 version, u64
    fingerprint, ..., u64 FNV-1a checksum last)."""
    rec = bytearray(record)
    if kind == "flipped":  # a payload bit: the checksum catches it
        rec[len(rec) // 2] ^= 0x40
    elif kind == "truncated":
        rec = rec[:len(rec) // 3]
    elif kind == "fingerprint":  # intact (checksum recomputed), but another model's
        rec[12] ^= 0x01
        rec = bytearray(rechecksum(bytes(rec)))
    elif kind == "version":  # intact, but a format this build does not read
        rec[8:12] = struct.pack("<I", 99)
        rec = bytearray(rechecksum(bytes(rec)))
    return bytes(rec)


@pytest.mark.parametrize("kind", ["flipped", "truncated", "fingerprint", "version"])
def test_bad_records_in_redis_are_rejected_and_recomputed(cluster, kind):
    shared = transcript(30 + ["flipped", "truncated", "fingerprint", "version"].index(kind))
    ref_text = cluster.chat("ref", messages_for("Esme", shared))[0]
    r = cluster.redis.client()
    keys_before = set(r.keys("agentkv:*"))
    written = cluster.redis_writes("a")
    text, usage, _ = cluster.chat("a", messages_for("Esme", shared))
    assert text == ref_text
    cluster.wait_writes("a", written + usage.prompt_tokens // BLOCK)
    new_keys = set(r.keys("agentkv:*")) - keys_before
    assert len(new_keys) >= usage.prompt_tokens // BLOCK, "A did not write this prompt's blocks to Redis"
    for key in new_keys:  # every record of this prompt spoiled
        r.set(key, corrupt(r.get(key), kind), keepttl=True)
    # B has never seen this prompt: the first block it looks up in Redis is a bad record.
    before = cluster.metrics("b")
    text, usage, _ = cluster.chat("b", messages_for("Esme", shared))
    after = cluster.metrics("b")
    assert text == ref_text, f"a {kind} record changed the reply"
    assert after["agentkv_kv_tier_rejected_total[redis]"] - before["agentkv_kv_tier_rejected_total[redis]"] == 1
    assert after["agentkv_kv_tier_hits_total[redis]"] == before["agentkv_kv_tier_hits_total[redis]"], \
        f"a {kind} record was used"
    assert usage.prompt_tokens_details.cached_tokens == 0
    prefilled = after["agentkv_tokens_prefilled_total"] - before["agentkv_tokens_prefilled_total"]
    assert prefilled == usage.prompt_tokens, "the blocks of bad records are computed again"


def run_round(cluster, shared, names, during=None):
    """Every agent's turn through nginx at once; `during` runs once the round is in flight."""
    with concurrent.futures.ThreadPoolExecutor(len(names)) as ex:
        futs = {n: ex.submit(cluster.chat, "nginx", messages_for(n, shared), n) for n in names}
        if during:
            time.sleep(0.5)
            during()
        return {n: f.result()[0] for n, f in futs.items()}


def test_a_hung_redis_costs_a_timeout_not_a_request(cluster):
    """Redis stopped (SIGSTOP: connections open, nothing answered) during a round: each lookup waits at
    most --kv-redis-timeout-ms, falls back to computing, and every reply is right."""
    shared = transcript(10)
    names = NAMES[:4]
    ref = {n: cluster.chat("ref", messages_for(n, shared))[0] for n in names}
    before = {s: cluster.metrics(s) for s in ("a", "b")}
    cluster.redis.proc.send_signal(signal.SIGSTOP)
    try:
        assert run_round(cluster, shared, names) == ref, "a reply changed while Redis hung"
    finally:
        cluster.redis.proc.send_signal(signal.SIGCONT)
    after = {s: cluster.metrics(s) for s in ("a", "b")}
    fell_back = sum(after[s]["agentkv_kv_tier_fallbacks_total[redis]"] - before[s]["agentkv_kv_tier_fallbacks_total[redis]"]
                    for s in ("a", "b"))
    assert fell_back > 0, "no lookup counted the hung Redis"


def test_redis_killed_and_restarted_empty_mid_round(cluster):
    shared = transcript(4)
    names = NAMES[:6]
    ref = {n: cluster.chat("ref", messages_for(n, shared))[0] for n in names}
    before = {s: cluster.metrics(s) for s in ("a", "b")}
    got = run_round(cluster, shared, names, during=cluster.redis.kill)
    assert got == ref, "a reply changed while Redis was down"
    # Down: another round still answers, by computing.
    shared2 = transcript(5)
    ref2 = {n: cluster.chat("ref", messages_for(n, shared2))[0] for n in names}
    assert run_round(cluster, shared2, names) == ref2
    after = {s: cluster.metrics(s) for s in ("a", "b")}
    served = {s: after[s]["agentkv_requests_finished_total"] - before[s]["agentkv_requests_finished_total"]
              for s in ("a", "b")}
    fell_back = {s: after[s]["agentkv_kv_tier_fallbacks_total[redis]"] - before[s]["agentkv_kv_tier_fallbacks_total[redis]"]
                 for s in ("a", "b")}
    print(f"Redis down: requests served {served}, lookups that fell back {fell_back}")
    for s in ("a", "b"):
        assert fell_back[s] > 0 or served[s] == 0, f"server {s} did not count Redis being down"
    assert sum(served.values()) == 2 * len(names)
    # Back, empty (no persistence: a flushed Redis): the servers reconnect (backoff of at most 8 s) and
    # write again.
    cluster.redis.start()
    writes = {s: cluster.metrics(s)["agentkv_kv_tier_writes_total[redis]"] for s in ("a", "b")}
    shared3 = transcript(6)
    deadline = time.time() + 60
    while True:
        text, _, _ = cluster.chat("a", messages_for("Ada", shared3 + f"\n(attempt {int(time.time())})"))
        if cluster.metrics("a")["agentkv_kv_tier_writes_total[redis]"] > writes["a"]:
            break
        assert time.time() < deadline, "A did not write to the restarted Redis within 60 s"
        time.sleep(1)
    assert cluster.redis.client().dbsize() > 0


def test_a_server_killed_mid_round(cluster):
    shared = transcript(7)
    names = NAMES
    ref = {n: cluster.chat("ref", messages_for(n, shared))[0] for n in names}

    def kill_a():
        cluster.procs["a"].send_signal(signal.SIGKILL)
        cluster.procs["a"].wait(timeout=30)

    got = run_round(cluster, shared, names, during=kill_a)
    assert got == ref, "a reply changed when server A died"
    # And the next round, A still down: all of it on B, which reads what A wrote to Redis.
    shared2 = transcript(8)
    ref2 = {n: cluster.chat("ref", messages_for(n, shared2))[0] for n in names[:4]}
    assert run_round(cluster, shared2, names[:4]) == ref2
