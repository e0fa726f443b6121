"""The ``delta`` sink: each epoch appended to a Delta Lake table, exactly once.

The Spark tasks write an epoch's rows as Parquet data files under the table's
folder (:mod:`.lake_files`: the partition columns as ``name=value`` folders,
row counts, null counts and integer and date bounds as the files' statistics);
the driver adds the files they report to the table in one Delta commit with the
``deltalake`` package (delta-rs, no JVM). That commit also records an
application transaction, ``(app_id, epoch)`` with
``app_id = spate-<tenant>/<pipeline>/<table>``: the epoch and its files become
visible together or not at all. The engine commits the epoch (with the marker
``{"epoch": n, "version": v}``) after ``write_epoch`` returns, so:

- a crash before Delta's commit leaves only unreferenced data files; the
  engine replays the epoch, which is written;
- a crash between Delta's and the engine's commit: the replayed epoch finds its
  number in the table's transaction for ``app_id`` and is skipped.

A fresh pipeline (no marker) ignores the transaction an earlier pipeline of the
same name left in the table, as the kafka sink does: its epochs start afresh.
The one window where rows can be written twice is therefore a crash between
Delta's and the engine's commit of a new pipeline's very first epoch.

The table is created at ``open`` from the sink's columns when the path holds none;
an existing table must have the same column names. Empty epochs write nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from spate.engine.connectors import core
from spate.engine.connectors.core.aws import check_endpoint_url
from spate.engine.connectors.filesystem.lake_files import DataFiles
from spate.engine.connectors.filesystem.lakehouse import (
    EpochAppendSink,
    LakeConnector,
    first_line,
)
from spate.engine.connectors.filesystem.object_store import (
    AWS_ACCESS_KEY_ID,
    AWS_REGION,
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
    ENDPOINT_URL,
)

log = logging.getLogger(__name__)


PATH = core.option("path", core.SINKS, "the table's folder: a local path, relative to the working "
                   "directory of `spate run` and to the tenant's storage root in the service "
                   "(paths leading out of it are refused), or `s3://bucket/folder`", required=True)
PARTITIONING_FIELDS = core.option("partitioning.fields", core.SINKS, "comma-separated columns to "
                                  "partition the table by (used when the sink creates it)")
# The S3 options, named as the filesystem connector's (one AWS profile serves both).
DELTA_ENDPOINT_URL = ENDPOINT_URL.described(
    "`s3://` only: `http(s)://host[:port]` of an S3-compatible store", roles=core.SINKS,
    default_text="AWS's S3 endpoint of `aws_region`")
DELTA_AWS_REGION = AWS_REGION.described("`s3://` only", roles=core.SINKS, required_when="",
                                        default="us-east-1")
DELTA_AWS_ACCESS_KEY_ID = AWS_ACCESS_KEY_ID.described(
    "`s3://` only: the access key, taken from these options only (never from the server's "
    "environment)", roles=core.SINKS, required_when="")
DELTA_AWS_SECRET_ACCESS_KEY = AWS_SECRET_ACCESS_KEY.described(
    "`s3://` only: its secret", roles=core.SINKS, required_when="")
DELTA_AWS_SESSION_TOKEN = AWS_SESSION_TOKEN.described(
    "`s3://` only: for temporary credentials", roles=core.SINKS)
#: WITH options of a table on S3, and the delta-rs storage option each one sets.
S3_OPTIONS = {DELTA_AWS_REGION: "AWS_REGION", DELTA_AWS_ACCESS_KEY_ID: "AWS_ACCESS_KEY_ID",
              DELTA_AWS_SECRET_ACCESS_KEY: "AWS_SECRET_ACCESS_KEY",
              DELTA_AWS_SESSION_TOKEN: "AWS_SESSION_TOKEN"}


@dataclass(frozen=True)
class DeltaSettings:
    """A delta table's options, checked."""

    #: the table's location for delta-rs (an absolute local path or an s3:// URL)
    location: str
    #: the location as the options give it (what messages show)
    given: str
    partition_by: tuple[str, ...]
    #: S3 only: the storage options from the table's options (credentials: never shown)
    storage: Mapping[str, str] | None = field(default=None, repr=False)
    #: S3 only: the endpoint (``endpoint_url`` or AWS's regional one)
    endpoint: str | None = None

    @property
    def on_s3(self) -> bool:
        return self.storage is not None


