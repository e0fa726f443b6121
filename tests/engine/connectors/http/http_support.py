"""Real local servers for the HTTP connectors' tests: a Starlette app under uvicorn and a
websockets server, each on a free 127.0.0.1 port in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from websockets.sync.server import ServerConnection, serve

from tests.ports import free_port


@contextmanager
def http_server(app: Starlette) -> Iterator[str]:
    """Serve ``app``; yields its base URL ``http://127.0.0.1:<port>``."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the test HTTP server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(5)


@contextmanager
def websocket_server(handler: Callable[[ServerConnection], Any]) -> Iterator[str]:
    """Serve WebSockets with ``handler`` (one call per connection); yields the URL."""
    with serve(handler, "127.0.0.1", 0) as server:
        port = server.socket.getsockname()[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"ws://127.0.0.1:{port}"
        finally:
            server.shutdown()
            thread.join(5)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
