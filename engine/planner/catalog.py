"""CREATE TABLE statements to catalog entries: connector config, columns,
event time and watermark."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlglot
from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.connectors import CONNECTORS, ColumnDef, Connector, ConnectorError, TableConfig
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.lookup import LOOKUP, LookupConnector
from spate.engine.connectors.core.metadata import (
    EVENT_TIME_FIELD,
    FORMAT_OPTION,
    IDLE_MICROS,
    TYPE_OPTION,
    WATERMARK_FIELD,
    OptionSpec,
)
from spate.engine.defaults import DEFAULT_IDLE_MICROS as DEFAULT_IDLE_MICROS
from spate.engine.planner.dialect import MetadataColumnConstraint
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.positions import SourceText
from spate.engine.planner.types import UnsupportedTypeError, spark_type
from spate.engine.planner.window import IntervalError, interval_micros

#: Default lateness when a table declares no watermark (docs/sql/ddl.md).
DEFAULT_WATERMARK_DELAY_SQL = "INTERVAL 1 SECOND"
DEBEZIUM_JSON = "debezium_json"
#: Connectors and formats of Arroyo's dialect that Spate has not implemented yet:
#: refused as such rather than as unknown names (a test keeps this list free of
#: the connectors Spate has).
NOT_YET_CONNECTORS = frozenset({"confluent", "redpanda", "fluvio", "mysql"})
NOT_YET_FORMATS = frozenset({"parquet"})
_ENV_REF = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Table:
    """A declared connector table."""

    name: str
    config: TableConfig
    #: physical columns the connector produces, as validated by it
    columns: tuple[ColumnDef, ...]
    #: virtual columns: name -> Spark SQL over the physical columns
    generated: dict[str, str] = field(default_factory=dict)
    #: Spark SQL giving a row's event time (None: the connector's own clock)
    event_time_sql: str | None = None
    #: Spark SQL giving the watermark a row allows
    watermark_sql: str | None = None
    idle_micros: int = DEFAULT_IDLE_MICROS
    bounded: bool = False

    @property
    def role(self) -> str:
        return self.config.role

    @property
    def primary_key(self) -> tuple[str, ...]:
        return self.config.primary_key

    @property
    def updating(self) -> bool:
        """A source whose records are changes (debezium_json): its rows are updating."""
        return self.role == "source" and _is_debezium(self.config.options)

    @property
    def visible_columns(self) -> list[str]:
        """Columns a query can name, in declaration order."""
        return [c.name for c in self.columns] + list(self.generated)

    def column_type(self, name: str) -> T.DataType | None:
        for column in self.columns:
            if column.name == name:
                return column.spark_type
        return None


@dataclass(frozen=True)
class MemoryTable:
    """A table without a connector: one INSERT INTO writes it, later queries read it."""

    name: str
    #: declared (name, type) pairs; None takes the writing query's columns as they are
    columns: tuple[tuple[str, exp.DataType], ...] | None


def is_memory_table(node: exp.Create) -> bool:
    """``CREATE TABLE t (...)`` with neither connector options nor ``AS query``."""
    return (node.args.get("properties") is None and node.args.get("expression") is None
            and isinstance(node.this, exp.Schema))


def memory_table_from_create(node: exp.Create, text: SourceText, fallback: int) -> MemoryTable:
    """A :class:`MemoryTable` from ``CREATE TABLE t (col type, ...)``."""
    schema = node.this
    assert isinstance(schema, exp.Schema)  # what is_memory_table checked
    name = schema.this.name.lower()
    columns: list[tuple[str, exp.DataType]] = []
    for item in schema.expressions:
        kind = item.args.get("kind") if isinstance(item, exp.ColumnDef) else None
        if not isinstance(item, exp.ColumnDef) or item.constraints \
                or not isinstance(kind, exp.DataType):
            raise text.error(f"memory table {name}: a column takes only a name and a type "
                             "(a table with a WATERMARK or computed columns needs a connector)",
                             item, fallback)
        try:
            spark_type(kind)
        except UnsupportedTypeError as error:
            raise _type_error(error, item, text, fallback) from error
        if any(c == item.name.lower() for c, _ in columns):
            raise text.error(f"column '{item.name.lower()}' is declared twice", item, fallback)
        columns.append((item.name.lower(), kind))
    return MemoryTable(name, tuple(columns) or None)


def table_from_create(node: exp.Create, text: SourceText, fallback: int,
                      variables: Mapping[str, str],
                      boundary: Boundary = UNCONFINED) -> Table:
    """Build a :class:`Table` from ``CREATE TABLE``; raises located PlanningErrors.

    ``variables`` fill the ``{{ NAME }}`` references in option values; the
    table's connector is held to ``boundary`` (storage root, egress policy).
    """
    schema = node.this
    table_node = schema.this if isinstance(schema, exp.Schema) else schema
    name = table_node.name.lower()
    properties = node.args.get("properties")
    if properties is None:
        raise text.error(
            f"table {name} has neither a WITH (connector = ...) clause nor columns: give it a "
            "connector, or columns to make it a memory table", node, fallback,
        )
    temporary = any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
    options, option_nodes = _options(properties, text, fallback, variables)
    connector_name = options.pop("connector", None)
    connector = _connector(name, connector_name, temporary, options, option_nodes, text,
                           properties, fallback)
    assert connector_name is not None  # _connector raised otherwise
    columns, generated_nodes, watermark, primary_key, metadata = _columns(schema, text, fallback)
    _check_lookup_declaration(name, connector, temporary, options, option_nodes, text, node,
                              fallback)
    if temporary:
        _check_lookup_columns(name, generated_nodes, watermark, text, fallback)
    role = LOOKUP if temporary else _role(connector, options)
    if role == "sink":
        _check_sink_columns(name, generated_nodes, watermark, text, fallback)
    _check_primary_key(primary_key, role, options, text, fallback)
    chosen = _check_metadata(metadata, connector, role, columns, primary_key, options, text,
                             fallback)
    if role == "source" and _is_debezium(options) and generated_nodes:
        expression = next(iter(generated_nodes.values())).this  # inside the CAST to its type
        raise text.error(f"table {name}: a debezium_json source cannot have generated "
                         "columns (its rows are changes of the columns it declares)",
                         expression, fallback)
    keys = tuple(primary_key)
    config = TableConfig(name=name, connector=connector_name, role=role, options=options,
                         columns=tuple(columns), primary_key=keys, boundary=boundary,
                         metadata=chosen)
    try:
        physical = connector.validate(config)
    except ConnectorError as error:
        raise _located(error, name, node, option_nodes, text, fallback) from error
    config = TableConfig(name=name, connector=connector_name, role=role, options=options,
                         columns=tuple(physical), primary_key=keys, boundary=boundary,
                         metadata=chosen)
    if role == LOOKUP:  # fetched by key, never streamed: no event time
        return Table(name=name, config=config, columns=tuple(physical))
    _check_generated_references(name, generated_nodes, physical, text, fallback)
    generated = {col: expr.sql(dialect="spark") for col, expr in generated_nodes.items()}
    types = {c.name: c.spark_type for c in physical}
    types.update((col, spark_type(cast.to)) for col, cast in generated_nodes.items()
                 if isinstance(cast, exp.Cast))
    event_time_sql, watermark_sql = _event_time(name, options, types, watermark, text,
                                                fallback, option_nodes)
    return Table(
        name=name, config=config, columns=tuple(physical), generated=generated,
        event_time_sql=event_time_sql, watermark_sql=watermark_sql,
        idle_micros=_int_option(options, IDLE_MICROS),
        bounded=role == "source" and connector.is_bounded(config),
    )


def check_table_input(node: exp.Create, table: Table, text: SourceText, fallback: int,
                      variables: Mapping[str, str], connect: bool = True) -> None:
    """Ask a source's connector whether its input is there (a ``single_file``
    source's file), so a missing input is a located error before anything
    starts rather than a failure after Spark did."""
    try:
        CONNECTORS[table.config.connector].check_input(table.config, connect)
    except ConnectorError as error:
        properties = node.args["properties"]
        _, option_nodes = _options(properties, text, fallback, variables)
        raise _located(error, table.name, node, option_nodes, text, fallback) from error


def _located(error: ConnectorError, name: str, node: exp.Create,
             option_nodes: Mapping[str, exp.Expr], text: SourceText,
             fallback: int) -> PlanningError:
    """A connector's error about table ``name``, at the option it names."""
    where = option_nodes.get(error.option or "")
    offset = text.offset_of(where or node, fallback)
    if where is not None and error.at_key:
        offset = text.option_key_before(offset, offset)
    return text.error_at(f"table {name}: {error}", offset)


