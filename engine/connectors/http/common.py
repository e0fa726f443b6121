"""What the HTTP family shares (``websocket``, ``sse``, ``polling_http`` sources and the
``webhook`` sink): endpoints checked against the egress policy, ``headers``, and one
streaming reader over a background *feed* (docs/sql/connectors.md).

A feed is a thread of the driver's data-source process that keeps a connection (or a
polling loop) open and buffers what arrives as :class:`Message` s, each with a
*cursor*: what a restarted feed resumes from (an SSE event id, a polled response's
hash; None for a websocket).  The reader's offsets are ``{"messages": n, "cursor": c}``:
``n`` counts messages handed to batches, ``c`` is the cursor of the last of them, so
the engine commits it with the epoch and a pipeline resumed from its state store
reopens the feed at it.  A batch's payloads travel in its one partition and are
decoded on an executor by the shared :func:`.decoders.source_decoder`.  The data
source and connector bases each source subclasses are in :mod:`.source`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import InputPartition

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.core.push import PushDecoder, PushReader, Receiver
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_columns,
    parse_format,
    single_value_columns,
    source_schema,
)

log = logging.getLogger(__name__)

#: The reader option carrying a source's headers: ``spark.redaction.regex`` matches
#: its name, so Spark never prints the values (tokens) in a plan.
SECRET_OPTION = "spate_http_secret"
#: Reconnection backoff of a feed whose connection ended or failed.
RECONNECT_FIRST_S = 0.1
RECONNECT_MAX_S = 5.0
#: The framing options, refused: one message is one record.
_FRAMING = (core.FRAMING, core.FRAMING_MAX_LENGTH)
#: Header names a connector sets itself.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ")

# The options of the whole family.  Each connector declares them again in its own
# words (``spec.described``: what its endpoint is a URL of, what its timeout waits for);
# the reads below take them from here, by the same name and default.
ENDPOINT = core.option("endpoint", core.BOTH, "`http://` or `https://` URL. Never echoed in errors",
                       required=True)
HEADERS = core.option("headers", core.BOTH, "request headers, `'Name: value, Other: value'`")
TIMEOUT_MS = core.option("timeout_ms", core.BOTH, "connect and response timeout", default=30_000)
MAX_MESSAGES_PER_BATCH = core.option("max_messages_per_batch", core.SOURCES, "messages per epoch",
                                     default=10_000)
#: The shared groups every HTTP-family source takes besides its own options (``format``
#: aside, which each describes; framing aside, which they refuse).
SOURCE_GROUPS = (*(spec for spec in (*core.FORMAT, *core.FORMAT_SOURCE)
                   if spec not in (core.FORMAT_OPTION, *_FRAMING)),
                 *core.DEAD_LETTER, *core.SOURCE_TIME)


# -- endpoints and headers ---------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A validated endpoint URL.  ``shown`` (scheme, host and port) is what messages
    print: a path or query may carry a token."""

    url: str
    scheme: str
    host: str
    port: int
    #: the tenant's egress policy (``EgressPolicy.to_dict``); None: unconfined
    egress: dict[str, Any] | None = None

    @property
    def shown(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def secure(self) -> bool:
        return self.scheme in ("https", "wss")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def checked_host(self) -> str | None:
        """Under an egress policy, the host to open a socket to: the host is resolved and
        every address checked; a plain ``http``/``ws`` endpoint is then connected to at
        the checked address, a TLS one by name (its certificate is verified against the
        name).  None when unconfined."""
        if self.egress is None:
            return None
        addresses = EgressPolicy.from_dict(self.egress).resolve(self.host, self.port,
                                                                option=ENDPOINT.name)
        return self.host if self.secure else addresses[0]

    def connect_to(self) -> tuple[str, str | None]:
        """The URL to connect to and the ``Host`` header it needs (None: the URL's own)."""
        address = self.checked_host()
        if address is None or address == self.host:
            return self.url, None
        netloc = f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return urlunsplit(urlsplit(self.url)._replace(netloc=netloc)), f"{host}:{self.port}"


def read_endpoint(options: core.OptionReader, schemes: tuple[str, ...],
                  boundary: core.Boundary) -> Endpoint:
    """``endpoint``: an absolute URL of one of ``schemes``, checked against the egress
    policy (literal addresses at planning, names when connecting).  Never echoed."""
    url = options.required(ENDPOINT).strip()
    wanted = " or ".join(f"{s}://" for s in schemes)
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        port = parts.port or (443 if scheme in ("https", "wss") else 80)
        has_login = bool(parts.username or parts.password)
    except ValueError:
        scheme, host, port, has_login = "", "", 0, False
    if scheme not in schemes or not host:
        raise core.ConnectorError(f"option '{ENDPOINT.name}' must be an absolute {wanted} URL",
                                  option=ENDPOINT.name)
    if has_login:
        raise core.ConnectorError(f"option '{ENDPOINT.name}' must not carry credentials "
                                  f"(user:password@); send them in option '{HEADERS.name}' (e.g. "
                                  "'Authorization: Basic ...')", option=ENDPOINT.name)
    egress = None
    if boundary.egress is not None:
        boundary.egress.check_literal(host, port, option=ENDPOINT.name)
        egress = boundary.egress.to_dict()
    return Endpoint(url=url, scheme=scheme, host=host, port=port, egress=egress)


def read_headers(options: core.OptionReader) -> dict[str, str]:
    """``headers``: ``'Name: value, Other-Name: value'`` (a comma separates headers, the
    first colon a name from its value).  Values are never echoed: they may be tokens."""
    text = options.string(HEADERS)
    headers: dict[str, str] = {}
    if text is None or not text.strip():
        return headers
    for index, item in enumerate(text.split(","), start=1):
        name, colon, value = item.partition(":")
        name = name.strip()
        if not colon or not name or not set(name) <= _TOKEN_CHARS:
            raise core.ConnectorError(
                f"option '{HEADERS.name}': header {index} is not 'Name: value' (headers are "
                "separated by commas, names are letters, digits and -)", option=HEADERS.name)
        if name.lower() in _RESERVED_HEADERS:
            raise core.ConnectorError(f"option '{HEADERS.name}': header '{name}' is set by Spate "
                                      "itself; remove it", option=HEADERS.name)
        if any(c in value for c in "\r\n\x00"):
            raise core.ConnectorError(f"option '{HEADERS.name}': the value of header '{name}' "
                                      "holds a line break", option=HEADERS.name)
        headers[name] = value.strip()
    return headers


def read_timeout(options: core.OptionReader) -> float:
    """``timeout_ms``: seconds to wait to connect or for a response."""
    value = options.integer(TIMEOUT_MS, minimum=1)
    assert value is not None
    return value / 1000


def http_client(timeout_s: float, *, read_timeout_s: float | None = None) -> Any:
    """An httpx client that ignores the environment (proxies, netrc) and never follows
    redirects (a redirect could lead past the egress policy)."""
    import httpx  # the HTTP connectors' client, imported by their modules alone

    timeout = httpx.Timeout(timeout_s, read=read_timeout_s if read_timeout_s else timeout_s)
    return httpx.Client(timeout=timeout, trust_env=False, follow_redirects=False)


def request_headers(headers: Mapping[str, str], host: str | None) -> dict[str, str]:
    return {**headers, "Host": host} if host is not None else dict(headers)


def unreachable(what: str, endpoint: Endpoint, problem: str) -> core.ConnectorError:
    return core.ConnectorError(f"{what}: could not reach {endpoint.shown} ({problem}); check "
                               f"option '{ENDPOINT.name}'", option=ENDPOINT.name)


def read_check_options(connector: str, role: str, options: Mapping[str, str],
                       schemes: tuple[str, ...], boundary: core.Boundary
                       ) -> tuple[core.OptionReader, Endpoint, dict[str, str]]:
    """What a connector's ``reach`` check reads first: ``options`` as those of a table
    of ``role`` (the reader returned reads the check's other options), and the
    endpoint and headers they name."""
    table = core.TableConfig(name="check", connector=connector, role=role, options=options,
                             columns=(), boundary=boundary)
    reader = core.OptionReader(table)
    return reader, read_endpoint(reader, schemes, boundary), read_headers(reader)


# -- tables ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpTable:
    """The options every HTTP-family table shares (source or sink), validated."""

    endpoint: Endpoint
    headers: dict[str, str]
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]


