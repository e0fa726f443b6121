"""The ``iceberg`` sink: each epoch one append snapshot of an Iceberg table, exactly once.

The table lives in a SQL catalog (pyiceberg's ``SqlCatalog``) on PostgreSQL:
``catalog.uri`` names the database (``postgresql+psycopg://user@host:port/db``),
``catalog.password`` its password (a secret option, put into the URI only when
connecting), ``catalog.name`` the catalog within it and ``catalog.warehouse`` where
data and metadata files go (a path inside the tenant's storage root). The
namespace and the table are created from the sink's columns when missing.

The Spark tasks write an epoch's rows as Parquet files into the table's ``data/``
folder (:mod:`.lake_files`); the driver adds the files they report in one append
commit (pyiceberg's ``add_files``, which reads their footers for the manifest's
statistics) whose snapshot summary carries ``spate.app-id``
(``spate-<tenant>/<pipeline>/<table>``) and ``spate.epoch``. The engine commits the
epoch (marker ``{"epoch": n, "snapshot": id}``) after ``write_epoch`` returns, so a
crash between the catalog's commit and the engine's replays an epoch the table
already has: the sink walks back from the current snapshot to the last one of its
app id, finds the epoch there and skips it.

As with the delta and kafka sinks, a fresh pipeline (no marker) ignores what an
earlier pipeline of the same name left in the table. Empty epochs write nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from spate.engine.connectors import core
from spate.engine.connectors.filesystem.lake_files import DataFiles
from spate.engine.connectors.filesystem.lakehouse import (
    EpochAppendSink,
    LakeConnector,
    first_line,
)

if TYPE_CHECKING:  # pyiceberg is imported by what opens a catalog: planning needs none
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

#: Snapshot summary properties naming the writer and the epoch of an append.
APP_ID_PROPERTY = "spate.app-id"
EPOCH_PROPERTY = "spate.epoch"
_DRIVERS = ("postgresql", "postgresql+psycopg")

CATALOG_URI = core.option("catalog.uri", core.SINKS, "the catalog's database, "
                          "`postgresql+psycopg://user@host:port/database`; no password in it",
                          required=True)
CATALOG_PASSWORD = core.option("catalog.password", core.SINKS, "the database password")
CATALOG_NAME = core.option("catalog.name", core.SINKS, "the catalog's name within the database "
                           "(several catalogs can share one)", default="spate")
CATALOG_WAREHOUSE = core.option("catalog.warehouse", core.SINKS, "folder of the tables' files; "
                                "relative to the working directory of `spate run`, to the tenant's "
                                "storage root in the service. Object stores are not supported yet",
                                required=True)
NAMESPACE = core.option("namespace", core.SINKS, "the table's namespace (one level)",
                        default="default")
TABLE_NAME = core.option("table_name", core.SINKS, "the table's name", required=True)


@dataclass(frozen=True)
class IcebergSettings:
    """An iceberg table's (or profile's) options, checked."""

    uri: URL
    password: str | None
    catalog_name: str
    #: ``file://`` URL of the warehouse folder, and the folder as the options give it
    warehouse: str
    given_warehouse: str
    namespace: str
    table_name: str | None

    @property
    def shown_uri(self) -> str:
        return self.uri.render_as_string(hide_password=True)

    @property
    def identifier(self) -> tuple[str, str]:
        assert self.table_name is not None
        return (self.namespace, self.table_name)


def read_settings(options: core.OptionReader, boundary: core.Boundary,
                  table_required: bool = True) -> IcebergSettings:
    """The catalog, warehouse and table of a table's (or profile's) options."""
    raw = options.required(CATALOG_URI)
    try:
        uri = make_url(raw)
    except (ArgumentError, ValueError):
        raise core.ConnectorError(f"{CATALOG_URI.name} is not a database URL; give "
                                  "postgresql+psycopg://user@host:port/database",
                                  option=CATALOG_URI.name) from None
    if uri.drivername not in _DRIVERS:
        raise core.ConnectorError(f"{CATALOG_URI.name}: the catalog must be on PostgreSQL "
                                  f"(postgresql+psycopg://...), not '{uri.drivername}'",
                                  option=CATALOG_URI.name)
    if uri.password is not None:
        raise core.ConnectorError(f"{CATALOG_URI.name} must not hold the password: give it in "
                                  f"{CATALOG_PASSWORD.name} (kept secret)", option=CATALOG_URI.name)
    if not uri.host or uri.query:
        raise core.ConnectorError(f"{CATALOG_URI.name} needs a host and takes no query parameters: "
                                  "postgresql+psycopg://user@host:port/database",
                                  option=CATALOG_URI.name)
    uri = uri.set(drivername="postgresql+psycopg")
    if boundary.egress is not None and uri.host is not None:
        boundary.egress.check_literal(uri.host, uri.port or 5432, uri.database,
                                      option=CATALOG_URI.name)
    password = options.string(CATALOG_PASSWORD)
    name = options.string(CATALOG_NAME) or CATALOG_NAME.default
    given = options.required(CATALOG_WAREHOUSE)
    if "://" in given and not given.startswith("file://"):
        raise core.ConnectorError(f"{CATALOG_WAREHOUSE.name} '{given}': only local paths (inside "
                                  f"your "
                                  "storage root) are supported so far",
                                  option=CATALOG_WAREHOUSE.name)
    folder = boundary.resolve_path(given, option=CATALOG_WAREHOUSE.name)
    namespace = options.string(NAMESPACE) or NAMESPACE.default
    table_name = options.string(TABLE_NAME, required=table_required)
    for spec, value in ((NAMESPACE, namespace), (TABLE_NAME, table_name)):
        if value is not None and (not value.strip() or "." in value):
            raise core.ConnectorError(f"{spec.name} '{value}' must be one non-empty name without "
                                      "dots", option=spec.name)
    return IcebergSettings(uri, password, name, "file://" + folder, given, namespace,
                           table_name)


def open_catalog(settings: IcebergSettings, boundary: core.Boundary, what: str) -> SqlCatalog:
    """The SQL catalog, connected through ``boundary``'s egress policy."""
    uri = settings.uri
    if settings.password is not None:
        uri = uri.set(password=settings.password)
    if boundary.egress is not None:
        assert uri.host is not None
        addresses = boundary.egress.resolve(uri.host, uri.port or 5432, uri.database,
                                            option=CATALOG_URI.name)
        # libpq connects to the checked address and keeps the name for TLS.
        uri = uri.update_query_dict({"hostaddr": addresses[0]})
    os.makedirs(settings.warehouse.removeprefix("file://"), exist_ok=True)
    from pyiceberg.catalog.sql import SqlCatalog

    try:
        return SqlCatalog(settings.catalog_name,
                          uri=uri.render_as_string(hide_password=False),
                          warehouse=settings.warehouse)
    except SQLAlchemyError as error:
        raise core.ConnectorError(f"{what}: cannot reach the catalog at {settings.shown_uri}: "
                                  f"{first_line(error, settings.password)}",
                                  option=CATALOG_URI.name) from None


