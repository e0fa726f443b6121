"""Free TCP ports for the servers tests start (brokers, HTTP stubs, Spark masters).

Every test that needs a port takes it here. Under pytest-xdist two workers
run at once, and "bind port 0, close, hand the number out" lets both receive
the same number before either server binds it. So each worker draws from a
block of its own, below the kernel's ephemeral range (where the clients'
outgoing connections take their local ports), and a number is handed out at
most once per run; a port some other program holds is skipped.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

#: The first port of worker 0's block; the ephemeral range starts at 32768.
FIRST_PORT = 20_000
#: Ports per worker: a run hands out a few hundred.
BLOCK = 1_500

_lock = threading.Lock()
_next: itertools.count[int] | None = None


def _worker_index() -> int:
    """0 for the main process, N for xdist's worker ``gwN``."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw")) if name.startswith("gw") else 0


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on, never given to another test of this run."""
    global _next
    with _lock:
        if _next is None:
            _next = itertools.count(FIRST_PORT + _worker_index() * BLOCK)
        start = FIRST_PORT + _worker_index() * BLOCK
        for port in _next:
            if port >= start + BLOCK:
                raise RuntimeError(f"the tests used all {BLOCK} ports of worker "
                                   f"{_worker_index()}'s block; raise tests/ports.BLOCK")
            if _free(port):
                return port
    raise AssertionError("unreachable")
