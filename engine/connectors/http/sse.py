"""``sse`` (docs/sql/connectors.md): a source reading a Server-Sent Events stream.

At-least-once with ``Last-Event-ID`` resume.  A feed (:mod:`.common`) holds the
``GET`` stream open on the driver; each event's ``data`` is one record (an event whose
type is not in ``events`` is skipped).  The cursor is the event stream's last event
id, committed with each epoch: a pipeline resumed from its state store, and the feed
reconnecting after a dropped connection, send it as ``Last-Event-ID``, so a server
that honours it sends every event after the last committed one again.  Events that
carry no id (and servers that ignore the header) cannot be resumed: what arrived
after the last committed id and before a crash is then lost.  Event time: arrival
at the reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from pyspark.sql import DataFrame, SparkSession

from spate.engine.connectors import core
from spate.engine.connectors.http import common as http_common
from spate.engine.connectors.http.common import (
    SOURCE_GROUPS,
    Feed,
    FeedFailedError,
    SourceTable,
    http_client,
    load_source,
    read_check_options,
    read_source,
    read_timeout,
    request_headers,
    unreachable,
)
from spate.engine.connectors.http.source import FeedDataSource, FeedSourceConnector

SOURCE_NAME = "spate_sse"
_SCHEMES = ("http", "https")
#: A silent stream is reopened (from its last event id) after this long.
READ_TIMEOUT_S = 300.0

ENDPOINT = http_common.ENDPOINT.described("`http://` or `https://` URL of the stream. Never "
                                          "echoed in errors", roles=core.SOURCES)
RECORD_FORMAT = core.FORMAT_OPTION.described("`json`, `debezium_json` or `raw_string`",
                                             roles=core.SOURCES)
EVENTS = core.option("events", core.SOURCES, "comma-separated event types to keep (an event "
                     "without `event:` is a `message`); others are skipped", default_text="all")
HEADERS = http_common.HEADERS.for_roles(core.SOURCES)
TIMEOUT_MS = http_common.TIMEOUT_MS.described("connect timeout (a stream silent for 5 minutes "
                                              "is reopened)", roles=core.SOURCES)
MAX_MESSAGES_PER_BATCH = http_common.MAX_MESSAGES_PER_BATCH.described("events per epoch")


def parse_table(table: core.TableConfig) -> tuple[SourceTable, tuple[str, ...], float]:
    """The source, the event types it keeps (empty: all), and its connect timeout."""
    options = core.OptionReader(table)
    source = read_source(options, _SCHEMES)
    events = tuple(e.strip() for e in (options.string(EVENTS) or "").split(",") if e.strip())
    timeout = read_timeout(options)
    options.finish()
    return source, events, timeout


class SseFeed(Feed):
    """One ``GET`` event stream at a time, reopened from the last event id."""

    redelivers = True

    def __init__(self, settings: Mapping[str, Any], headers: Mapping[str, str],
                 cursor: str | None) -> None:
        self._events = frozenset(settings["events"])
        super().__init__(settings, headers, cursor)

    def session(self) -> None:
        url, host = self.endpoint.connect_to()
        headers = request_headers(self.headers, host)
        headers["Accept"] = "text/event-stream"
        headers["Cache-Control"] = "no-cache"
        if self.cursor is not None:
            headers["Last-Event-ID"] = self.cursor
        with http_client(self.settings["timeout_s"], read_timeout_s=READ_TIMEOUT_S) as client:
            self.connection = client
            with client.stream("GET", url, headers=headers) as response:
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    raise FeedFailedError(
                        f"{self.what}: {self.endpoint.shown} answered HTTP "
                        f"{response.status_code} to the event stream request; check options "
                        f"'{ENDPOINT.name}' and '{HEADERS.name}'")
                if response.status_code != 200:
                    return  # a server error: reconnect after the backoff
                self._read(response.iter_lines())

    def _read(self, lines: Any) -> None:
        data: list[str] = []
        event = ""
        last_id = self.cursor
        for line in lines:
            if self.stopping.is_set():
                return
            if not line:  # dispatch
                if data and (not self._events or (event or "message") in self._events):
                    self.deliver("\n".join(data).encode("utf-8"), last_id)
                elif last_id != self.cursor:
                    self.cursor = last_id
                data, event = [], ""
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id" and "\x00" not in value:
                last_id = value


class SseDataSource(FeedDataSource):
    """Registered as ``spate_sse``; see :mod:`spate.engine.connectors.http.sse`."""

    feed_class = SseFeed
    source_name = SOURCE_NAME


@core.register
class SseConnector(FeedSourceConnector):
    """Server-Sent Events over HTTP(S): a source, at-least-once by ``Last-Event-ID``."""

    name = "sse"
    options = (*core.TYPE, ENDPOINT, RECORD_FORMAT, EVENTS, HEADERS, TIMEOUT_MS,
               MAX_MESSAGES_PER_BATCH, *SOURCE_GROUPS)
    examples = {core.SOURCE: ({"format": "json", "json.unstructured": "true",
                              "endpoint": "http://h/"},)}

    def source_table(self, table: core.TableConfig) -> SourceTable:
        return parse_table(table)[0]

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """Open the event stream, check its status and content type, close it."""
        reader, endpoint, headers = read_check_options(self.name, core.SOURCE, options, _SCHEMES,
                                                       boundary)
        url, host = endpoint.connect_to()
        try:
            with http_client(read_timeout(reader)) as client, client.stream(
                    "GET", url, headers={**request_headers(headers, host),
                                         "Accept": "text/event-stream"}) as response:
                status, kind = response.status_code, response.headers.get("content-type", "")
        except httpx.HTTPError as problem:
            raise unreachable("sse check", endpoint, type(problem).__name__) from None
        if status != 200 or not kind.startswith("text/event-stream"):
            raise unreachable("sse check", endpoint,
                              f"HTTP {status}, content type '{kind or 'none'}' rather than "
                              "200 text/event-stream")
        return f"opened the event stream at {endpoint.shown}"

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        source, events, timeout = parse_table(table)
        return load_source(spark, SOURCE_NAME, table, source, events=list(events),
                           timeout_s=timeout)
