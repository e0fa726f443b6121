"""``kafka`` (docs/sql/connectors.md): a Kafka topic as a source or a sink.

Options follow Arroyo's. The source (:mod:`.kafka_source`) reads assigned
partitions with offsets kept by Spate, exactly once; the sink
(:mod:`.kafka_sink`) writes each epoch in one Kafka transaction, exactly once,
or without one, at least once. Clients reach the cluster through the tenant's
egress policy (:mod:`.kafka_client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors.base import (
    SINK,
    SOURCE,
    ColumnDef,
    Connector,
    ConnectorError,
    Sink,
    TableConfig,
    register,
)
from spate.engine.connectors.boundary import Boundary
from spate.engine.connectors.formats import (
    FormatSpec,
    check_columns,
    check_sink_schema,
    parse_format,
    single_value_columns,
    source_schema,
    with_row_key,
)
from spate.engine.connectors.kafka_client import (
    AUTH_CONFIGS,
    KafkaEndpoint,
    client_config,
    cluster_metadata,
    parse_client_configs,
    parse_servers,
    topic_partitions,
)
from spate.engine.connectors.kafka_sink import KafkaSink
from spate.engine.connectors.kafka_source import PASSWORD_OPTION, SOURCE_NAME, KafkaStreamReader
from spate.engine.connectors.metadata import (
    BOTH,
    DEAD_LETTER,
    FORMAT,
    FORMAT_BINARY,
    FORMAT_SOURCE,
    SINKS,
    SOURCE_TIME,
    SOURCES,
    TYPE,
    specs,
)
from spate.engine.connectors.metadata_columns import HEADERS
from spate.engine.connectors.options import (
    OptionReader,
    check_role,
    check_source_options,
    reject_source_options,
)
from spate.engine.connectors.streaming import load_stream, source_options

EARLIEST, LATEST, GROUP = "earliest", "latest", "group"
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly_once", "at_least_once"
DEFAULT_MAX_RECORDS_PER_BATCH = 100_000
#: Arroyo's Kafka options Spate does not implement yet.
_NOT_YET = ("source.group_id_prefix", "sink.timestamp_field",
            "auth.sasl.protocol", "topic_pattern", "source.topic_pattern")
_SASL_MECHANISMS = ("plain", "scram-sha-256", "scram-sha-512")


@dataclass(frozen=True)
class KafkaTable:
    """A kafka table's checked options."""

    role: str
    topic: str
    endpoint: KafkaEndpoint
    spec: FormatSpec
    columns: tuple[ColumnDef, ...]
    group_id: str | None
    start_from: str
    read_mode: str
    commit_mode: str
    key_field: str | None
    max_records_per_batch: int


def read_endpoint(options: OptionReader, confined: bool) -> KafkaEndpoint:
    """``bootstrap_servers``, ``auth.*`` and ``client_configs``."""
    servers = parse_servers(options.required("bootstrap_servers"))
    extra = parse_client_configs(options.string("client_configs", "") or "", confined)
    auth_type = options.choice("auth.type", ("none", "sasl", "aws_msk_iam"), "none")
    if auth_type == "aws_msk_iam":
        raise ConnectorError("option 'auth.type' = 'aws_msk_iam' is not supported yet; use "
                             "'none' or 'sasl'", option="auth.type")
    auth: dict[str, str] = {}
    if auth_type == "sasl":
        clash = sorted((AUTH_CONFIGS - {"security.protocol"}) & set(extra))
        protocol = extra.pop("security.protocol", "SASL_PLAINTEXT").upper()
        if clash or protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            raise ConnectorError("option 'client_configs' sets what auth.type = 'sasl' sets "
                                 "(only security.protocol = SASL_SSL may be added, for TLS); "
                                 "keep one", option="client_configs")
        mechanism = options.choice("auth.sasl.mechanism", _SASL_MECHANISMS, "plain")
        auth = {"security.protocol": protocol,
                "sasl.mechanism": (mechanism or "plain").upper(),
                "sasl.username": options.required("auth.sasl.username"),
                "sasl.password": options.required("auth.sasl.password")}
    else:
        for key in ("auth.sasl.mechanism", "auth.sasl.username", "auth.sasl.password"):
            if options.string(key) is not None:
                raise ConnectorError(f"option '{key}' needs auth.type = 'sasl'", option=key)
    return KafkaEndpoint(servers, auth, extra)