def _connector(name: str, connector_name: str | None, temporary: bool,
               options: Mapping[str, str], option_nodes: Mapping[str, exp.Expr],
               text: SourceText, properties: exp.Expr, fallback: int) -> Connector:
    """The table's connector, once its name and format are ones Spate implements."""
    if connector_name is None:
        if "connection" in options:  # a connection saved by name in Arroyo's console
            value_at = text.offset_of(option_nodes["connection"], fallback)
            raise text.error_at(f"option 'connection' (a saved connection, by name) is not "
                                f"supported yet: give table {name} WITH (connector = ..., ...) "
                                "and its options", text.option_key_before(value_at, value_at))
        what = (f"lookup table {name} needs WITH (connector = {_lookup_connectors()}, ...)"
                if temporary else f"table {name} needs a 'connector' option")
        raise text.error(what, properties, fallback)
    connector = CONNECTORS.get(connector_name)
    declarable = connector is None or connector.declarable  # not the engine's preview sink
    connector = connector if declarable else None
    known = ", ".join(sorted(name for name, c in CONNECTORS.items() if c.declarable))
    if connector is None:
        if connector_name.lower() in NOT_YET_CONNECTORS:
            message = (f"connector '{connector_name}' is not supported yet; Spate's "
                       f"connectors: {known}")
        elif not declarable:
            message = (f"unknown connector '{connector_name}' (the engine attaches it to a "
                       f"bare SELECT; it cannot be declared); known connectors: {known}")
        else:
            message = f"unknown connector '{connector_name}'; known connectors: {known}"
        raise text.error(message, option_nodes.get("connector"), fallback)
    chosen_format = (options.get(FORMAT_OPTION.name) or "").strip().lower()
    # the filesystem connector writes and reads whole parquet files, not records
    if chosen_format in NOT_YET_FORMATS and connector.name != "filesystem":
        raise text.error(f"format '{chosen_format}' is not supported yet; Spate reads and "
                         "writes 'json', 'debezium_json', 'avro', 'protobuf', 'raw_string' and "
                         "'raw_bytes'",
                         option_nodes.get(FORMAT_OPTION.name), fallback)
    return connector