class IcebergSink(EpochAppendSink[IcebergSettings]):
    """One append snapshot per epoch; marker ``{"epoch": n, "snapshot": id}``."""

    kind = "iceberg"

    def __init__(self, table: str, settings: IcebergSettings, schema: pa.Schema,
                 boundary: core.Boundary) -> None:
        super().__init__(table, settings, schema, boundary)
        self._catalog: SqlCatalog | None = None
        self._iceberg: Table | None = None

    def _what(self) -> str:
        return f"iceberg sink '{self.table}'"

    def open(self, marker: Any | None) -> None:
        catalog = open_catalog(self.settings, self.boundary, self._what())
        self._catalog = catalog
        try:
            iceberg = self._load_or_create(catalog, marker)
        except SQLAlchemyError as error:
            raise core.ConnectorError(f"{self._what()}: the catalog at {self.settings.shown_uri} "
                                      f"failed: {first_line(error, self.settings.password)}",
                                      option=CATALOG_URI.name) from None
        have = [f.name for f in iceberg.schema().fields]
        if have != list(self.schema.names):
            raise core.ConnectorError(
                f"{self._what()}: the table has the columns ({', '.join(have)}) but the sink "
                f"writes ({', '.join(self.schema.names)}); name another table or declare the "
                "same columns", option=TABLE_NAME.name)
        in_table = last_epoch(iceberg, self.app_id)
        # A fresh pipeline starts its epochs afresh (see the module's docstring).
        self._written = in_table if marker is not None and in_table is not None else -1
        self._iceberg = iceberg
        log.info("iceberg sink opened", extra={"table": self.table, "marker": marker,
                                               "epoch_in_table": in_table})

    def _load_or_create(self, catalog: SqlCatalog, marker: Any | None) -> Table:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError

        identifier = self.settings.identifier
        try:
            return catalog.load_table(identifier)
        except NoSuchTableError:
            if marker is not None and marker.get("snapshot") is not None:
                raise core.ConnectorError(
                    f"{self._what()}: table {'.'.join(identifier)} is gone, but epoch "
                    f"{marker['epoch']} was committed to it; restore it or start the "
                    "pipeline afresh", option=TABLE_NAME.name) from None
        try:
            catalog.create_namespace(self.settings.namespace)
        except NamespaceAlreadyExistsError:
            pass
        return catalog.create_table_if_not_exists(identifier, self.schema)

    def _opened(self) -> bool:
        return self._iceberg is not None

    def _data_files(self, epoch: int) -> DataFiles:
        assert self._iceberg is not None
        return DataFiles(_local_folder(self._iceberg.location()), self.schema, epoch,
                         folder="data/")

    def _commit(self, epoch: int, files: list[dict[str, Any]]) -> None:
        assert self._iceberg is not None
        root = self._iceberg.location().rstrip("/")
        try:
            # The names are new (each holds a random part): no scan for duplicates.
            self._iceberg.add_files([f"{root}/{f['path']}" for f in files],
                                    snapshot_properties={APP_ID_PROPERTY: self.app_id,
                                                         EPOCH_PROPERTY: str(epoch)},
                                    check_duplicate_files=False)
        except SQLAlchemyError as error:
            raise core.ConnectorError(f"{self._what()}: epoch {epoch} could not be committed: "
                                      f"{first_line(error, self.settings.password)}",
                                      option=CATALOG_URI.name) from None

    def _marker(self, epoch: int) -> dict[str, Any]:
        assert self._iceberg is not None
        return {"epoch": epoch, "snapshot": _snapshot_id(self._iceberg)}

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.engine.dispose()
        self._catalog = None
        self._iceberg = None


