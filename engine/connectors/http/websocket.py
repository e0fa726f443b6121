"""``websocket`` (docs/sql/connectors.md): a source reading the messages of a WebSocket.

Best-effort, at-most-once across restarts.  A feed (:mod:`.common`) keeps the
connection open on the driver, sends the ``subscription_message`` (s) after each
connect, and buffers every text or binary message as one record.  A dropped
connection is reopened (backoff 0.1 s doubling to 5 s) and subscribed again; what the
server sent meanwhile is lost.  WebSocket servers keep no position to resume from:
messages received but not yet in a committed epoch when the pipeline stops or
crashes are lost, and a resumed pipeline reads what the server sends from then on.
Event time: arrival at the reader.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from websockets.exceptions import InvalidHandshake, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from spate.engine.connectors import core
from spate.engine.connectors.http import common as http_common
from spate.engine.connectors.http.common import (
    SOURCE_GROUPS,
    Endpoint,
    Feed,
    FeedFailedError,
    SourceTable,
    load_source,
    read_check_options,
    read_source,
    read_timeout,
    unreachable,
)
from spate.engine.connectors.http.source import FeedDataSource, FeedSourceConnector

SOURCE_NAME = "spate_websocket"
_SCHEMES = ("ws", "wss")
#: How often a blocked receive looks whether the feed is closing.
_RECEIVE_POLL_S = 0.5
#: The largest message accepted (websockets' default is 1 MiB).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

ENDPOINT = http_common.ENDPOINT.described(
    "`ws://` or `wss://` URL. Never echoed in errors (only its scheme, host and port are); "
    "credentials go in `headers`", roles=core.SOURCES)
RECORD_FORMAT = core.FORMAT_OPTION.described("`json`, `debezium_json` or `raw_string` "
                                             "([formats](#formats))", roles=core.SOURCES)
SUBSCRIPTION_MESSAGE = core.option("subscription_message", core.SOURCES, "one text message sent "
                                   "after each connect")
SUBSCRIPTION_MESSAGES = core.option(
    "subscription_messages", core.SOURCES, "a JSON array of messages sent in order after each "
    "connect: strings as they are, other values as JSON text "
    "(`'[\"sub a\", {\"op\": \"subscribe\"}]'`); not with `subscription_message`")
HEADERS = http_common.HEADERS.described(
    "handshake headers, `'Name: value, Other: value'` (commas separate headers, so a value "
    "cannot hold one)", roles=core.SOURCES)
TIMEOUT_MS = http_common.TIMEOUT_MS.described("connect and handshake timeout", roles=core.SOURCES)


def read_subscriptions(options: core.OptionReader) -> list[str]:
    """``subscription_message`` (one text message) or ``subscription_messages`` (a JSON
    array of messages: strings as they are, other values as JSON text)."""
    one = options.string(SUBSCRIPTION_MESSAGE)
    many = options.string(SUBSCRIPTION_MESSAGES)
    if one is not None and many is not None:
        raise core.ConnectorError(f"option '{SUBSCRIPTION_MESSAGES.name}' cannot be combined with "
                                  f"'{SUBSCRIPTION_MESSAGE.name}'; put every message in the array",
                                  option=SUBSCRIPTION_MESSAGES.name, at_key=True)
    if many is None:
        return [] if one is None else [one]
    try:
        values = json.loads(many)
    except ValueError:
        values = None
    if not isinstance(values, list):
        raise core.ConnectorError(f"option '{SUBSCRIPTION_MESSAGES.name}' must be a JSON array of "
                                  "messages, e.g. '[\"sub a\", {\"subscribe\": \"b\"}]'",
                                  option=SUBSCRIPTION_MESSAGES.name)
    return [v if isinstance(v, str) else json.dumps(v) for v in values]


def parse_table(table: core.TableConfig) -> tuple[SourceTable, list[str], float]:
    options = core.OptionReader(table)
    source = read_source(options, _SCHEMES)
    subscriptions = read_subscriptions(options)
    timeout = read_timeout(options)
    options.finish()
    return source, subscriptions, timeout


@contextmanager
def open_connection(endpoint: Endpoint, headers: Mapping[str, str],
                    timeout_s: float) -> Iterator[ClientConnection]:
    """The WebSocket handshake, over a socket to the address the egress policy checked."""
    sock = None
    address = endpoint.checked_host()
    if address is not None:
        sock = socket.create_connection((address, endpoint.port), timeout=timeout_s)
    try:
        with connect(endpoint.url, sock=sock, additional_headers=dict(headers),
                     open_timeout=timeout_s, proxy=None, max_size=MAX_MESSAGE_BYTES
                     ) as connection:
            yield connection
    finally:
        if sock is not None:
            sock.close()


class WebSocketFeed(Feed):
    """One connection at a time, subscribed after each connect."""

    def session(self) -> None:
        try:
            with open_connection(self.endpoint, self.headers,
                                 self.settings["timeout_s"]) as connection:
                self._receive(connection)
        except InvalidStatus as refused:
            status = refused.response.status_code
            if 400 <= status < 500 and status not in (408, 429):
                raise FeedFailedError(f"{self.what}: {self.endpoint.shown} refused the "
                                      f"WebSocket handshake with HTTP {status}; check "
                                      f"options '{ENDPOINT.name}' and '{HEADERS.name}'"
                                      ) from None
            raise

    def _receive(self, connection: ClientConnection) -> None:
        self.connection = connection
        for message in self.settings["subscriptions"]:
            connection.send(message)
        while not self.stopping.is_set():
            try:
                received = connection.recv(timeout=_RECEIVE_POLL_S)
            except TimeoutError:
                continue
            self.deliver(received.encode("utf-8") if isinstance(received, str)
                         else bytes(received))


class WebSocketDataSource(FeedDataSource):
    """Registered as ``spate_websocket``; see :mod:`spate.engine.connectors.http.websocket`."""

    feed_class = WebSocketFeed
    source_name = SOURCE_NAME


@core.register
class WebSocketConnector(FeedSourceConnector):
    """A WebSocket client source (ws:// or wss://): best-effort, at-most-once."""

    name = "websocket"
    options = (*core.TYPE, ENDPOINT, RECORD_FORMAT, SUBSCRIPTION_MESSAGE, SUBSCRIPTION_MESSAGES,
               HEADERS,
               TIMEOUT_MS, http_common.MAX_MESSAGES_PER_BATCH, *SOURCE_GROUPS)
    examples = {core.SOURCE: ({"format": "json", "json.unstructured": "true",
                              "endpoint": "ws://h/"},)}

    def source_table(self, table: core.TableConfig) -> SourceTable:
        return parse_table(table)[0]

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """The WebSocket handshake (no subscription sent), then a clean close."""
        reader, endpoint, headers = read_check_options(self.name, core.SOURCE, options, _SCHEMES,
                                                       boundary)
        try:
            with open_connection(endpoint, headers, read_timeout(reader)):
                pass
        except InvalidStatus as refused:
            raise unreachable("websocket check", endpoint,
                              f"handshake refused with HTTP {refused.response.status_code}"
                              ) from None
        except (OSError, InvalidHandshake, WebSocketException) as problem:
            raise unreachable("websocket check", endpoint, type(problem).__name__) from None
        return f"opened a WebSocket to {endpoint.shown}"

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        source, subscriptions, timeout = parse_table(table)
        return load_source(spark, SOURCE_NAME, table, source, subscriptions=subscriptions,
                           timeout_s=timeout)
