"""``webhook`` (docs/sql/connectors.md): a sink sending rows to an HTTP(S) endpoint.

At-least-once, with an idempotency key per request so a receiver can de-duplicate.
An epoch's records are encoded by Spark (``formats.encode_records``) and sent by the
Spark tasks (:func:`~.core.executor_writes.write_partitions`), so no record passes
through the driver.  They are spread over the sink's *writers* by a hash of their
bytes (as many writers as the job's default parallelism when the sink first opens,
kept in its marker), and each writer **sorts** its records, then sends them
``max_rows_per_request`` at a time (one record as the body, or several as a JSON
array / newline-separated raw strings), one request after another.  Each request
carries ``Idempotency-Key: <sink id>-<epoch>-<writer>-<index of its first row>``
(``<sink id>-<epoch>-<index>`` with one writer), the sink id being a hash of the
writing pipeline and the table: an epoch replayed after a crash gives each writer
the same rows, so in the same order, and sends the same keys.  A connection error, a
timeout, HTTP 5xx, 408 or 429 is retried after a backoff (``retry_backoff_ms``
doubling, at most 10 s) up to ``max_attempts`` attempts; another 4xx, or the last
attempt failing, fails the epoch (which the engine retries when the pipeline
resumes).  The marker is ``{"writers": w}``; an earlier version's (None) is read as a
new sink's.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.executor_writes import default_writers, write_partitions
from spate.engine.connectors.formats.records import (
    RAW_STRING,
    FormatSpec,
    check_columns,
    check_sink_schema,
    encode_records,
    parse_format,
)
from spate.engine.connectors.http import common as http_common
from spate.engine.connectors.http.common import (
    HttpTable,
    check_sink_role,
    http_client,
    read_check_options,
    read_endpoint,
    read_headers,
    read_timeout,
    request_headers,
    unreachable,
)

log = logging.getLogger(__name__)

_SCHEMES = ("http", "https")
MAX_BACKOFF_S = 10.0
_RETRIED_STATUSES = frozenset({408, 429})

ENDPOINT = http_common.ENDPOINT.for_roles(core.SINKS)
RECORD_FORMAT = core.FORMAT_OPTION.described("`json` or `raw_string` (`debezium_json` is not "
                                             "supported yet)", roles=core.SINKS)
HEADERS = http_common.HEADERS.for_roles(core.SINKS)
METHOD = core.option("method", core.SINKS, "`POST`, `PUT` or `PATCH` (any case)",
                     choices=("post", "put", "patch"), default="post")
MAX_ROWS_PER_REQUEST = core.option("max_rows_per_request", core.SINKS, "rows per request",
                                   default=1)
MAX_ATTEMPTS = core.option("max_attempts", core.SINKS,
                           "attempts per request before the epoch fails",
                           default=5)
RETRY_BACKOFF_MS = core.option("retry_backoff_ms", core.SINKS, "wait before the first retry, "
                               "doubling up to 10 s", default=100)
TIMEOUT_MS = http_common.TIMEOUT_MS.for_roles(core.SINKS)
IDEMPOTENCY_HEADER = core.option("idempotency_header", core.SINKS, "the header carrying each "
                                 "request's key", default="Idempotency-Key")


@dataclass(frozen=True)
class WebhookTable(HttpTable):
    method: str
    max_rows_per_request: int
    max_attempts: int
    retry_backoff_s: float
    timeout_s: float
    key_header: str


def parse_table(table: core.TableConfig) -> WebhookTable:
    options = core.OptionReader(table)
    check_sink_role(options)
    endpoint = read_endpoint(options, _SCHEMES, table.boundary)
    headers = read_headers(options)
    options.reject(core.FRAMING, "is not supported by webhook sinks: one request carries "
                            "one record, or a JSON array of them; remove it")
    spec = parse_format(options, core.SINK)
    if spec.updating:
        raise core.ConnectorError(f"{core.FORMAT_OPTION.name} 'debezium_json' is not supported yet "
                                  f"by webhook sinks", option=core.FORMAT_OPTION.name)
    method = options.choice(METHOD)
    rows = options.integer(MAX_ROWS_PER_REQUEST, minimum=1)
    attempts = options.integer(MAX_ATTEMPTS, minimum=1)
    backoff = options.integer(RETRY_BACKOFF_MS, minimum=0)
    timeout = read_timeout(options)
    key_header = (options.string(IDEMPOTENCY_HEADER) or "").strip()
    if not key_header or not key_header.replace("-", "").replace("_", "").isalnum():
        raise core.ConnectorError(f"option '{IDEMPOTENCY_HEADER.name}' must be a header name "
                                  "(letters, digits, - and _)", option=IDEMPOTENCY_HEADER.name)
    if key_header.lower() in (name.lower() for name in headers):
        raise core.ConnectorError(f"option '{HEADERS.name}' sets '{key_header}', the idempotency "
                                  "key header Spate sets per request; remove it or change "
                                  f"'{IDEMPOTENCY_HEADER.name}'", option=HEADERS.name)
    options.finish()
    check_columns(spec, table.columns, core.SINK)
    assert method is not None and rows is not None and attempts is not None \
        and backoff is not None
    return WebhookTable(endpoint, headers, spec, table.columns, method.upper(), rows, attempts,
                        backoff / 1000, timeout, key_header)


def sink_id(pipeline: str | None, table: str) -> str:
    """The stable prefix of a sink's idempotency keys: the writing pipeline's own."""
    return hashlib.sha256(f"{pipeline or ''}\n{table}".encode()).hexdigest()[:16]


def request_bodies(records: list[str | None], spec: FormatSpec,
                   per_request: int) -> list[tuple[int, bytes]]:
    """(index of the first row, body) of each request, records sorted first."""
    texts = sorted("" if r is None else r for r in records)
    bodies = []
    for first in range(0, len(texts), per_request):
        chunk = texts[first:first + per_request]
        if per_request == 1:
            body = chunk[0]
        elif spec.kind == RAW_STRING:
            body = "\n".join(chunk)
        else:
            body = "[" + ",".join(text or "null" for text in chunk) + "]"
        bodies.append((first, body.encode("utf-8")))
    return bodies


class WebhookSink(core.Sink):
    """Sends an epoch's rows from the Spark tasks, a writer per task; marker
    ``{"writers": w}``."""

    def __init__(self, table: str, parsed: WebhookTable) -> None:
        self.table = table
        self.parsed = parsed
        self._prefix = sink_id(None, table)
        self._writers = 0  # none before open()

    def open(self, marker: Any | None) -> None:
        # Sent requests cannot be taken back: only the writer count is restored.
        self._prefix = sink_id(self.pipeline, self.table)
        if isinstance(marker, Mapping) and "writers" in marker:
            self._writers = int(marker["writers"])
        else:
            self._writers = default_writers()

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, int]:
        if not self._writers:
            raise core.ConnectorError(f"webhook sink '{self.table}' written before open()")
        records = encode_records(df, self.parsed.spec)
        # A record's writer: a function of its bytes alone, so a replay gives each writer
        # the very records it had.
        records = records.repartition(self._writers, *(F.col(c) for c in records.columns))
        reports = write_partitions(records, _TaskSender(self.table, self.parsed, self._prefix,
                                                        epoch, self._writers))
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        log.debug("epoch sent", extra={"table": self.table, "epoch": epoch,
                                        "requests": sum(int(r["requests"]) for r in reports)})
        return {"writers": self._writers}

    def close(self) -> None:
        self._writers = 0


@dataclass(frozen=True)
class _TaskSender:
    """Sends one writer's records of an epoch (picklable: it runs in the tasks)."""

    table: str
    parsed: WebhookTable = field(repr=False)  # its headers may hold a token
    prefix: str
    epoch: int
    writers: int

    def key(self, writer: int, first: int) -> str:
        if self.writers == 1:
            return f"{self.prefix}-{self.epoch}-{first}"
        return f"{self.prefix}-{self.epoch}-{writer}-{first}"

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        parsed = self.parsed
        bodies = request_bodies(rows.column(0).to_pylist(), parsed.spec,
                                parsed.max_rows_per_request)
        url, host = parsed.endpoint.connect_to()
        headers = {"Content-Type": "text/plain; charset=utf-8"
                   if parsed.spec.kind == RAW_STRING else "application/json",
                   **request_headers(parsed.headers, host)}
        with http_client(parsed.timeout_s) as client:
            for first, body in bodies:
                self._send(client, url, {**headers, parsed.key_header: self.key(partition, first)},
                           body, self._where(partition, first))
        return [{"bytes": sum(len(body) for _, body in bodies), "requests": len(bodies)}]

    def _where(self, writer: int, first: int) -> str:
        mine = f" of writer {writer}" if self.writers > 1 else ""
        return f"the request of row {first}{mine} of epoch {self.epoch}"

    def _send(self, client: httpx.Client, url: str, headers: dict[str, str], body: bytes,
              where: str) -> None:
        parsed = self.parsed
        delay = parsed.retry_backoff_s
        problem = ""
        for attempt in range(1, parsed.max_attempts + 1):
            try:
                response = client.request(parsed.method, url, headers=headers, content=body)
            except httpx.TransportError as failure:
                problem = type(failure).__name__
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return
                problem = f"HTTP {status}"
                if status < 500 and status not in _RETRIED_STATUSES:
                    raise core.ConnectorError(
                        f"webhook sink '{self.table}': {parsed.endpoint.shown} answered "
                        f"{problem} to {where}; check options '{ENDPOINT.name}' and "
                        f"'{HEADERS.name}' (the epoch is sent again when the pipeline resumes)",
                        option=ENDPOINT.name)
            if attempt < parsed.max_attempts:
                log.warning("webhook request failed; retrying",
                            extra={"table": self.table, "epoch": self.epoch, "attempt": attempt,
                                   "problem": problem})
                time.sleep(delay)
                delay = min(max(delay * 2, 0.001), MAX_BACKOFF_S)
        raise core.ConnectorError(
            f"webhook sink '{self.table}': gave up on {parsed.endpoint.shown} after "
            f"{parsed.max_attempts} attempts at {where} (last: {problem}); the epoch is sent "
            "again when the pipeline resumes", option=MAX_ATTEMPTS.name)


