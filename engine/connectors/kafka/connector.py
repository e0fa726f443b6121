"""``kafka`` (docs/sql/connectors.md): a Kafka topic as a source or a sink.

Options follow Arroyo's. The source (:mod:`.source`) reads assigned
partitions with offsets kept by Spate, exactly once; the sink
(:mod:`.sink`) writes each epoch in one Kafka transaction, exactly once,
or without one, at least once. Clients reach the cluster through the tenant's
egress policy (:mod:`.client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_sink_schema,
    message_columns,
    parse_format,
    single_value_columns,
    source_schema,
)
from spate.engine.connectors.kafka.client import (
    ARROYO_GROUP_ID,
    AUTH_CONFIGS,
    AUTH_TYPE,
    BOOTSTRAP_SERVERS,
    CLIENT_CONFIGS,
    GROUP_ID,
    READ_MODE,
    SASL_MECHANISM,
    SASL_PASSWORD,
    SASL_USERNAME,
    TOPIC,
    KafkaEndpoint,
    client_config,
    cluster_metadata,
    parse_client_configs,
    parse_servers,
    topic_partitions,
)
from spate.engine.connectors.kafka.sink import KafkaSink
from spate.engine.connectors.kafka.source import PASSWORD_OPTION, SOURCE_NAME, KafkaStreamReader

EARLIEST, LATEST, GROUP = "earliest", "latest", "group"
READ_COMMITTED = "read_committed"
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly_once", "at_least_once"
#: Arroyo's Kafka options Spate does not implement yet.
_NOT_YET = ("source.group_id_prefix", "sink.timestamp_field",
            "auth.sasl.protocol", "topic_pattern", "source.topic_pattern")

# The options the clients are configured from are declared in kafka_client.
START_FROM = core.option("source.offset", core.SOURCES, "where a new pipeline starts: `earliest`, "
                         "`latest`, or `group` (the committed offsets of `group_id`; a partition "
                         "without one from its beginning)", choices=(EARLIEST, LATEST, GROUP),
                         default=LATEST)
MAX_RECORDS_PER_BATCH = core.option("max_records_per_batch", core.SOURCES, "offsets read per epoch "
                                    "over all partitions, so a backlog is read in several epochs",
                                    default=100_000)
COMMIT_MODE = core.option("sink.commit_mode", core.SINKS, "`exactly_once` (Kafka transactions "
                          "per epoch, one per writer) or `at_least_once`",
                          choices=(EXACTLY_ONCE, AT_LEAST_ONCE), default=EXACTLY_ONCE)
KEY_FIELD = core.option("key_field", core.SINKS, "the column whose value (as text) is each "
                        "record's key; without it records have no key")
#: Arroyo's name of ``key_field``.
ARROYO_KEY_FIELD = core.option("sink.key_field", core.SINKS, "`key_field` by Arroyo's name (give "
                               "one of the two)")


@dataclass(frozen=True)
class KafkaTable:
    """A kafka table's checked options."""

    role: str
    topic: str
    endpoint: KafkaEndpoint
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    group_id: str | None
    start_from: str
    read_mode: str
    commit_mode: str
    key_field: str | None
    max_records_per_batch: int


def read_endpoint(options: core.OptionReader, confined: bool) -> KafkaEndpoint:
    """``bootstrap_servers``, ``auth.*`` and ``client_configs``."""
    servers = parse_servers(options.required(BOOTSTRAP_SERVERS))
    extra = parse_client_configs(options.string(CLIENT_CONFIGS) or "", confined)
    auth_type = options.choice(AUTH_TYPE)
    if auth_type == "aws_msk_iam":
        raise core.ConnectorError(f"option '{AUTH_TYPE.name}' = 'aws_msk_iam' is not supported "
                                  f"yet; use 'none' or 'sasl'", option=AUTH_TYPE.name)
    auth: dict[str, str] = {}
    if auth_type == "sasl":
        clash = sorted((AUTH_CONFIGS - {"security.protocol"}) & set(extra))
        protocol = extra.pop("security.protocol", "SASL_PLAINTEXT").upper()
        if clash or protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            raise core.ConnectorError(f"option '{CLIENT_CONFIGS.name}' sets what {AUTH_TYPE.name} "
                                      f"= 'sasl' sets (only security.protocol = SASL_SSL may be "
                                      f"added, for TLS); keep one", option=CLIENT_CONFIGS.name)
        mechanism = options.choice(SASL_MECHANISM)
        auth = {"security.protocol": protocol,
                "sasl.mechanism": str(mechanism).upper(),
                "sasl.username": options.required(SASL_USERNAME),
                "sasl.password": options.required(SASL_PASSWORD)}
    else:
        for key in (SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD):
            if key in options:
                raise core.ConnectorError(f"option '{key.name}' needs {AUTH_TYPE.name} = 'sasl'",
                                          option=key.name)
    return KafkaEndpoint(servers, auth, extra)