def _lookup_connectors() -> str:
    names = sorted(n for n, c in CONNECTORS.items() if isinstance(c, LookupConnector))
    return " or ".join(f"'{n}'" for n in names)


def _check_lookup_declaration(name: str, connector: Connector, temporary: bool,
                              options: dict[str, str], option_nodes: dict[str, exp.Expr],
                              text: SourceText, node: exp.Create, fallback: int) -> None:
    """Lookup tables are exactly the TEMPORARY tables, served by a lookup connector."""
    is_lookup_connector = isinstance(connector, LookupConnector)
    declared = options.get(TYPE_OPTION.name, "").strip().lower()
    if (temporary or declared == LOOKUP) and not is_lookup_connector:
        raise text.error(
            f"connector '{connector.name}' cannot serve lookup table {name}: lookup tables "
            f"use connector {_lookup_connectors()}", option_nodes.get("connector"), fallback)
    # A lookup connector may serve streams too (redis): then `type` says which.
    streams = sorted(connector.roles & {"source", "sink"})
    if not temporary and declared in ("source", "sink") and is_lookup_connector \
            and declared not in streams:
        raise text.error(
            f"a {connector.name} {declared} is not supported yet: connector "
            f"'{connector.name}' serves lookup tables, declared with CREATE TEMPORARY TABLE "
            f"{name} (...)", option_nodes.get(TYPE_OPTION.name), fallback)
    if not temporary and (declared == LOOKUP or (is_lookup_connector
                                                 and declared not in streams)):
        types = " or ".join(f"'{role}'" for role in reversed(streams))
        also = f", or with type = {types}" if streams else ""
        raise text.error(
            f"connector '{connector.name}' serves lookup tables, which are declared with "
            f"CREATE TEMPORARY TABLE {name} (...){also}", node, fallback)


