"""The ``postgres`` lookup connector: rows of a PostgreSQL table or query, by primary key.

Each batch of keys is one statement, ``SELECT <columns> FROM <table or (query)>
WHERE key = ANY(<array of keys>)`` (a composite key matches rows of ``unnest``
of one array per key column), run on an autocommit connection kept per executor
process, so every batch sees the newest committed rows. Columns are cast to
their declared types by PostgreSQL (a ``jsonb`` column declared TEXT arrives as
JSON text). Options are documented in this package's README.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import EgressPolicy, unreachable
from spate.engine.connectors.core.lookup import (
    Key,
    LookupConnector,
    LookupSource,
    check_lookup_table,
    read_cache_settings,
)

if TYPE_CHECKING:  # psycopg is imported where a connection is made: see the README
    import psycopg
    from psycopg import sql

_SIMPLE_TYPES: dict[type[T.DataType], str] = {
    T.BooleanType: "boolean",
    T.ByteType: "smallint",
    T.ShortType: "smallint",
    T.IntegerType: "integer",
    T.LongType: "bigint",
    T.FloatType: "real",
    T.DoubleType: "double precision",
    T.StringType: "text",
    T.BinaryType: "bytea",
    T.TimestampType: "timestamp",
    T.DateType: "date",
    T.DayTimeIntervalType: "interval",
}
#: The alias of the table or query in the lookup statement.
_ALIAS = "spate_lookup"
_CONNECT_TIMEOUT_S = 10
#: libpq parameters a tenant's URL may set under an egress policy (the others read
#: files on the job's machine, name other hosts or services, or are set here).
_CONFINED_KEYS = frozenset({"host", "port", "dbname", "user", "password", "sslmode",
                            "application_name", "connect_timeout", "options",
                            "target_session_attrs", "sslnegotiation"})

URL = core.option("url", core.LOOKUP_ROLES, "`postgresql://user@host:5432/db`, or a libpq "
                  "`key=value` string", required=True)
USERNAME = core.LOOKUP_USERNAME.described("the user to log in as, overriding the URL's",
                                          default_text="from `url`")
PASSWORD = core.LOOKUP_PASSWORD.described("its password, overriding the URL's",
                                          default_text="from `url`")
TABLE = core.option("table", core.LOOKUP_ROLES, "a table, `name` or `schema.name`",
                    required_when="one of `table`, `query`")
QUERY = core.option("query", core.LOOKUP_ROLES, "a `SELECT` whose result has the declared columns",
                    required_when="one of `table`, `query`")


@dataclass(frozen=True)
class PostgresLookupSettings:
    url: str
    username: str | None
    password: str | None
    #: the schema-qualified table name, as its parts; empty when ``query`` is given
    table: tuple[str, ...]
    query: str | None


def postgres_type(data_type: T.DataType) -> str | None:
    """The PostgreSQL type a column of ``data_type`` is cast to; None: not supported."""
    if isinstance(data_type, T.DecimalType):
        return f"numeric({data_type.precision}, {data_type.scale})"
    if isinstance(data_type, T.ArrayType):
        inner = postgres_type(data_type.elementType)
        return None if inner is None or inner.endswith("]") else f"{inner}[]"
    return _SIMPLE_TYPES.get(type(data_type))


def read_settings(table: core.TableConfig) -> PostgresLookupSettings:
    """Check every option of a postgres lookup table; raises :class:`ConnectorError`."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    options = core.OptionReader(table)
    check_lookup_table(options)
    read_cache_settings(options)
    url = options.required(URL).strip()
    try:
        conninfo = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        # The URL may hold a password: never repeat it.
        raise core.ConnectorError(f"option '{URL.name}' must be a PostgreSQL URL such as "
                                  "'postgresql://user@host:5432/db' (or a libpq connection "
                                  "string)", option=URL.name) from None
    name, query = options.string(TABLE), options.string(QUERY)
    if (name is None) == (query is None):
        raise core.ConnectorError(f"postgres lookup table '{table.name}' needs exactly one of the "
                                  f"options '{TABLE.name}' (a table name) and '{QUERY.name}' (a "
                                  "SELECT)", option=QUERY.name if name is not None else None)
    parts: tuple[str, ...] = ()
    if name is not None:
        parts = tuple(p.strip() for p in name.split("."))
        if not 1 <= len(parts) <= 2 or not all(parts):
            raise core.ConnectorError(f"option '{TABLE.name}' must be a table name or "
                                      f"schema.table, not '{name}'", option=TABLE.name)
    elif query is not None and not query.strip().rstrip(";").strip():
        raise core.ConnectorError(f"option '{QUERY.name}' must not be empty", option=QUERY.name)
    for column in table.columns:
        if postgres_type(column.spark_type) is None:
            raise core.ConnectorError(f"column '{column.name}' is "
                                      f"{column.spark_type.simpleString()}, which a postgres "
                                      f"lookup table cannot return (structs and nested arrays are "
                                      f"not supported)")
    settings = PostgresLookupSettings(
        url=url, username=options.string(USERNAME), password=options.string(PASSWORD),
        table=parts, query=query.strip().rstrip(";") if query is not None else None)
    options.finish()
    if table.boundary.egress is not None:
        host, port = confined_destination(conninfo)
        table.boundary.egress.check_literal(host, port, _database(conninfo, settings.username),
                                            option=URL.name)
    return settings


