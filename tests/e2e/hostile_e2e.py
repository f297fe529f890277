"""End to end: `agentkv serve` against hostile clients and careless operators (issue 21), bounded and on loopback.

- A ~30 s soak: 300 slowloris connections (a request head one byte every few seconds) and 300 idle
  sockets, spread over 20 loopback source addresses (127.0.1.x, 127.0.2.x, so the per-address cap is
  not what stops them), beside a well-behaved official openai client whose every request (max_tokens 4,
  a fresh connection each, no retries) must be answered.
- A client that sends its request and then shuts its write side (`nc -N`) gets its answer, plain and
  streamed.
- Authorization: the Bearer scheme in any case, two Authorization headers 400, the key from
  --api-key-file or $AGENTKV_API_KEY; --api-key "" and --host "" refused; a loud warning for a
  non-loopback address without a key.
- SIGTERM drains: an in-flight stream finishes while a new request gets 503.
"""
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time

import httpx
import pytest
from openai import OpenAI

import http_raw

KEY = "hostile-e2e-key"
SOAK_S = 30


@pytest.fixture(scope="module")
def server(module_servers, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("key") / "api_key"
    key_file.write_text(KEY + "\n")  # the trailing newline is dropped
    _, port = module_servers.start(extra_args=["--api-key-file", str(key_file)])
    return port


def raw_exchange(port, data, half_close=True, timeout=120):
    """Sends data, optionally half-closes, reads until the server closes; returns the bytes read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def final_status(data):
    """The status of the final response, after any interim 1xx ones."""
    statuses = [int(m) for m in re.findall(rb"^HTTP/1\.1 (\d{3}) ", data, re.M)]
    finals = [s for s in statuses if s >= 200]
    return finals[0] if finals else None


def chat_request(port, stream, auth=f"Bearer {KEY}"):
    body = json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}],
                       "max_tokens": 4, "temperature": 0, "stream": stream}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


class Attackers:
    """Slowloris and idle sockets on one thread; a socket the server closes is reopened a second later."""

    def __init__(self, port, slow=300, idle=300, byte_every_s=3.0):
        self.port, self.byte_every_s = port, byte_every_s
        self.plan = [("slow", f"127.0.1.{1 + i % 10}") for i in range(slow)] + \
                    [("idle", f"127.0.2.{1 + i % 10}") for i in range(idle)]
        self.socks = {}  # index -> (socket, next byte time)
        self.opened = {}  # index -> when it connected
        self.longest_slow_s = 0.0  # the longest a slowloris connection lived before the server closed it
        self.reopen_at = {i: 0.0 for i in range(len(self.plan))}
        self.closed_by_server = {"slow": 0, "idle": 0}
        self.answers = {}  # status -> count, of what the server said before closing
        self.peak_open = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, i, now):
        kind, src = self.plan[i]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((src, 0))
            s.settimeout(2)
            s.connect(("127.0.0.1", self.port))
            s.setblocking(False)
            if kind == "slow":
                s.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        except OSError:
            s.close()
            self.reopen_at[i] = now + 1.0
            return
        self.socks[i] = (s, now + self.byte_every_s)
        self.opened[i] = now

    def close(self, i, now):
        s, _ = self.socks.pop(i)
        s.close()
        self.reopen_at[i] = now + 1.0

    def run(self):
        while not self.stop.is_set():
            now = time.time()
            for i, at in list(self.reopen_at.items()):
                if at <= now:
                    del self.reopen_at[i]
                    self.open(i, now)
            self.peak_open = max(self.peak_open, len(self.socks))
            by_fd = {s.fileno(): i for i, (s, _) in self.socks.items()}
            readable, _, _ = select.select(list(by_fd), [], [], 0.1) if by_fd else ([], [], [])
            now = time.time()
            for fd in readable:
                i = by_fd[fd]
                s, _ = self.socks[i]
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                m = re.match(rb"HTTP/1\.1 (\d{3})", data)
                if m:
                    self.answers[int(m.group(1))] = self.answers.get(int(m.group(1)), 0) + 1
                self.closed_by_server[self.plan[i][0]] += 1
                if self.plan[i][0] == "slow":
                    self.longest_slow_s = max(self.longest_slow_s, now - self.opened[i])
                self.close(i, now)
            for i, (s, next_byte) in list(self.socks.items()):
                if self.plan[i][0] == "slow" and next_byte <= now:
                    try:
                        s.send(b"a")
                        self.socks[i] = (s, now + self.byte_every_s)
                    except OSError:
                        self.close(i, now)
        for s, _ in self.socks.values():
            s.close()


def test_soak_slowloris_and_idle_sockets_beside_well_behaved_clients(server):
    port = server
    attackers = Attackers(port)
    attackers.thread.start()
    try:
        time.sleep(3)  # the attackers hold every slot before the first good request
        # A fresh connection per request and no retries: a refused newcomer would fail the test.
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0, timeout=120,
                        http_client=httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)))
        deadline = time.time() + SOAK_S
        answered = 0
        for i in range(10):
            msgs = [{"role": "user", "content": f"Count to {i + 2}."}]
            if i % 2:
                chunks = list(client.chat.completions.create(model="smollm2", messages=msgs, max_tokens=4,
                                                             temperature=0, stream=True))
                assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length"), chunks[-1:]
            else:
                r = client.chat.completions.create(model="smollm2", messages=msgs, max_tokens=4, temperature=0)
                assert r.choices[0].finish_reason in ("stop", "length"), r
                assert r.usage.completion_tokens > 0, r.usage
            answered += 1
            time.sleep(max(0.0, (deadline - time.time()) / (10 - i)))
        assert answered == 10
    finally:
        attackers.stop.set()
        attackers.thread.join(timeout=30)
    # The attack was real: more sockets than the 256 slots; the server closed slowloris heads to make
    # room (503) or at their 10 s deadline (408; the unit tests check that one alone), never later.
    assert attackers.peak_open > 256, attackers.peak_open
    assert attackers.closed_by_server["slow"] >= 300, attackers.closed_by_server
    assert set(attackers.answers) <= {408, 503} and attackers.answers, attackers.answers
    assert attackers.longest_slow_s < 15, attackers.longest_slow_s
    # And it is still serving.
    assert final_status(raw_exchange(port, chat_request(port, stream=False))) == 200


def test_half_closed_client_is_answered_plain_and_streamed(server):
    port = server
    plain = raw_exchange(port, chat_request(port, stream=False))
    assert final_status(plain) == 200, plain[:500]
    assert b'"choices"' in plain, plain[:500]
    streamed = raw_exchange(port, chat_request(port, stream=True))
    assert final_status(streamed) == 200, streamed[:500]
    assert b"data: [DONE]" in streamed, streamed[-500:]


def test_bearer_scheme_any_case_and_one_authorization_header(server):
    port = server
    for scheme in ("Bearer", "bearer", "BEARER"):
        r = http_raw.request(port, "GET", "/v1/models", headers={"Authorization": f"{scheme} {KEY}"})
        assert r is not None and r.status == 200, (scheme, r and r.body)
    r = http_raw.request(port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
    assert r.status == 401, r.body
    raw = (f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
           f"Authorization: Bearer other\r\nConnection: close\r\n\r\n").encode()
    r = http_raw.exchange(port, raw)
    assert r.status == 400 and "two Authorization headers" in r.json()["error"]["message"], r.body


def test_empty_key_or_host_refused(agentkv, tmp_path):
    empty_file = tmp_path / "empty_key"
    empty_file.write_text("\n")
    env = {k: v for k, v in os.environ.items() if k != "AGENTKV_API_KEY"}
    for args, extra_env, says in [
        (["--api-key", ""], {}, "--api-key is empty"),
        (["--host", ""], {}, "--host is empty"),
        (["--api-key-file", str(empty_file)], {}, "is empty"),
        (["--api-key-file", str(tmp_path)], {}, "not a regular file"),
        (["--api-key", "a", "--api-key-file", str(empty_file)], {}, "give the API key once"),
        ([], {"AGENTKV_API_KEY": ""}, "AGENTKV_API_KEY is empty"),
    ]:
        p = subprocess.run([agentkv, "serve", "-m", "smollm2", "--port", "0", *args], env={**env, **extra_env},
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, (args, p.stderr)
        assert says in p.stderr, (args, p.stderr)


def test_key_from_environment_and_warning_beyond_loopback(agentkv, monkeypatch):
    monkeypatch.setenv("AGENTKV_API_KEY", KEY)
    proc = subprocess.Popen([agentkv, "serve", "-m", "smollm2", "--port", "0", "--kv-mem", "128M", "-t", "2",
                             "--round-sharing", "off", "--chat-sharing", "off", "--host", "0.0.0.0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        port = None
        while port is None:
            line = proc.stderr.readline()
            assert line, ("server exited", lines)
            lines.append(line)
            m = re.search(r"on http://0\.0\.0\.0:(\d+)", line)
            port = m and int(m.group(1))
        # The key came from the environment: there is no warning about a missing key.
        assert not any("WARNING" in l for l in lines), lines
        assert http_raw.request(port, "GET", "/v1/models").status == 401
        r = http_raw.request(port, "GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        assert r.status == 200, r.body
    finally:
        http_raw.stop_server(proc)
    monkeypatch.delenv("AGENTKV_API_KEY")
    proc = subprocess.Popen([agentkv, "serve", "-m", "smollm2", "--port", "0", "--kv-mem", "128M", "-t", "2",
                             "--round-sharing", "off", "--chat-sharing", "off", "--host", "0.0.0.0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not any("serving" in l for l in lines):
            line = proc.stderr.readline()
            assert line, ("server exited", lines)
            lines.append(line)
        assert any("WARNING" in l and "WITHOUT an API key" in l for l in lines), lines
    finally:
        http_raw.stop_server(proc)


def test_sigterm_drains_in_flight_stream_and_refuses_new_requests(servers):
    proc, port = servers.start(extra_args=["--drain-timeout", "120"])
    # Counting rarely ends by itself: the stream outlives the checks below.
    body = json.dumps({"model": "smollm2", "prompt": "1, 2, 3, 4, 5,", "max_tokens": 160, "temperature": 0,
                       "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    got = s.recv(65536)
    while b"data: {" not in got:  # generation has begun
        got += s.recv(65536)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    late = http_raw.request(port, "GET", "/v1/models")
    assert late is not None and late.status == 503, late and late.body
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    assert b"data: [DONE]" in got, got[-300:]
    assert proc.wait(timeout=120) == 0