@dataclass(frozen=True)
class SourceTable(HttpTable):
    """The options every HTTP-family source shares, validated."""

    max_messages_per_batch: int


def read_source(options: core.OptionReader, schemes: tuple[str, ...]) -> SourceTable:
    """The shared source options; the caller reads its own, then calls ``finish``."""
    table = options.table
    core.check_role(options, core.SOURCES)
    endpoint = read_endpoint(options, schemes, table.boundary)
    headers = read_headers(options)
    for key in _FRAMING:
        options.reject(key, f"is not supported yet by {table.connector} tables: one message "
                            "is one record; remove it")
    spec = parse_format(options, core.SOURCE)
    core.check_source_options(options)
    max_messages = options.integer(MAX_MESSAGES_PER_BATCH, minimum=1)
    assert max_messages is not None
    columns = table.columns
    if not columns and spec.single_value:
        columns = single_value_columns()
    check_columns(spec, columns, core.SOURCE)
    return SourceTable(endpoint, headers, spec, columns, max_messages)


def check_sink_role(options: core.OptionReader) -> None:
    core.check_role(options, core.SINKS)
    core.reject_source_options(options)


def reader_options(options: dict[str, str], headers: Mapping[str, str]) -> dict[str, str]:
    """``options`` (from ``streaming.source_options``) plus the headers in their own,
    redacted reader option."""
    return {**options, SECRET_OPTION: json.dumps(dict(headers))}