def _is_debezium(options: Mapping[str, str]) -> bool:
    return (options.get(FORMAT_OPTION.name) or "").strip().lower() == DEBEZIUM_JSON


def _check_lookup_columns(name: str, generated: dict[str, exp.Expr],
                          watermark: exp.WatermarkColumnConstraint | None, text: SourceText,
                          fallback: int) -> None:
    """A lookup table is fetched by key: it has no virtual columns and no event time."""
    if watermark is not None:
        raise text.error(f"lookup table {name} cannot have a WATERMARK: it is not a stream",
                         watermark, fallback)
    if generated:
        expression = next(iter(generated.values())).this  # inside the CAST to its type
        raise text.error(f"lookup table {name} cannot have generated columns", expression,
                         fallback)


def _check_sink_columns(name: str, generated: dict[str, exp.Expr],
                        watermark: exp.WatermarkColumnConstraint | None, text: SourceText,
                        fallback: int) -> None:
    """A sink writes the rows its INSERT INTO gives: nothing computes columns or event
    time on the way out."""
    if watermark is not None:
        column_at = text.offset_of(watermark, fallback)
        raise text.error_at(f"table {name}: a sink cannot have a WATERMARK (event time and "
                            "watermarks belong to sources): remove it",
                            text.keyword_before(column_at, ("WATERMARK", "FOR"), column_at))
    if generated:
        expression = next(iter(generated.values())).this  # inside the CAST to its type
        raise text.error(f"table {name}: a sink cannot have generated columns: compute the "
                         "value in the query that inserts into it", expression, fallback)


def _check_generated_references(name: str, generated: dict[str, exp.Expr],
                                physical: Sequence[ColumnDef], text: SourceText,
                                fallback: int) -> None:
    """A generated column is computed from the row as read: every column it names
    must be one of the table's physical columns."""
    known = [c.name for c in physical]
    for expression in generated.values():
        bound = {str(p.name).lower() for lam in expression.find_all(exp.Lambda)
                 for p in lam.expressions}
        for column in expression.find_all(exp.Column):
            parts = [str(part.name).lower() for part in column.parts]
            if not parts or parts[0] in known or parts[0] in bound:
                continue
            if len(parts) > 1 and parts[0] == name and parts[1] in known:
                column.set("table", None)  # the row is read unnamed: table.column is column
                continue
            if parts[0] in generated:
                problem = (f"generated column '{parts[0]}' cannot be used by another one: "
                           "generated columns are computed from the physical columns")
            else:
                close = difflib.get_close_matches(parts[0], known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                problem = f"unknown column '{parts[0]}' in a generated column{hint}"
            raise text.error(f"table {name}: {problem}; its columns: {', '.join(known)}",
                             column, fallback)


def _role(connector: Connector, options: dict[str, str]) -> str:
    declared = options.get(TYPE_OPTION.name)
    if declared in ("source", "sink"):
        return declared
    roles = connector.roles
    if len(roles) == 1:
        return next(iter(roles))
    # single_file without a type: the connector's validate() names the problem.
    return declared or "source"


def _options(
    properties: exp.Properties, text: SourceText, fallback: int, variables: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, exp.Expr]]:
    options: dict[str, str] = {}
    nodes: dict[str, exp.Expr] = {}
    for prop in properties.expressions:
        if isinstance(prop, exp.TemporaryProperty):  # CREATE TEMPORARY TABLE, not an option
            continue
        if isinstance(prop, exp.Property) and type(prop) is exp.Property:
            key_node, value_node = prop.this, prop.args.get("value")
            key = key_node.name if isinstance(key_node, exp.Expr) else str(key_node)
        else:
            key = exp.Properties.PROPERTY_TO_NAME.get(type(prop), type(prop).__name__)
            value_node = prop.this
        key = key.lower()
        if key in options:
            raise text.error(f"option '{key}' is given twice", prop, fallback)
        options[key] = _substitute(_option_value(value_node), variables, prop, text, fallback)
        nodes[key] = prop
    return options, nodes


