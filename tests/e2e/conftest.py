"""pytest set-up for the end-to-end tests: the agentkv binary under test, and a fixture that starts
`agentkv serve` for a test and always stops it, so every server a test needs lives and dies with the run.

The binary: --agentkv PATH (what tests/server_e2e.cmake passes), or $AGENTKV_BIN, or ./build/agentkv."""
import os

import pytest

import http_raw

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_addoption(parser):
    parser.addoption("--agentkv", default=os.environ.get("AGENTKV_BIN", os.path.join(SRC, "build", "agentkv")),
                     help="path to the agentkv binary under test (default: $AGENTKV_BIN or build/agentkv)")


@pytest.fixture(scope="session")
def agentkv(request):
    path = os.path.abspath(request.config.getoption("--agentkv"))
    assert os.access(path, os.X_OK), f"no agentkv binary at {path} (build it, or pass --agentkv)"
    return path


class Servers:
    """Starts servers through http_raw.start_server; stop_all() ends any a test left running (a failed
    assertion, or a test that stops its server itself and checks the exit status)."""

    def __init__(self, binary):
        self.binary = binary
        self.procs = []

    def start(self, *args, **kwargs):
        proc, port = http_raw.start_server(self.binary, *args, **kwargs)
        self.procs.append(proc)
        return proc, port

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                http_raw.stop_server(proc)


def _servers(agentkv):
    servers = Servers(agentkv)
    try:
        yield servers
    finally:
        servers.stop_all()


@pytest.fixture
def servers(agentkv):
    yield from _servers(agentkv)


@pytest.fixture(scope="module")
def module_servers(agentkv):
    """For the tests that share one server across the test functions of a module."""
    yield from _servers(agentkv)
