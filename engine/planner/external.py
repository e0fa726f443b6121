"""Tables defined outside a pipeline's SQL: an external catalog for the planner.

A :class:`TableDefinition` says what ``CREATE TABLE`` would say — connector,
WITH options, typed columns — as plain values (the API stores them as a
tenant's connection tables; a job receives them in its spec).
:func:`table_from_definition` turns one into the same :class:`Table` the
planner builds from ``CREATE TABLE``, through the same connector validation,
so a pipeline can name the table without declaring it. Event time comes from
the ``event_time_field`` / ``watermark_field`` options (there is no
``WATERMARK FOR`` clause outside SQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.lookup import LOOKUP, LookupConnector
from spate.engine.connectors.core.metadata import (
    EVENT_TIME_FIELD,
    IDLE_MICROS,
    TYPE_OPTION,
    WATERMARK_FIELD,
)
from spate.engine.planner.catalog import DEFAULT_WATERMARK_DELAY_SQL, Table
from spate.engine.planner.dialect import Spate
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.types import UnsupportedTypeError, spark_type


class TableDefinitionError(PlanningError):
    """A table definition the planner cannot accept; names the option or field at fault."""

    def __init__(self, message: str, option: str | None = None,
                 field_name: str | None = None) -> None:
        super().__init__(message)
        self.option = option
        self.field_name = field_name


@dataclass(frozen=True)
class FieldDefinition:
    """A column: its name and SQL type (``BIGINT``, ``TEXT``, ``STRUCT<a INT>``, …)."""

    name: str
    sql_type: str
    nullable: bool = True


@dataclass(frozen=True)
class TableDefinition:
    """A connector table as plain values: what ``CREATE TABLE`` would declare."""

    name: str
    connector: str
    #: WITH options but ``connector``; values are strings, as in SQL
    options: Mapping[str, str] = field(default_factory=dict)
    fields: tuple[FieldDefinition, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (for a job spec)."""
        return {"name": self.name, "connector": self.connector, "options": dict(self.options),
                "fields": [{"name": f.name, "sql_type": f.sql_type, "nullable": f.nullable}
                           for f in self.fields]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableDefinition:
        fields = tuple(FieldDefinition(str(f["name"]), str(f["sql_type"]),
                                       bool(f.get("nullable", True)))
                       for f in data.get("fields", ()))
        options = {str(k): str(v) for k, v in dict(data.get("options", {})).items()}
        return cls(name=str(data["name"]), connector=str(data["connector"]), options=options,
                   fields=fields)


def tables_from_definitions(definitions: Iterable[TableDefinition],
                            boundary: Boundary = UNCONFINED) -> dict[str, Table]:
    """An external catalog for :func:`spate.engine.planner.plan_pipeline`, by table name."""
    tables: dict[str, Table] = {}
    for definition in definitions:
        table = table_from_definition(definition, boundary)
        tables[table.name] = table
    return tables


def table_from_definition(definition: TableDefinition,
                          boundary: Boundary = UNCONFINED) -> Table:
    """The catalog entry ``CREATE TABLE`` would give, its connector held to ``boundary``;
    raises :class:`TableDefinitionError`."""
    name = definition.name.lower()
    connector = CONNECTORS.get(definition.connector)
    if connector is None:
        known = ", ".join(sorted(CONNECTORS))
        raise TableDefinitionError(f"unknown connector '{definition.connector}'; known "
                                   f"connectors: {known}")
    options = {key.lower(): value for key, value in definition.options.items()}
    if "connector" in options:
        raise TableDefinitionError("give the connector on its own, not as an option",
                                   option="connector")
    columns = tuple(_column(f) for f in definition.fields)
    _check_unique([c.name for c in columns])
    declared = options.get(TYPE_OPTION.name)
    role = declared if declared in ("source", "sink") else (
        next(iter(connector.roles)) if len(connector.roles) == 1
        # without a type, a lookup connector's table stays a lookup table (redis)
        else LOOKUP if isinstance(connector, LookupConnector) else declared or "source")
    config = TableConfig(name=name, connector=definition.connector, role=role,
                         options=options, columns=columns, boundary=boundary)
    try:
        physical = connector.validate(config)
    except ConnectorError as error:
        raise TableDefinitionError(f"table {name}: {error}", option=error.option) from error
    config = TableConfig(name=name, connector=definition.connector, role=role,
                         options=options, columns=tuple(physical), boundary=boundary)
    event_time_sql, watermark_sql = _event_time(options, {c.name: c.spark_type for c in physical})
    return Table(name=name, config=config, columns=tuple(physical),
                 event_time_sql=event_time_sql, watermark_sql=watermark_sql,
                 idle_micros=int(options.get(IDLE_MICROS.name, IDLE_MICROS.default)),
                 bounded=role == "source" and connector.is_bounded(config))


def _column(definition: FieldDefinition) -> ColumnDef:
    name = definition.name.lower()
    data_type = _parse_type(definition)
    try:
        column_type = spark_type(data_type)
    except UnsupportedTypeError as error:
        raise TableDefinitionError(f"field '{name}': {error}", field_name=name) from error
    return ColumnDef(name, column_type, nullable=definition.nullable)


def _parse_type(definition: FieldDefinition) -> exp.DataType:
    """The type through the grammar of CREATE TABLE columns, refusing anything more."""
    name = definition.name.lower()
    problem = f"field '{name}': '{definition.sql_type}' is not a column type"
    if ";" in definition.sql_type or not definition.sql_type.strip():
        raise TableDefinitionError(problem, field_name=name)
    quoted = exp.to_identifier(name, quoted=True).sql(dialect=Spate)
    try:
        statement = sqlglot.parse_one(f"CREATE TABLE t ({quoted} {definition.sql_type})",
                                      dialect=Spate)
    except (ParseError, TokenError) as error:
        raise TableDefinitionError(problem, field_name=name) from error
    schema = statement.this if isinstance(statement, exp.Create) else None
    items = schema.expressions if isinstance(schema, exp.Schema) else []
    extra = statement.args.get("properties") or statement.args.get("expression")
    if extra is not None or len(items) != 1 or not isinstance(items[0], exp.ColumnDef):
        raise TableDefinitionError(problem, field_name=name)
    kind = items[0].args.get("kind")
    if not isinstance(kind, exp.DataType) or items[0].constraints:
        raise TableDefinitionError(problem, field_name=name)
    return kind


def _check_unique(names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TableDefinitionError(f"field '{name}' is declared twice", field_name=name)
        seen.add(name)


def _event_time(options: Mapping[str, str],
                known: Mapping[str, T.DataType]) -> tuple[str | None, str]:
    """Event time and watermark SQL from the options, as for CREATE TABLE without WATERMARK."""
    event_time: str | None = None
    for key in (EVENT_TIME_FIELD.name, WATERMARK_FIELD.name):
        column = options.get(key)
        if column is None:
            continue
        if column.lower() not in known:
            raise TableDefinitionError(f"{key} names unknown field '{column}'", option=key)
        kind = known[column.lower()]
        if not isinstance(kind, T.TimestampType):
            raise TableDefinitionError(f"{key} names field '{column}', which must be a "
                                       f"TIMESTAMP (it is {kind.simpleString()})", option=key)
    if EVENT_TIME_FIELD.name in options:
        event_time = f"`{options[EVENT_TIME_FIELD.name].lower()}`"
    if WATERMARK_FIELD.name in options:
        return event_time, f"`{options[WATERMARK_FIELD.name].lower()}`"
    base = event_time or "`_spate_timestamp`"
    return event_time, f"{base} - {DEFAULT_WATERMARK_DELAY_SQL}"