def _alias(options: OptionReader, name: str, arroyo_name: str) -> str | None:
    """An option Spate names ``name`` and Arroyo ``arroyo_name``: either, not both."""
    if name in options and arroyo_name in options:
        raise ConnectorError(f"options '{name}' and '{arroyo_name}' are the same; keep one",
                             option=arroyo_name, at_key=True)
    return options.string(name) or options.string(arroyo_name)


def parse_table(table: TableConfig) -> KafkaTable:
    """Check every option of a kafka table; raises :class:`ConnectorError` naming it."""
    options = OptionReader(table)
    role = check_role(options, frozenset({SOURCE, SINK}))
    for key in _NOT_YET:
        options.reject(key, "is not supported yet by the kafka connector; remove it")
    topic = options.required("topic").strip()
    if topic.startswith("^"):
        raise ConnectorError("option 'topic' is a pattern; topic patterns are not supported "
                             "yet: name one topic", option="topic")
    endpoint = read_endpoint(options, table.boundary.egress is not None)
    spec = parse_format(options, role)
    group_id = _alias(options, "group_id", "source.group_id")
    if role == SOURCE:
        settings = _source_settings(options, group_id)
    else:
        settings = _sink_settings(options)
    options.finish()
    columns = table.data_columns
    if not columns and role == SOURCE and spec.single_value:
        columns = single_value_columns(spec)
    check_columns(spec, columns, role)
    if table.metadata:  # declaration order; the default `value` first
        columns = table.columns if table.data_columns else columns + table.columns
    if table.boundary.egress is not None:
        for host, port in endpoint.servers:
            table.boundary.egress.check_literal(host, port, option="bootstrap_servers")
    return KafkaTable(role=role, topic=topic, endpoint=endpoint, spec=spec, columns=columns,
                      group_id=group_id, **settings)


def _source_settings(options: OptionReader, group_id: str | None) -> dict[str, Any]:
    check_source_options(options)
    for key in ("sink.commit_mode", "key_field", "sink.key_field"):
        options.reject(key, "applies to sinks only")
    start_from = options.choice("source.offset", (EARLIEST, LATEST, GROUP), LATEST) or LATEST
    if start_from == GROUP and not group_id:
        raise ConnectorError("source.offset = 'group' starts from the committed offsets of a "
                             "consumer group: set group_id", option="source.offset")
    return {"start_from": start_from,
            "read_mode": options.choice("source.read_mode", (READ_COMMITTED, READ_UNCOMMITTED),
                                        READ_COMMITTED) or READ_COMMITTED,
            "max_records_per_batch": options.integer(
                "max_records_per_batch", DEFAULT_MAX_RECORDS_PER_BATCH, minimum=1),
            "commit_mode": EXACTLY_ONCE, "key_field": None}


def _sink_settings(options: OptionReader) -> dict[str, Any]:
    reject_source_options(options)
    for key in ("source.offset", "source.read_mode", "max_records_per_batch", "group_id",
                "source.group_id"):
        options.reject(key, "applies to sources only")
    return {"commit_mode": options.choice("sink.commit_mode", (EXACTLY_ONCE, AT_LEAST_ONCE),
                                          EXACTLY_ONCE) or EXACTLY_ONCE,
            "key_field": _alias(options, "key_field", "sink.key_field"),
            "start_from": LATEST, "read_mode": READ_COMMITTED,
            "max_records_per_batch": DEFAULT_MAX_RECORDS_PER_BATCH}