@core.register
class PostgresLookupConnector(LookupConnector):
    name = "postgres"
    options = (core.LOOKUP_TYPE, URL, USERNAME, PASSWORD, TABLE, QUERY, core.CACHE_MAX_BYTES,
               core.CACHE_TTL)
    examples = {core.LOOKUP: ({"url": "postgresql://h/db", "table": "t"},)}

    def read_settings(self, table: core.TableConfig) -> PostgresLookupSettings:
        return read_settings(table)

    def create_lookup(self, table: core.TableConfig) -> LookupSource:
        return PostgresLookup(table, read_settings(table))


class PostgresLookup(LookupSource):
    """One autocommit connection, opened on first use and reopened once if it breaks."""

    def __init__(self, table: core.TableConfig, settings: PostgresLookupSettings) -> None:
        super().__init__(table)
        self.settings = settings
        self.statement = self._statement()
        self.key_names = frozenset(table.primary_key)
        self._connection: psycopg.Connection[Any] | None = None

    def _statement(self) -> sql.Composed:
        from psycopg import sql
        columns = sql.SQL(", ").join(
            sql.SQL("CAST({} AS {})").format(sql.Identifier(c.name),
                                             sql.SQL(postgres_type(c.spark_type) or ""))
            for c in self.table.columns)
        if self.settings.query is not None:
            # The query is the user's own SQL; '%' is doubled so only our placeholders bind.
            source: sql.Composable = sql.SQL("({})").format(
                sql.SQL(self.settings.query.replace("%", "%%")))
        else:
            source = sql.Identifier(*self.settings.table)
        keys = [sql.Identifier(c.name) for c in self.key_columns]
        arrays = [sql.SQL("%s::{}[]").format(sql.SQL(postgres_type(c.spark_type) or ""))
                  for c in self.key_columns]
        if len(keys) == 1:
            match = sql.SQL("{} = ANY({})").format(keys[0], arrays[0])
        else:
            match = sql.SQL("({}) IN (SELECT * FROM unnest({}))").format(
                sql.SQL(", ").join(keys), sql.SQL(", ").join(arrays))
        return sql.SQL("SELECT {} FROM {} AS {} WHERE {}").format(
            columns, source, sql.Identifier(_ALIAS), match)

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg
        from psycopg.conninfo import make_conninfo
        if self._connection is None or self._connection.closed:
            extra = {k: v for k, v in (("user", self.settings.username),
                                       ("password", self.settings.password)) if v is not None}
            egress = self.table.boundary.egress
            if egress is None:
                self._connection = psycopg.connect(make_conninfo(self.settings.url, **extra),
                                                   autocommit=True)
            else:
                self._connection = self._connect_confined(egress, extra)
            # Timestamps arrive as UTC wall-clock values, as Spate reads TIMESTAMP.
            self._connection.execute("SET TIME ZONE 'UTC'")
        return self._connection

    def _connect_confined(self, egress: EgressPolicy,
                          extra: dict[str, str]) -> psycopg.Connection[Any]:
        """Connect to an address the egress policy allowed, checked now (so a name
        cannot be pointed elsewhere after planning); every failure reads the same.

        The port and database checked are written into the connection string, so
        libpq's defaults from the job's environment (``PGPORT``, ``PGDATABASE``)
        cannot connect elsewhere than what was checked.
        """
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        parts = conninfo_to_dict(self.settings.url)
        host, port = confined_destination(parts)
        database = _database(parts, extra.get("user"))
        addresses = egress.resolve(host, port, database, option=URL.name)
        pinned = {"hostaddr": addresses[0], "port": str(port),
                  **({"dbname": database} if database is not None else {})}
        conninfo = make_conninfo(self.settings.url, **extra, **pinned,
                                 connect_timeout=str(_CONNECT_TIMEOUT_S))
        try:
            return psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error:
            raise unreachable(f"lookup table '{self.table.name}'", host, port) from None

    def fetch(self, keys: Sequence[Key]) -> pa.Table:
        import psycopg
        if not keys:
            return self.schema.empty_table()
        arrays = [[k[i] for k in keys] for i in range(len(self.key_columns))]
        try:
            rows = self._run(arrays)
        except psycopg.Error as error:
            raise core.ConnectorError(f"lookup table '{self.table.name}': PostgreSQL failed: "
                                      f"{self._redact(_first_line(error))}") from None
        self._check_unique(rows)
        columns = [pa.array([row[i] for row in rows], field.type)
                   for i, field in enumerate(self.schema)]
        return pa.table(columns, schema=self.schema)

    def _check_unique(self, rows: list[tuple[Any, ...]]) -> None:
        """A key matching several rows is an error: a lookup returns at most one row."""
        positions = [i for i, c in enumerate(self.table.columns) if c.name in self.key_names]
        seen: set[tuple[Any, ...]] = set()
        for row in rows:
            key = tuple(row[i] for i in positions)
            if key in seen:
                shown = ", ".join(map(repr, key))
                raise core.ConnectorError(f"lookup table '{self.table.name}': key ({shown}) "
                                          f"matches several rows; its PRIMARY KEY must be unique "
                                          f"in the table or query")
            seen.add(key)

    def _run(self, arrays: list[list[Any]]) -> list[tuple[Any, ...]]:
        import psycopg
        for attempt in (1, 2):
            connection = self._connect()
            try:
                return connection.execute(self.statement, arrays).fetchall()
            except psycopg.OperationalError:
                if attempt == 2 or not connection.closed:
                    raise
                self._connection = None  # the server went away: reconnect once
        raise AssertionError("unreachable")

    def _redact(self, message: str) -> str:
        from psycopg.conninfo import conninfo_to_dict
        secrets = [self.settings.password, conninfo_to_dict(self.settings.url).get("password")]
        for secret in secrets:
            if secret:
                message = message.replace(str(secret), "***")
        return message

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def confined_destination(parts: dict[str, Any]) -> tuple[str, int]:
    """The one host and port of a tenant's libpq connection, refusing what would reach
    past the egress policy: sockets on the job's machine, several hosts, and options
    that read local files or service definitions."""
    unsafe = sorted(set(parts) - _CONFINED_KEYS)
    if unsafe:
        raise core.ConnectorError(f"option '{URL.name}': the connection parameter '{unsafe[0]}' "
                                  f"cannot be used here; give host, port, dbname, user, password "
                                  f"and sslmode",
                                  option=URL.name)
    host = str(parts.get("host") or "")
    if not host or host.startswith("/") or "," in host or host.startswith("@"):
        raise core.ConnectorError(f"option '{URL.name}' must name one network host "
                                  "('postgresql://user@host:5432/db'); local sockets and lists of "
                                  "hosts cannot be used here", option=URL.name)
    try:
        port = int(str(parts.get("port") or 5432))
    except ValueError:
        raise core.ConnectorError(f"option '{URL.name}' has a port that is not a number",
                                  option=URL.name) from None
    return host, port


def _database(parts: Mapping[str, Any], username: str | None) -> str | None:
    """The database a connection opens (libpq defaults it to the user's name)."""
    value = parts.get("dbname") or username or parts.get("user")
    return None if value is None else str(value)


def _first_line(error: Exception) -> str:
    """PostgreSQL's message without its multi-line query excerpt."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