def _option_value(node: exp.Expr | None) -> str:
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Literal | exp.Var | exp.Identifier):
        return str(node.this)
    if isinstance(node, exp.Column):
        return node.name
    return node.sql() if node is not None else ""


def _substitute(value: str, variables: Mapping[str, str], node: exp.Expr, text: SourceText,
                fallback: int) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            # ``spate run`` fills references from its environment; a job from its spec.
            kind = "environment variable" if variables is os.environ else "variable"
            raise text.error(f"{kind} {name} used in an option is not set", node, fallback)
        return variables[name]

    return _ENV_REF.sub(replace, value)


def _columns(
    schema: exp.Expr, text: SourceText, fallback: int
) -> tuple[list[ColumnDef], dict[str, exp.Expr], exp.WatermarkColumnConstraint | None,
           dict[str, exp.Expr], dict[str, exp.Literal]]:
    """Physical columns, generated columns, the WATERMARK, the PRIMARY KEY columns
    (name -> its constraint node, for locating errors) and the metadata columns
    (name -> the key literal of ``METADATA FROM 'key'``)."""
    columns: list[ColumnDef] = []
    generated: dict[str, exp.Expr] = {}
    primary_key: dict[str, exp.Expr] = {}
    metadata: dict[str, exp.Literal] = {}
    watermark = None
    if not isinstance(schema, exp.Schema):
        return columns, generated, None, primary_key, metadata
    for item in schema.expressions:
        if isinstance(item, exp.WatermarkColumnConstraint):
            if watermark is not None:
                raise text.error("a table has at most one WATERMARK", item, fallback)
            watermark = item
            continue
        if not isinstance(item, exp.ColumnDef):
            raise text.error(f"unsupported table element {item.sql()}", item, fallback)
        _check_constraints(item, text, fallback)
        identifier = item.this
        if isinstance(identifier, exp.Identifier) and identifier.quoted \
                and identifier.name != identifier.name.lower():
            raise text.error(f"case-sensitive column names (\"{identifier.name}\") are not "
                             "supported yet: Spate folds names to lower case, so the column "
                             "would not match its field", identifier, fallback)
        kind = item.args.get("kind")
        if not isinstance(kind, exp.DataType):
            raise text.error(f"column '{item.name}' needs a type", item, fallback)
        try:
            column_type = spark_type(kind)
        except UnsupportedTypeError as error:
            raise _type_error(error, item, text, fallback) from error
        computed = generated_expression(item)
        name = item.name.lower()
        key_literal = _metadata_key(item, computed)
        if key_literal is not None:  # a connector field, not an expression
            metadata[name] = key_literal
            computed = None
        key = next((c for c in item.constraints
                    if isinstance(c.kind, exp.PrimaryKeyColumnConstraint)), None)
        if key is not None:
            if computed is not None:
                raise text.error("a generated column cannot be part of the PRIMARY KEY", key,
                                 fallback)
            primary_key[name] = item
        if computed is not None:
            generated[name] = exp.Cast(this=computed, to=kind)
            continue
        not_null = any(isinstance(c.kind, exp.NotNullColumnConstraint) for c in item.constraints)
        columns.append(ColumnDef(name, column_type, nullable=not not_null))
    return columns, generated, watermark, primary_key, metadata