def _alias(options: core.OptionReader, spec: core.OptionSpec,
           arroyo_spec: core.OptionSpec) -> str | None:
    """An option Spate declares as ``spec`` and Arroyo names ``arroyo_spec``: either, not
    both."""
    if spec in options and arroyo_spec in options:
        raise core.ConnectorError(f"options '{spec.name}' and '{arroyo_spec.name}' are the same; "
                                  "keep one", option=arroyo_spec.name, at_key=True)
    return options.string(spec) or options.string(arroyo_spec)


def parse_table(table: core.TableConfig) -> KafkaTable:
    """Check every option of a kafka table; raises :class:`ConnectorError` naming it."""
    options = core.OptionReader(table)
    role = core.check_role(options, frozenset({core.SOURCE, core.SINK}))
    for key in _NOT_YET:
        options.reject(key, "is not supported yet by the kafka connector; remove it")
    topic = options.required(TOPIC).strip()
    if topic.startswith("^"):
        raise core.ConnectorError(f"option '{TOPIC.name}' is a pattern; topic patterns are not "
                                  "supported yet: name one topic", option=TOPIC.name)
    endpoint = read_endpoint(options, table.boundary.egress is not None)
    spec = parse_format(options, role, records_in=(TOPIC,))
    group_id = _alias(options, GROUP_ID, ARROYO_GROUP_ID)
    if role == core.SOURCE:
        settings = _source_settings(options, group_id)
    else:
        settings = _sink_settings(options)
    options.finish()
    columns = message_columns(table, spec, role)
    if table.boundary.egress is not None:
        for host, port in endpoint.servers:
            table.boundary.egress.check_literal(host, port, option=BOOTSTRAP_SERVERS.name)
    return KafkaTable(role=role, topic=topic, endpoint=endpoint, spec=spec, columns=columns,
                      group_id=group_id, **settings)


def _source_settings(options: core.OptionReader, group_id: str | None) -> dict[str, Any]:
    core.check_source_options(options)
    for key in (COMMIT_MODE, KEY_FIELD, ARROYO_KEY_FIELD):
        options.reject(key, "applies to sinks only")
    start_from = options.choice(START_FROM)
    if start_from == GROUP and not group_id:
        raise core.ConnectorError(f"{START_FROM.name} = 'group' starts from the committed offsets "
                                  f"of a consumer group: set {GROUP_ID.name}",
                                  option=START_FROM.name)
    return {"start_from": start_from,
            "read_mode": options.choice(READ_MODE),
            "max_records_per_batch": options.integer(MAX_RECORDS_PER_BATCH, minimum=1),
            "commit_mode": EXACTLY_ONCE, "key_field": None}


def _sink_settings(options: core.OptionReader) -> dict[str, Any]:
    core.reject_source_options(options)
    for key in (START_FROM, READ_MODE, MAX_RECORDS_PER_BATCH, GROUP_ID, ARROYO_GROUP_ID):
        options.reject(key, "applies to sources only")
    return {"commit_mode": options.choice(COMMIT_MODE),
            "key_field": _alias(options, KEY_FIELD, ARROYO_KEY_FIELD),
            "start_from": START_FROM.default, "read_mode": READ_MODE.default,
            "max_records_per_batch": MAX_RECORDS_PER_BATCH.default}