@register
class KafkaConnector(Connector):
    """A Kafka topic: source (assigned partitions, offsets in Spate) or sink (transactions)."""

    name = "kafka"
    roles = frozenset({SOURCE, SINK})
    options = (*TYPE, *specs(BOTH, "bootstrap_servers", "topic", "client_configs", "auth.type",
                             "auth.sasl.mechanism", "auth.sasl.username", "auth.sasl.password"),
               *FORMAT, *FORMAT_SOURCE, *FORMAT_BINARY, *DEAD_LETTER, *SOURCE_TIME,
               *specs(SOURCES, "source.offset", "source.read_mode", "group_id",
                      "source.group_id", "max_records_per_batch"),
               *specs(SINKS, "sink.commit_mode", "key_field", "sink.key_field"))

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        parsed = parse_table(table)
        if parsed.key_field is not None and parsed.key_field not in {
                c.name for c in parsed.columns} and parsed.columns:
            raise ConnectorError(f"key_field '{parsed.key_field}' is not a column of "
                                 f"'{table.name}'", option="key_field")
        return parsed.columns

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """A record's offset, partition, topic, timestamp, key and headers (sources)."""
        if role != SOURCE:
            return {}
        return {"offset_id": (T.LongType(),), "partition": (T.IntegerType(),),
                "topic": (T.StringType(),), "timestamp": (T.TimestampType(),),
                "key": (T.BinaryType(), T.StringType()), "headers": (HEADERS,)}

    def batch_limit(self, table: TableConfig) -> int | None:
        return parse_table(table).max_records_per_batch if table.role == SOURCE else None

    def reach(self, options: Mapping[str, str], role: str | None, boundary: Boundary) -> str | None:
        table = TableConfig(name="test", connector=self.name, role=role or SOURCE,
                            options={**options, "type": role or SOURCE},
                            columns=single_value_columns(), boundary=boundary)
        reader = OptionReader(table)
        endpoint = read_endpoint(reader, boundary.egress is not None)
        what = f"kafka cluster at {endpoint.shown}"
        config = client_config(endpoint, boundary, "test")
        metadata = cluster_metadata(config, endpoint, boundary, what)
        topic = (options.get("topic") or "").strip()
        if not topic:
            return f"reached the Kafka cluster at {endpoint.shown} ({len(metadata.brokers)} " \
                   "brokers)"
        partitions = topic_partitions(metadata, topic, endpoint)
        return f"reached topic '{topic}' ({len(partitions)} partitions) on the Kafka cluster " \
               f"at {endpoint.shown}"

    def partition_count(self, table: TableConfig, parallelism: int) -> int:
        """One reader per Kafka partition, at most ``parallelism`` (readers own several)."""
        parsed = parse_table(table)
        what = f"kafka source '{table.name}'"
        config = client_config(parsed.endpoint, table.boundary, "source")
        metadata = cluster_metadata(config, parsed.endpoint, table.boundary, what, parsed.topic)
        return max(1, min(parallelism, len(topic_partitions(metadata, parsed.topic,
                                                            parsed.endpoint))))

    def source_settings(self, table: TableConfig,
                        parallelism: int) -> tuple[dict[str, Any], T.StructType]:
        """What the data source reading ``table`` is given: settings and schema."""
        parsed = parse_table(table)
        if parsed.role != SOURCE:
            raise ConnectorError(f"kafka table '{table.name}' is a sink; it cannot be read",
                                 option="type")
        settings = {
            "table": table.name,
            "topic": parsed.topic,
            "endpoint": parsed.endpoint.to_dict(),
            "boundary": table.boundary.to_dict(),
            "format": parsed.spec.to_dict(),
            "readers": self.partition_count(table, parallelism),
            "start_from": parsed.start_from,
            "read_mode": parsed.read_mode,
            "group_id": parsed.group_id,
            "max_records_per_batch": parsed.max_records_per_batch,
            "not_null": [c.name for c in parsed.columns
                         if (not c.nullable or c.name in table.primary_key)
                         and c.name not in table.metadata],
            "metadata": dict(table.metadata),
        }
        return settings, source_schema(parsed.spec, parsed.columns)

    def has_input_after(self, table: TableConfig, parallelism: int, offset: Any) -> bool:
        """Whether the topic holds records past ``offset``, asked of the cluster."""
        settings, schema = self.source_settings(table, parallelism)
        reader = KafkaStreamReader(settings, schema)
        try:
            return reader.has_records_after(offset)
        finally:
            reader.stop()

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        settings, schema = self.source_settings(table, parallelism)
        # The SASL password travels in an option of its own, which Spark's redaction
        # (spark.redaction.regex: "password") hides wherever it shows a plan's options.
        password = settings["endpoint"]["auth"].pop("sasl.password", None)
        options = source_options(schema, settings)
        if password is not None:
            options[PASSWORD_OPTION] = password
        frame = load_stream(spark, SOURCE_NAME, options)
        return with_row_key(frame, table.primary_key)

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        parsed = parse_table(table)
        if parsed.role != SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        if parsed.key_field is not None:
            if parsed.spec.updating:
                raise ConnectorError("key_field with format 'debezium_json' is not supported "
                                     "yet", option="key_field")
            if parsed.key_field not in schema.fieldNames():
                raise ConnectorError(f"key_field '{parsed.key_field}' is not a column of "
                                     f"'{table.name}'", option="key_field")
        return KafkaSink(table.name, parsed.topic, parsed.endpoint, table.boundary, parsed.spec,
                         exactly_once=parsed.commit_mode == EXACTLY_ONCE,
                         key_field=parsed.key_field)