def read_settings(options: core.OptionReader, boundary: core.Boundary,
                  columns: tuple[core.ColumnDef, ...] | None) -> DeltaSettings:
    """The location, partitioning and S3 settings of a table's (or profile's) options."""
    given = options.required(PATH)
    fields = options.string(PARTITIONING_FIELDS)
    partition_by = tuple(f.strip() for f in fields.split(",") if f.strip()) if fields else ()
    if columns is not None:
        names = {c.name for c in columns}
        unknown = [f for f in partition_by if f not in names]
        if unknown:
            raise core.ConnectorError(f"{PARTITIONING_FIELDS.name} names {', '.join(unknown)}, "
                                      "which the table does not have",
                                      option=PARTITIONING_FIELDS.name)
    scheme = urlsplit(given).scheme.lower() if "://" in given else ""
    if scheme in ("", "file"):
        for spec in (*S3_OPTIONS, DELTA_ENDPOINT_URL):
            options.reject(spec, "applies to s3:// paths only")
        return DeltaSettings(boundary.resolve_path(given), given, partition_by)
    if scheme not in ("s3", "s3a") or not urlsplit(given).netloc:
        raise core.ConnectorError(f"delta path '{given}': give a local path or "
                                  "s3://bucket/folder", option=PATH.name)
    region = options.string(DELTA_AWS_REGION) or DELTA_AWS_REGION.default
    url = options.string(DELTA_ENDPOINT_URL)
    endpoint = check_endpoint_url(url) if url is not None else f"https://s3.{region}.amazonaws.com"
    if boundary.egress is not None:
        parts = urlsplit(endpoint)
        assert parts.hostname is not None
        boundary.egress.check_literal(parts.hostname, _port(parts), option=_endpoint_option(url))
    storage = {"AWS_REGION": region, "AWS_ENDPOINT_URL": endpoint}
    for spec, key in S3_OPTIONS.items():
        value = options.string(spec, None)
        if value is not None:
            storage[key] = value
    if endpoint.startswith("http://"):
        storage["AWS_ALLOW_HTTP"] = "true"
    return DeltaSettings("s3://" + given.split("://", 1)[1], given, partition_by, storage,
                         endpoint)


def storage_options(settings: DeltaSettings, boundary: core.Boundary) -> dict[str, str] | None:
    """delta-rs's storage options, the endpoint resolved through the egress policy: a
    plain http endpoint is then reached at the checked address (https by name, for
    its certificate)."""
    if settings.storage is None:
        return None
    storage = dict(settings.storage)
    if boundary.egress is not None and settings.endpoint is not None:
        parts = urlsplit(settings.endpoint)
        assert parts.hostname is not None
        addresses = boundary.egress.resolve(parts.hostname, _port(parts),
                                            option=_endpoint_option(settings.endpoint))
        if parts.scheme == "http":
            host = f"[{addresses[0]}]" if ":" in addresses[0] else addresses[0]
            storage["AWS_ENDPOINT_URL"] = f"http://{host}:{_port(parts)}"
    return storage


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def _endpoint_option(url: str | None) -> str:
    return DELTA_ENDPOINT_URL.name if url is not None else DELTA_AWS_REGION.name


