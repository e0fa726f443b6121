"""``polling_http`` (docs/sql/connectors.md): a source requesting an endpoint every
``poll_interval_ms`` and emitting each response body as one record.

With ``emit_behavior = 'changed'`` a body equal to the last one emitted is skipped.
The cursor is the SHA-256 of the last body emitted, committed with each epoch, so a
pipeline resumed from its state store does not emit an unchanged response again
(with ``all`` the first poll after a resume is emitted whatever it holds).  Polls
that fail (a connection error, a timeout, HTTP 5xx, 408 or 429) are logged and
retried at the next interval; any other 4xx fails the query.  What a crash loses
is only what was polled since the last commit: the next poll reads the endpoint's
state again.  Event time: the poll's response time.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass

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

log = logging.getLogger(__name__)

SOURCE_NAME = "spate_polling_http"
_SCHEMES = ("http", "https")
EMIT_ALL = "all"
EMIT_CHANGED = "changed"

ENDPOINT = http_common.ENDPOINT.for_roles(core.SOURCES)
RECORD_FORMAT = core.FORMAT_OPTION.described("`json`, `debezium_json` or `raw_string` (a JSON body "
                                             "may span lines)", roles=core.SOURCES)
METHOD = core.option("method", core.SOURCES, "`GET`, `POST`, `PUT` or `PATCH` (any case)",
                     choices=("get", "post", "put", "patch"), default="get")
BODY = core.option("body", core.SOURCES, "request body (not with `GET`)")
HEADERS = http_common.HEADERS.for_roles(core.SOURCES)
POLL_INTERVAL_MS = core.option("poll_interval_ms", core.SOURCES, "time between the end of a poll "
                               "and the next", default=1000)
EMIT_BEHAVIOR = core.option("emit_behavior", core.SOURCES, "`all`: every response is a record; "
                            "`changed`: only a body that differs from the last one emitted",
                            choices=(EMIT_ALL, EMIT_CHANGED), default=EMIT_ALL)
TIMEOUT_MS = http_common.TIMEOUT_MS.for_roles(core.SOURCES)
MAX_MESSAGES_PER_BATCH = http_common.MAX_MESSAGES_PER_BATCH.described("responses per epoch")


@dataclass(frozen=True)
class PollingTable:
    source: SourceTable
    method: str
    body: str | None
    poll_interval_s: float
    emit_behavior: str
    timeout_s: float


def parse_table(table: core.TableConfig) -> PollingTable:
    options = core.OptionReader(table)
    source = read_source(options, _SCHEMES)
    method = options.choice(METHOD)
    body = options.string(BODY)
    assert method is not None
    if body is not None and method == "get":
        raise core.ConnectorError(f"option '{BODY.name}' needs {METHOD.name} 'POST', 'PUT' or "
                                  "'PATCH' (a GET request carries no body)", option=BODY.name)
    interval = options.integer(POLL_INTERVAL_MS, minimum=1)
    emit = options.choice(EMIT_BEHAVIOR)
    timeout = read_timeout(options)
    options.finish()
    assert interval is not None and emit is not None
    return PollingTable(source, method.upper(), body, interval / 1000, emit, timeout)


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class PollingFeed(Feed):
    """Polls until closed; :meth:`session` returns only when the feed stops."""

    def session(self) -> None:
        settings = self.settings
        changed_only = settings["emit_behavior"] == EMIT_CHANGED
        with http_client(settings["timeout_s"]) as client:
            while not self.stopping.is_set():
                body = self._poll(client)
                if body is not None:
                    digest = body_hash(body)
                    if not (changed_only and digest == self.cursor):
                        self.deliver(body, digest)
                if self.stopping.wait(settings["poll_interval_s"]):
                    return

    def _poll(self, client: httpx.Client) -> bytes | None:
        url, host = self.endpoint.connect_to()
        body = self.settings["body"]
        try:
            response = client.request(self.settings["method"], url,
                                      headers=request_headers(self.headers, host),
                                      content=None if body is None else body.encode("utf-8"))
        except httpx.HTTPError as problem:
            log.warning("poll failed", extra={"table": self.table,
                                              "endpoint": self.endpoint.shown,
                                              "error": type(problem).__name__})
            return None
        status = response.status_code
        if 200 <= status < 300:
            return response.content
        if 400 <= status < 500 and status not in (408, 429):
            raise FeedFailedError(f"{self.what}: {self.endpoint.shown} answered HTTP {status}; "
                                  f"check options '{ENDPOINT.name}', '{METHOD.name}', "
                                  f"'{BODY.name}' and '{HEADERS.name}'")
        log.warning("poll answered an error; retried at the next interval",
                    extra={"table": self.table, "endpoint": self.endpoint.shown,
                           "status": status})
        return None


class PollingDataSource(FeedDataSource):
    """Registered as ``spate_polling_http``; see :mod:`spate.engine.connectors.http.polling`."""

    feed_class = PollingFeed
    source_name = SOURCE_NAME


@core.register
class PollingHttpConnector(FeedSourceConnector):
    """Polls an HTTP(S) endpoint; each response body is a record."""

    name = "polling_http"
    options = (*core.TYPE, ENDPOINT, RECORD_FORMAT, METHOD, BODY, HEADERS, POLL_INTERVAL_MS,
               EMIT_BEHAVIOR, TIMEOUT_MS, MAX_MESSAGES_PER_BATCH, *SOURCE_GROUPS)
    examples = {core.SOURCE: ({"format": "json", "json.unstructured": "true",
                              "endpoint": "http://h/", "method": "post"},)}

    def source_table(self, table: core.TableConfig) -> SourceTable:
        return parse_table(table).source

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """One request as the source makes it (its method, body and headers)."""
        reader, endpoint, headers = read_check_options(self.name, core.SOURCE, options, _SCHEMES,
                                                       boundary)
        method = (reader.choice(METHOD) or METHOD.default).upper()
        body = reader.string(BODY)
        url, host = endpoint.connect_to()
        try:
            with http_client(read_timeout(reader)) as client:
                response = client.request(method, url, headers=request_headers(headers, host),
                                          content=None if body is None else body.encode())
        except httpx.HTTPError as problem:
            raise unreachable("polling_http check", endpoint, type(problem).__name__) from None
        if not 200 <= response.status_code < 300:
            raise unreachable("polling_http check", endpoint,
                              f"{method} answered HTTP {response.status_code}")
        return (f"{method} {endpoint.shown} answered HTTP {response.status_code} "
                f"({len(response.content)} bytes)")

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        parsed = parse_table(table)
        return load_source(spark, SOURCE_NAME, table, parsed.source, method=parsed.method,
                           body=parsed.body, poll_interval_s=parsed.poll_interval_s,
                           emit_behavior=parsed.emit_behavior, timeout_s=parsed.timeout_s)
