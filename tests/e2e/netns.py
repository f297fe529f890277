"""Simulated hosts for the multi-server tests: one Linux network namespace per host, each with a veth
pair into a bridge in the test's own namespace, so every server listens on its own address and talks
to the others over a (virtual) network, the way separate machines do.

Needs root (or CAP_NET_ADMIN) and `ip` (iproute2). Where namespaces cannot be made (an unprivileged
container, a CI runner without the capability) Hosts falls back to loopback: every "host" is
127.0.0.1 and runs its commands unchanged (AGENTKV_TEST_NETNS=off asks for that); `mode` says which one
is in use, and the tests print it.

Every name carries the test run's pid, so parallel runs do not meet, and close() removes everything
(also what a failed set-up left half made)."""
import os
import subprocess
import sys


def _ip(*args, ns=None):
    cmd = ["ip", *(["netns", "exec", ns, "ip"] if ns else []), *args]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)


class Hosts:
    def __init__(self, names, subnet_octet=None):
        self.names = list(names)
        self.mode = "loopback"
        self.addr = {n: "127.0.0.1" for n in self.names}
        self._ns = {}
        tag = os.getpid() % 100000
        self._bridge = f"akb{tag}"
        self._veths = []
        octet = subnet_octet if subnet_octet is not None else 100 + tag % 100
        self.gateway = f"10.{octet}.0.1"
        try:
            self._make_namespaces(tag, octet)
            self.mode = "netns"
        except (OSError, subprocess.SubprocessError) as e:
            self.reason = f"network namespaces unavailable ({e}); every host is 127.0.0.1"
            self.close()
            self.addr = {n: "127.0.0.1" for n in self.names}
            self._ns = {}
        else:
            self.reason = f"one network namespace per host on bridge {self._bridge} ({self.gateway}/24)"

    def _make_namespaces(self, tag, octet):
        if os.environ.get("AGENTKV_TEST_NETNS") == "off":
            raise OSError("AGENTKV_TEST_NETNS=off")
        if os.geteuid() != 0:
            raise OSError("not root")
        _ip("link", "add", self._bridge, "type", "bridge")
        self._veths.append(self._bridge)
        _ip("addr", "add", f"{self.gateway}/24", "dev", self._bridge)
        _ip("link", "set", self._bridge, "up")
        for i, name in enumerate(self.names):
            ns = f"akv{tag}-{name}"
            host_end, ns_end = f"akh{tag}{i}", f"akn{tag}{i}"
            _ip("netns", "add", ns)
            self._ns[name] = ns
            _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            self._veths.append(host_end)
            _ip("link", "set", ns_end, "netns", ns)
            _ip("link", "set", host_end, "master", self._bridge)
            _ip("link", "set", host_end, "up")
            addr = f"10.{octet}.0.{10 + i}"
            _ip("addr", "add", f"{addr}/24", "dev", ns_end, ns=ns)
            _ip("link", "set", ns_end, "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("route", "add", "default", "via", self.gateway, ns=ns)
            self.addr[name] = addr
        self._check_reachable()

    def _check_reachable(self):
        """A host that firewalls bridged traffic (br_netfilter with a FORWARD policy of DROP, as Docker
        hosts have) makes namespaces that cannot talk: the first host must reach the last, through the
        bridge, and the test's own namespace must reach both."""
        first, last = self.names[0], self.names[-1]
        listener = subprocess.Popen(
            [*self.prefix(first), sys.executable, "-c",
             "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
             f"s.bind(('{self.addr[first]}', 47999)); s.listen(4); print('up', flush=True); "
             "[s.accept()[0].close() for _ in range(2)]"],
            stdout=subprocess.PIPE, text=True)
        try:
            if listener.stdout.readline().strip() != "up":
                raise OSError("a listener in a namespace did not start")
            probe = f"import socket; socket.create_connection(('{self.addr[first]}', 47999), timeout=3).close()"
            subprocess.run([*self.prefix(last), sys.executable, "-c", probe], check=True, capture_output=True,
                           timeout=10)
            subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, timeout=10)
        finally:
            listener.kill()
            listener.wait()

    def prefix(self, name):
        """The command prefix that runs a program on host `name`."""
        ns = self._ns.get(name)
        return ["ip", "netns", "exec", ns] if ns else []

    def close(self):
        for dev in reversed(self._veths):
            subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=30)
        self._veths = []
        for ns in self._ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._ns = {}