def last_epoch(iceberg: Table, app: str) -> int | None:
    """The epoch of the newest snapshot ``app`` appended, walking back from the current one."""
    snapshot = iceberg.current_snapshot()
    while snapshot is not None:
        summary = snapshot.summary
        properties = summary.additional_properties if summary is not None else {}
        if properties.get(APP_ID_PROPERTY) == app and EPOCH_PROPERTY in properties:
            return int(properties[EPOCH_PROPERTY])
        parent = snapshot.parent_snapshot_id
        snapshot = iceberg.snapshot_by_id(parent) if parent is not None else None
    return None


def _local_folder(location: str) -> str:
    """The local folder of a table's ``file://`` location (the warehouse is local)."""
    return location.removeprefix("file://")


def _snapshot_id(iceberg: Table) -> int | None:
    snapshot = iceberg.current_snapshot()
    return None if snapshot is None else snapshot.snapshot_id


@core.register
class IcebergConnector(LakeConnector):
    """Iceberg tables in a SQL catalog on PostgreSQL (sinks only, as in Arroyo)."""

    name = "iceberg"
    sink_class = IcebergSink
    options = (*core.TYPE, CATALOG_URI, CATALOG_PASSWORD, CATALOG_NAME, CATALOG_WAREHOUSE,
               NAMESPACE,
               TABLE_NAME)
    examples = {core.SINK: ({"catalog.uri": "postgresql+psycopg://u@h/db",
                            "catalog.warehouse": "lake", "table_name": "t"},)}

    def read_settings(self, options: core.OptionReader, table: core.TableConfig) -> IcebergSettings:
        return read_settings(options, table.boundary)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        table = core.TableConfig(name="profile", connector=self.name, role=role or core.SINK,
                                 options=options, columns=(), boundary=boundary)
        settings = read_settings(core.OptionReader(table), boundary, table_required=False)
        catalog = open_catalog(settings, boundary, "iceberg")
        try:
            namespaces = catalog.list_namespaces()
            found = ""
            if settings.table_name is not None:
                exists = catalog.table_exists(settings.identifier)
                found = (f"; table {'.'.join(settings.identifier)} "
                         f"{'exists' if exists else 'will be created on the first write'}")
        except SQLAlchemyError as error:
            raise core.ConnectorError(f"iceberg: the catalog at {settings.shown_uri} failed: "
                                      f"{first_line(error, settings.password)}",
                                      option=CATALOG_URI.name) from None
        finally:
            catalog.engine.dispose()
        return (f"iceberg catalog '{settings.catalog_name}' at {settings.shown_uri}: "
                f"{len(namespaces)} namespace(s){found}")