def _metadata_key(item: exp.ColumnDef, computed: exp.Expr | None) -> exp.Literal | None:
    """The key of ``METADATA FROM 'key'``, or of its legacy form
    ``GENERATED ALWAYS AS (metadata('key'))``."""
    for constraint in item.constraints:
        if isinstance(constraint.kind, MetadataColumnConstraint):
            literal = constraint.kind.this
            return literal if isinstance(literal, exp.Literal) else None
    if isinstance(computed, exp.Anonymous) and computed.name.lower() == "metadata" \
            and len(computed.expressions) == 1 and isinstance(computed.expressions[0],
                                                              exp.Literal):
        literal = computed.expressions[0]
        return literal if literal.is_string else None
    return None


def _check_metadata(metadata: dict[str, exp.Literal], connector: Connector, role: str,
                    columns: Sequence[ColumnDef], primary_key: dict[str, exp.Expr],
                    options: Mapping[str, str], text: SourceText,
                    fallback: int) -> dict[str, str]:
    """Metadata columns, as column -> key: each key one the connector exposes to tables of
    ``role`` (:meth:`Connector.metadata_fields`), declared with a type it can fill.  A redis
    lookup table's key is its one PRIMARY KEY column (the lookup fills it with the key it
    fetched)."""
    if role == LOOKUP and connector.name == "redis":
        _check_lookup_metadata(metadata, primary_key, options, text, fallback)
        return {}
    fields = connector.metadata_fields(role)
    types = {c.name: c.spark_type for c in columns}
    chosen: dict[str, str] = {}
    for column, literal in metadata.items():
        key = str(literal.name)
        if not fields:
            raise text.error(f"METADATA FROM '{key}' is not supported: connector "
                             f"'{connector.name}' exposes no metadata to a {role}", literal,
                             fallback)
        allowed = fields.get(key)
        if allowed is None:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise text.error(f"unknown metadata '{key}'{hint}; a {connector.name} {role} "
                             f"exposes {_metadata_keys(fields)}", literal, fallback)
        declared = types[column]
        if declared not in allowed:
            wanted = " or ".join(_sql_type(t) for t in allowed)
            raise text.error(f"column '{column}' is {_sql_type(declared)}, but metadata "
                             f"'{key}' of a {connector.name} {role} is {wanted}: declare "
                             f"{column} {_sql_type(allowed[0])} METADATA FROM '{key}'",
                             literal, fallback)
        if column in primary_key:
            raise text.error(f"metadata column '{column}' cannot be part of the PRIMARY KEY",
                             literal, fallback)
        chosen[column] = key
    return chosen


def _metadata_keys(fields: Mapping[str, tuple[T.DataType, ...]]) -> str:
    return ", ".join(f"'{key}' ({' or '.join(_sql_type(t) for t in types)})"
                     for key, types in fields.items())