class DeltaSink(EpochAppendSink[DeltaSettings]):
    """Appends each epoch to a Delta table; marker ``{"epoch": n, "version": v}``."""

    kind = "delta"

    def __init__(self, table: str, settings: DeltaSettings, schema: pa.Schema,
                 boundary: core.Boundary) -> None:
        super().__init__(table, settings, schema, boundary)
        self._delta: DeltaTable | None = None

    def _what(self) -> str:
        return f"delta sink '{self.table}' ({self.settings.given})"

    def open(self, marker: Any | None) -> None:
        location = self.settings.location
        storage = storage_options(self.settings, self.boundary)
        try:
            delta = DeltaTable(location, storage_options=storage)
        except TableNotFoundError:
            if marker is not None and marker.get("version") is not None:
                raise core.ConnectorError(
                    f"{self._what()}: the table is gone, but epoch {marker['epoch']} was "
                    "committed to it; restore it or start the pipeline afresh",
                    option=PATH.name) from None
            if not self.settings.on_s3:
                os.makedirs(location, exist_ok=True)
            delta = self._create(location, storage)
        except (DeltaError, OSError) as error:
            raise core.ConnectorError(f"{self._what()}: cannot open the table: "
                                      f"{first_line(error, *_secrets(self.settings))}",
                                      option=PATH.name) from None
        self._check_schema(delta)
        in_table = delta.transaction_version(self.app_id)
        if marker is not None and marker.get("version") is not None \
                and delta.version() < int(marker["version"]):
            raise core.ConnectorError(
                f"{self._what()}: the table is at version {delta.version()} but version "
                f"{marker['version']} was committed; it was replaced outside Spate. Restore "
                "it or start the pipeline afresh", option=PATH.name)
        # A fresh pipeline starts its epochs afresh (see the module's docstring).
        self._written = int(in_table) if marker is not None and in_table is not None else -1
        self._delta = delta
        log.info("delta sink opened", extra={"table": self.table, "version": delta.version(),
                                             "epoch_in_table": in_table, "marker": marker})

    def _create(self, location: str, storage: dict[str, str] | None) -> DeltaTable:
        try:
            return DeltaTable.create(location, self.schema, mode="ignore",
                                     partition_by=list(self.settings.partition_by) or None,
                                     name=self.table, storage_options=storage)
        except (DeltaError, ValueError, TypeError, pa.ArrowException) as error:
            raise core.ConnectorError(f"{self._what()}: cannot create the table: "
                                      f"{first_line(error, *_secrets(self.settings))}",
                                      option=PATH.name) from None

    def _check_schema(self, delta: DeltaTable) -> None:
        have = [f.name for f in delta.schema().fields]
        want = list(self.schema.names)
        if have != want:
            raise core.ConnectorError(
                f"{self._what()}: the table has the columns ({', '.join(have)}) but the sink "
                f"writes ({', '.join(want)}); write to another path or declare the same "
                "columns", option=PATH.name)

    def _opened(self) -> bool:
        return self._delta is not None

    def _data_files(self, epoch: int) -> DataFiles:
        return DataFiles(self.settings.location, self.schema, epoch,
                         partition_by=self.settings.partition_by,
                         storage=storage_options(self.settings, self.boundary))

    def _commit(self, epoch: int, files: list[dict[str, Any]]) -> None:
        assert self._delta is not None
        now_ms = int(time.time() * 1000)
        # Paths as written (delta-rs escapes them for the log itself).
        actions: list[AddAction | RemoveAction] = [
            AddAction(f["path"], int(f["bytes"]), f["partition"], now_ms, True,
                      f["stats"]) for f in files]
        try:
            self._delta.create_write_transaction(
                actions, mode="append", schema=self.schema,
                partition_by=list(self.settings.partition_by) or None,
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(self.app_id, epoch)]))
        except (DeltaError, pa.ArrowException) as error:
            raise core.ConnectorError(f"{self._what()}: epoch {epoch} could not be appended: "
                                      f"{first_line(error, *_secrets(self.settings))}",
                                      option=PATH.name) from None
        self._delta.update_incremental()

    def _marker(self, epoch: int) -> dict[str, Any]:
        assert self._delta is not None
        return {"epoch": epoch, "version": self._delta.version()}

    def close(self) -> None:
        self._delta = None


@core.register
class DeltaConnector(LakeConnector):
    """Delta Lake tables (sinks only, as in Arroyo)."""

    name = "delta"
    sink_class = DeltaSink
    options = (*core.TYPE, PATH, PARTITIONING_FIELDS, DELTA_ENDPOINT_URL, *S3_OPTIONS)
    examples = {core.SINK: ({"path": "lake/t"}, {"path": "s3://bucket/t"})}

    def read_settings(self, options: core.OptionReader, table: core.TableConfig) -> DeltaSettings:
        return read_settings(options, table.boundary, table.columns)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        table = core.TableConfig(name="profile", connector=self.name, role=role or core.SINK,
                                 options=options, columns=(), boundary=boundary)
        reader = core.OptionReader(table)
        settings = read_settings(reader, boundary, None)
        try:
            delta = DeltaTable(settings.location,
                               storage_options=storage_options(settings, boundary))
        except TableNotFoundError:
            if settings.on_s3:
                return (f"delta: no table at '{settings.given}' yet; the first write "
                        "creates it")
            parent = settings.location
            while parent and not os.path.exists(parent):
                parent = os.path.dirname(parent)
            if not os.access(parent, os.W_OK):
                raise core.ConnectorError(f"delta path '{settings.given}' cannot be created: "
                                          "not writable", option=PATH.name) from None
            return f"delta: no table at '{settings.given}' yet; the first write creates it"
        except (DeltaError, OSError) as error:
            raise core.ConnectorError(f"delta path '{settings.given}' cannot be read: "
                                      f"{first_line(error, *_secrets(settings))}",
                                      option=PATH.name) from None
        return (f"delta table at '{settings.given}': version {delta.version()}, "
                f"columns {', '.join(f.name for f in delta.schema().fields)}")


def _secrets(settings: DeltaSettings) -> tuple[str | None, ...]:
    """The credentials among a table's storage options (masked in messages)."""
    storage = settings.storage or {}
    return storage.get("AWS_SECRET_ACCESS_KEY"), storage.get("AWS_SESSION_TOKEN")