def source_settings(connector: str, table: str, source: SourceTable, not_null: list[str],
                    **extra: Any) -> dict[str, Any]:
    """The settings a source's data source receives (headers travel apart)."""
    return {"connector": connector, "table": table, "endpoint": source.endpoint.to_dict(),
            "format": source.spec.to_dict(),
            "max_messages_per_batch": source.max_messages_per_batch,
            "not_null": not_null, **extra}


def load_source(spark: SparkSession, source_name: str, table: core.TableConfig,
                source: SourceTable, **extra: Any) -> DataFrame:
    """The streaming DataFrame of an HTTP-family source table."""
    not_null = table.required_columns(source.columns)
    settings = source_settings(table.connector, table.name, source, not_null, **extra)
    options = core.source_options(source_schema(source.spec, source.columns), settings)
    return core.load_stream(spark, source_name, reader_options(options, source.headers),
                            table.primary_key)


def data_source_secret(options: Mapping[str, str]) -> dict[str, str]:
    """The headers a data source's reader options carry."""
    headers: dict[str, str] = json.loads(options.get(SECRET_OPTION, "{}"))
    return headers


# -- feeds --------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One received message, and the cursor a feed resumes after it from."""

    payload: bytes
    arrival_us: int
    cursor: str | None


class FeedFailedError(Exception):
    """A feed cannot go on (a 4xx answer, a refused destination): fails the query."""

    def __init__(self, message: str, option: str = ENDPOINT.name) -> None:
        super().__init__(message)
        self.option = option


class Closable(Protocol):
    """What a feed's session blocks on: an HTTP client, a WebSocket connection."""

    def close(self) -> None: ...