def _sql_type(data_type: T.DataType) -> str:
    """A Spark type as the dialect spells it."""
    names: dict[T.DataType, str] = {
        T.LongType(): "BIGINT", T.IntegerType(): "INT", T.StringType(): "TEXT",
        T.BinaryType(): "BYTEA", T.TimestampType(): "TIMESTAMP"}
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{_sql_type(data_type.elementType)}>"
    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{f.name} {_sql_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{fields}>"
    named = names.get(data_type)
    return named if named is not None else data_type.simpleString().upper()


def _check_lookup_metadata(metadata: dict[str, exp.Literal], primary_key: dict[str, exp.Expr],
                           options: Mapping[str, str], text: SourceText,
                           fallback: int) -> None:
    for column, literal in metadata.items():
        key = str(literal.name)
        if key != "key":
            raise text.error(f"unknown metadata '{key}' for a redis lookup table; it has "
                             "only METADATA FROM 'key'", literal, fallback)
        if list(primary_key) != [column] or options.get("key.prefix"):
            raise text.error(f"METADATA FROM 'key' must be the table's only PRIMARY KEY "
                             f"column ({column} TEXT METADATA FROM 'key' PRIMARY KEY), "
                             "without a 'key.prefix' option", literal, fallback)


def _check_primary_key(primary_key: dict[str, exp.Expr], role: str, options: dict[str, str],
                       text: SourceText, fallback: int) -> None:
    """PRIMARY KEY keys debezium_json sources, lookup tables and sinks (as in Arroyo, a
    sink keeps it as its rows' key: connectors with a message key use it); on any other
    source it would mean nothing."""
    if not primary_key or role in (LOOKUP, "sink") or (
            role == "source" and _is_debezium(options)):
        return
    raise text.error("PRIMARY KEY is only meaningful for debezium_json sources, sinks and "
                     "lookup tables", next(iter(primary_key.values())), fallback)


def generated_expression(item: exp.ColumnDef) -> exp.Expr | None:
    """The expression of ``GENERATED ALWAYS AS (expr) [STORED]`` (sqlglot reads the form
    without STORED as an identity column carrying the expression)."""
    for constraint in item.constraints:
        kind = constraint.kind
        expression = kind.this if isinstance(kind, exp.ComputedColumnConstraint) else \
            kind.args.get("expression") if isinstance(
                kind, exp.GeneratedAsIdentityColumnConstraint) else None
        if isinstance(expression, exp.Expr):
            return expression
    return None


def _check_constraints(item: exp.ColumnDef, text: SourceText, fallback: int) -> None:
    allowed = (exp.NotNullColumnConstraint, exp.ComputedColumnConstraint,
               exp.PrimaryKeyColumnConstraint, MetadataColumnConstraint)
    for constraint in item.constraints:
        generated = isinstance(constraint.kind, exp.GeneratedAsIdentityColumnConstraint) and \
            constraint.kind.args.get("expression") is not None
        if not isinstance(constraint.kind, allowed) and not generated:
            raise text.error(f"unsupported column option {constraint.sql()}", constraint, fallback)


def _event_time(
    name: str,
    options: dict[str, str],
    types: Mapping[str, T.DataType],
    watermark: exp.WatermarkColumnConstraint | None,
    text: SourceText,
    fallback: int,
    option_nodes: dict[str, exp.Expr],
) -> tuple[str | None, str | None]:
    """Spark SQL for the event time and the per-row watermark of a source, from
    ``WATERMARK FOR`` or else the ``event_time_field`` / ``watermark_field`` options
    (``types``: every column's type, generated ones included)."""
    if watermark is not None:
        column = watermark.this.name.lower()
        for option in (EVENT_TIME_FIELD.name, WATERMARK_FIELD.name):
            if option in options:
                raise text.error_at(
                    f"table {name}: option '{option}' conflicts with WATERMARK FOR {column}, "
                    "which sets both event time and watermark: remove the option",
                    _option_key_at(option_nodes[option], text, fallback))
        _check_timestamp_column("WATERMARK FOR", column, types, watermark, text, fallback)
        column_sql = f"`{column}`"
        expression = watermark.args.get("expression")
        if not isinstance(expression, exp.Expr):  # WATERMARK FOR col (no AS)
            return column_sql, column_sql
        return column_sql, expression.sql(dialect="spark")
    event_time = _field_option(EVENT_TIME_FIELD.name, options, types, text, fallback,
                               option_nodes)
    mark = _field_option(WATERMARK_FIELD.name, options, types, text, fallback, option_nodes)
    if mark is not None:
        return event_time, mark
    base = event_time or "`_spate_timestamp`"
    return event_time, f"{base} - {DEFAULT_WATERMARK_DELAY_SQL}"


def watermark_delay_us(event_time_sql: str, watermark_sql: str) -> int | None:
    """How far a source's watermark trails its event time, in microseconds, when the
    watermark is the event time itself or the event time less an interval of whole
    units (``ts - INTERVAL '5' SECOND``, and the default); None for any other
    watermark expression."""
    try:
        mark = sqlglot.parse_one(watermark_sql, read="spark")
        event_time = sqlglot.parse_one(event_time_sql, read="spark")
    except sqlglot.errors.ParseError:
        return None
    if _same_column(mark, event_time):
        return 0
    if not (isinstance(mark, exp.Sub) and _same_column(mark.this, event_time)
            and isinstance(mark.expression, exp.Interval)):
        return None
    amount = mark.expression.this
    if not (isinstance(amount, exp.Literal) and amount.name.isdigit()):  # whole units: exact
        return None
    try:
        return interval_micros(mark.expression)
    except IntervalError:  # months or years, or no positive length
        return None


def _same_column(one: exp.Expr, other: exp.Expr) -> bool:
    """Whether both are the same unqualified column (Spark's names ignore case)."""
    return (isinstance(one, exp.Column) and isinstance(other, exp.Column)
            and not one.table and not other.table and one.name.lower() == other.name.lower())


def _field_option(option: str, options: Mapping[str, str], types: Mapping[str, T.DataType],
                  text: SourceText, fallback: int,
                  option_nodes: Mapping[str, exp.Expr]) -> str | None:
    """The column an ``event_time_field`` or ``watermark_field`` option names, quoted."""
    field_name = options.get(option)
    if field_name is None:
        return None
    prop = option_nodes[option]
    value = prop.args.get("value")
    where = value if isinstance(value, exp.Expr) else prop
    _check_timestamp_column(option, field_name.lower(), types, where, text, fallback)
    return f"`{field_name.lower()}`"


def _check_timestamp_column(what: str, column: str, types: Mapping[str, T.DataType],
                            node: exp.Expr, text: SourceText, fallback: int) -> None:
    """Event time and watermarks are TIMESTAMPs: ``column`` must be one."""
    if column not in types:
        close = difflib.get_close_matches(column, list(types), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise text.error(f"{what} names unknown column '{column}'{hint}", node, fallback)
    if not isinstance(types[column], T.TimestampType):
        raise text.error(f"{what} column '{column}' must be a TIMESTAMP (it is "
                         f"{types[column].simpleString()}): use a generated TIMESTAMP column "
                         "computed from it", node, fallback)


def _option_key_at(prop: exp.Expr, text: SourceText, fallback: int) -> int:
    """Offset of the key of option ``prop`` (sqlglot positions only its value, or a
    quoted or dotted key)."""
    value = prop.args.get("value")
    value_at = text.offset_of(value if isinstance(value, exp.Expr) else prop, fallback)
    return text.option_key_before(value_at, text.offset_of(prop, fallback))


def _type_error(error: UnsupportedTypeError, item: exp.ColumnDef, text: SourceText,
                fallback: int) -> PlanningError:
    """An unsupported column type, at the type: sqlglot positions no type node, but the
    type is the token after the column's name."""
    name_at = text.offset_of(item.this, fallback)
    type_at = next((t.start for t in text.tokens if t.start > name_at), name_at)
    return text.error_at(str(error), type_at)


def _int_option(options: dict[str, str], spec: OptionSpec) -> int:
    """An integer option the connector has validated, or its declared default."""
    value = options.get(spec.name)
    return int(spec.default) if value is None else int(value)
