"""The client meets a server that closed a kept-alive connection as a request went out on
it (the server's idle timeout raced the request): an idempotent call goes again on a new
connection, a POST is not sent twice."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from spate.api.client.sdk import ClientError, SpateClient

KEY = "spk_" + "a" * 40


class _DropsSecondRequests:
    """An HTTP/1.1 server on 127.0.0.1 that answers the first request of each connection
    with keep-alive, and closes the connection without answering its second."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answered: list[str] = []
        self.dropped: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(connection,), daemon=True).start()

    def _connection(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rb") as reader:
            for number in (1, 2):
                request_line = reader.readline().decode().strip()
                if not request_line:
                    return
                length = 0
                while (line := reader.readline().decode().strip()):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                reader.read(length)
                if number == 2:
                    self.dropped.append(request_line)
                    return  # closed, unanswered
                self.answered.append(request_line)
                body = json.dumps({"ok": True}).encode()
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   b"Connection: keep-alive\r\n"
                                   + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server() -> Iterator[_DropsSecondRequests]:
    serving = _DropsSecondRequests()
    yield serving
    serving.close()


def test_a_get_goes_again_when_the_kept_alive_connection_was_closed(
        server: _DropsSecondRequests) -> None:
    with SpateClient(f"http://127.0.0.1:{server.port}", KEY) as client:
        assert client.get("/pipelines") == {"ok": True}
        assert client.get("/pipelines") == {"ok": True}  # the first connection drops it
    assert len(server.dropped) == 1 and len(server.answered) == 2


def test_a_post_is_not_sent_twice(server: _DropsSecondRequests) -> None:
    with SpateClient(f"http://127.0.0.1:{server.port}", KEY) as client:
        assert client.get("/pipelines") == {"ok": True}
        with pytest.raises(ClientError, match="closed the connection without answering.*"
                                              "may or may not have taken effect"):
            client.post("/pipelines", {"name": "p"})
    assert [line.split()[0] for line in server.dropped] == ["POST"]
    assert [line.split()[0] for line in server.answered] == ["GET"]