class Feed(Receiver[Message]):
    """A background thread receiving messages; subclasses implement :meth:`session`.

    ``session`` connects once and delivers until the connection ends; the thread then
    reconnects after a backoff (0.1 s doubling to 5 s) until :meth:`close`, which also
    closes the session's :attr:`connection` (when it set one) to wake it.  A
    :class:`FeedFailedError` (or a refused destination) stops the feed and fails the
    query at the next batch.  A feed that ``redelivers`` (sse) receives a replayed
    batch's messages again when reopened at its cursor; another has lost them
    (at-most-once).
    """

    def __init__(self, settings: Mapping[str, Any], headers: Mapping[str, str],
                 cursor: str | None) -> None:
        super().__init__()
        self.settings = settings
        self.table: str = settings["table"]
        self.endpoint = Endpoint(**settings["endpoint"])
        self.headers = dict(headers)
        #: the cursor of the last message received (where a reconnect resumes)
        self.cursor = cursor
        #: what the running session blocks on, closed by :meth:`close`; None: nothing
        self.connection: Closable | None = None
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"spate-feed-{self.table}")
        self._thread.start()

    @property
    def what(self) -> str:
        return f"{self.settings.get('connector', 'http')} source '{self.table}'"

    def session(self) -> None:
        raise NotImplementedError

    def deliver(self, payload: bytes, cursor: str | None = None) -> None:
        self.cursor = cursor
        self.receive(Message(payload, time.time_ns() // 1000, cursor))

    def _run(self) -> None:
        delay = RECONNECT_FIRST_S
        while not self.stopping.is_set():
            received = len(self.messages)
            try:
                self.session()
            except FeedFailedError as failure:
                self.failure = core.ConnectorError(str(failure), option=failure.option)
                return
            except core.ConnectorError as failure:  # refused by the egress policy
                self.failure = failure
                return
            except Exception as problem:  # noqa: BLE001 - a lost connection: reconnect
                log.warning("feed connection failed; reconnecting",
                            extra={"table": self.table, "endpoint": self.endpoint.shown,
                                   "error": type(problem).__name__})
            if len(self.messages) > received:
                delay = RECONNECT_FIRST_S
            if self.stopping.wait(delay):
                return
            delay = min(delay * 2, RECONNECT_MAX_S)

    def close(self) -> None:
        self.stopping.set()
        if self.connection is not None:
            self.connection.close()


class FeedReader(PushReader[Message]):
    """The stream reader of an HTTP-family source; ``feed_class`` (the source's
    :class:`Feed`) receives.  Its offsets also hold the cursor of their last message,
    where a reopened feed resumes."""

    def __init__(self, settings: dict[str, Any], headers: dict[str, str],
                 schema: T.StructType, start: dict[str, Any] | None = None, *,
                 feed_class: type[Feed] = Feed) -> None:
        super().__init__(settings, schema, start)
        self.headers = headers
        self.feed_class = feed_class

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "headers": {}}

    def open_receiver(self, start: dict[str, Any]) -> Receiver[Message]:
        return self.feed_class(self.settings, self.headers, start.get("cursor"))

    def offset_after(self, start: dict[str, Any], admitted: list[Message]) -> dict[str, Any]:
        return {"messages": int(start["messages"]) + len(admitted),
                "cursor": admitted[-1].cursor if admitted else start.get("cursor")}

    def partition_of(self, messages: list[Message], number: int) -> InputPartition:
        return InputPartition(([m.payload for m in messages], [m.arrival_us for m in messages],
                               number, [m.cursor for m in messages]))

    def decode(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        payloads, arrivals, number, cursors = partition.value
        connector = self.settings.get("connector", "http")
        decoder = PushDecoder(self.settings, self.schema,
                              f"{connector} source '{self.settings['table']}'", "Fix the server")
        yield from decoder.decode(payloads, arrivals,
                                  lambda i: _position(connector, number + i, cursors[i]))


def _position(connector: str, number: int, cursor: str | None) -> str:
    """Where a message is: its number among the source's messages (a polled response's
    among the responses it emitted), and an SSE event's id."""
    if connector == "polling_http":
        return f"response {number}"
    if connector == "sse" and cursor is not None:
        return f"message {number} (event id {cursor})"
    return f"message {number}"