@core.register
class WebhookConnector(core.Connector):
    """HTTP(S) requests per row (or per batch of rows): a sink, at-least-once."""

    name = "webhook"
    roles = frozenset({core.SINK})
    options = (*core.TYPE, ENDPOINT, RECORD_FORMAT, HEADERS, METHOD, MAX_ROWS_PER_REQUEST,
               MAX_ATTEMPTS, RETRY_BACKOFF_MS, TIMEOUT_MS, IDEMPOTENCY_HEADER,
               *(spec for spec in core.FORMAT if spec not in (core.FORMAT_OPTION, core.FRAMING)))
    examples = {core.SINK: ({"format": "json", "endpoint": "http://h/"},)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return parse_table(table).columns

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """An ``OPTIONS`` request (no row is sent): any HTTP answer proves the endpoint
        reachable; a 401 or 403 says the headers are refused."""
        reader, endpoint, headers = read_check_options(self.name, core.SINK, options, _SCHEMES,
                                                       boundary)
        url, host = endpoint.connect_to()
        try:
            with http_client(read_timeout(reader)) as client:
                response = client.request("OPTIONS", url,
                                          headers=request_headers(headers, host))
        except httpx.HTTPError as problem:
            raise unreachable("webhook check", endpoint, type(problem).__name__) from None
        if response.status_code in (401, 403):
            raise unreachable("webhook check", endpoint,
                              f"HTTP {response.status_code}: the credentials in option "
                              f"'{HEADERS.name}' were refused")
        return f"reached {endpoint.shown} (HTTP {response.status_code} to OPTIONS)"

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = parse_table(table)
        check_sink_schema(parsed.spec, schema)
        return WebhookSink(table.name, parsed)