@core.register
class KafkaConnector(core.Connector):
    """A Kafka topic: source (assigned partitions, offsets in Spate) or sink (transactions)."""

    name = "kafka"
    roles = frozenset({core.SOURCE, core.SINK})
    options = (*core.TYPE, BOOTSTRAP_SERVERS, TOPIC, *core.FORMAT, START_FROM, READ_MODE, GROUP_ID,
               ARROYO_GROUP_ID, MAX_RECORDS_PER_BATCH, COMMIT_MODE, KEY_FIELD, ARROYO_KEY_FIELD,
               AUTH_TYPE, SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD, CLIENT_CONFIGS,
               *core.MESSAGE_RECORDS)
    examples = {
        core.SOURCE: ({"type": "source", "bootstrap_servers": "h:9092", "topic": "t",
                       "format": "json", "json.unstructured": "true"},),
        core.SINK: ({"type": "sink", "bootstrap_servers": "h:9092", "topic": "t",
                     "format": "json"},)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        parsed = parse_table(table)
        if parsed.key_field is not None and parsed.key_field not in {
                c.name for c in parsed.columns} and parsed.columns:
            raise core.ConnectorError(f"{KEY_FIELD.name} '{parsed.key_field}' is not a column of "
                                      f"'{table.name}'", option=KEY_FIELD.name)
        return parsed.columns

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """A record's offset, partition, topic, timestamp, key and headers (sources)."""
        if role != core.SOURCE:
            return {}
        return {"offset_id": (T.LongType(),), "partition": (T.IntegerType(),),
                "topic": (T.StringType(),), "timestamp": (T.TimestampType(),),
                "key": (T.BinaryType(), T.StringType()), "headers": (core.HEADERS,)}

    def batch_limit(self, table: core.TableConfig) -> int | None:
        return parse_table(table).max_records_per_batch if table.role == core.SOURCE else None

    def reach(self, options: Mapping[str, str], role: str | None,
              boundary: core.Boundary) -> str | None:
        table = core.TableConfig(name="test", connector=self.name, role=role or core.SOURCE,
                                 options={**options, core.TYPE_OPTION.name: role or core.SOURCE},
                                 columns=single_value_columns(), boundary=boundary)
        reader = core.OptionReader(table)
        endpoint = read_endpoint(reader, boundary.egress is not None)
        what = f"kafka cluster at {endpoint.shown}"
        config = client_config(endpoint, boundary, "test")
        metadata = cluster_metadata(config, endpoint, boundary, what)
        topic = (options.get(TOPIC.name) or "").strip()
        if not topic:
            return f"reached the Kafka cluster at {endpoint.shown} ({len(metadata.brokers)} " \
                   "brokers)"
        partitions = topic_partitions(metadata, topic, endpoint)
        return f"reached topic '{topic}' ({len(partitions)} partitions) on the Kafka cluster " \
               f"at {endpoint.shown}"

    def partition_count(self, table: core.TableConfig, parallelism: int) -> int:
        """One reader per Kafka partition, at most ``parallelism`` (readers own several)."""
        parsed = parse_table(table)
        what = f"kafka source '{table.name}'"
        config = client_config(parsed.endpoint, table.boundary, "source")
        metadata = cluster_metadata(config, parsed.endpoint, table.boundary, what, parsed.topic)
        return max(1, min(parallelism, len(topic_partitions(metadata, parsed.topic,
                                                            parsed.endpoint))))

    def source_settings(self, table: core.TableConfig,
                        parallelism: int) -> tuple[dict[str, Any], T.StructType]:
        """What the data source reading ``table`` is given: settings and schema."""
        parsed = parse_table(table)
        if parsed.role != core.SOURCE:
            raise core.ConnectorError(f"kafka table '{table.name}' is a sink; it cannot be read",
                                      option=core.TYPE_OPTION.name)
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
            "not_null": table.required_columns(parsed.columns),
            "metadata": dict(table.metadata),
        }
        return settings, source_schema(parsed.spec, parsed.columns)

    def has_input_after(self, table: core.TableConfig, parallelism: int, offset: Any) -> bool:
        """Whether the topic holds records past ``offset``, asked of the cluster."""
        return self.backlog(table, parallelism, offset) > 0

    def backlog(self, table: core.TableConfig, parallelism: int, offset: Any) -> int:
        """The records the topic holds past ``offset``, asked of the cluster."""
        settings, schema = self.source_settings(table, parallelism)
        reader = KafkaStreamReader(settings, schema)
        try:
            return reader.records_after(offset)
        finally:
            reader.stop()

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        settings, schema = self.source_settings(table, parallelism)
        # The SASL password travels in an option of its own, which Spark's redaction
        # (spark.redaction.regex: "password") hides wherever it shows a plan's options.
        password = settings["endpoint"]["auth"].pop("sasl.password", None)
        options = core.source_options(schema, settings)
        if password is not None:
            options[PASSWORD_OPTION] = password
        return core.load_stream(spark, SOURCE_NAME, options, table.primary_key)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = parse_table(table)
        if parsed.role != core.SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        if parsed.key_field is not None:
            if parsed.spec.updating:
                raise core.ConnectorError(f"{KEY_FIELD.name} with format 'debezium_json' is not "
                                          "supported yet", option=KEY_FIELD.name)
            if parsed.key_field not in schema.fieldNames():
                raise core.ConnectorError(f"{KEY_FIELD.name} '{parsed.key_field}' is not a column "
                                          f"of '{table.name}'", option=KEY_FIELD.name)
        return KafkaSink(table.name, parsed.topic, parsed.endpoint, table.boundary, parsed.spec,
                         exactly_once=parsed.commit_mode == EXACTLY_ONCE,
                         key_field=parsed.key_field)
