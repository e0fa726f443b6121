"""``kinesis`` (docs/sql/connectors.md): an Amazon Kinesis Data Streams source and sink.

The source reads every shard of a stream, shards dealt to the pipeline's
readers, with sequence numbers as offsets: exactly once into Spate, resharding
followed parent before child (:mod:`.source`, :mod:`.shards`).
The sink puts records with PutRecords, at least once (:mod:`.sink`).
Credentials come from the table's options (its connection profile) only,
never from the server's own AWS configuration (:mod:`.client`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.aws import check_endpoint_url, check_keys, check_region
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_sink_schema,
    message_columns,
    parse_format,
    source_schema,
)
from spate.engine.connectors.kinesis.client import (
    AWS_CREDENTIALS,
    AWS_REGION,
    ENDPOINT_URL,
    STREAM_NAME,
    KinesisEndpoint,
    check_planned,
    connect,
    failure,
    regional_endpoint,
)
from spate.engine.connectors.kinesis.shards import has_records_after
from spate.engine.connectors.kinesis.sink import (
    MAX_BYTES_PER_RECORD,
    MAX_BYTES_PER_REQUEST,
    MAX_RECORDS_PER_REQUEST,
    KinesisSink,
    RequestLimits,
)
from spate.engine.connectors.kinesis.source import SECRET_FIELDS, SECRET_OPTION, SOURCE_NAME

EARLIEST = "earliest"
LATEST = "latest"
#: Arroyo's sink option Spate refuses as not supported yet (so not in ``options``).
NOT_YET_SINK_OPTION = "sink.flush_interval_millis"

# The stream, region, endpoint and credentials are declared in kinesis_client.
START_FROM = core.option("source.offset", core.SOURCES, "where a new pipeline starts, `earliest` "
                         "(the oldest records the stream keeps) or `latest` (records arriving from "
                         "the start on)", choices=(EARLIEST, LATEST), default=LATEST)
KEY_FIELD = core.option("key_field", core.SINKS, "the column whose value is each record's "
                                                 "partition key",
                        default_text="a hash of the record")
MAX_RECORDS_PER_BATCH = core.option("sink.max_records_per_batch", core.SINKS, f"records per "
                                    f"PutRecords request (at most {MAX_RECORDS_PER_REQUEST})",
                                    default=MAX_RECORDS_PER_REQUEST)
MAX_BYTES_PER_BATCH = core.option("sink.max_bytes_per_batch", core.SINKS, "bytes (data and keys) "
                                  "per PutRecords request, from 1 MiB to 5 MiB",
                                  default=MAX_BYTES_PER_REQUEST)
SINK_OPTIONS = (KEY_FIELD, MAX_RECORDS_PER_BATCH, MAX_BYTES_PER_BATCH)


@dataclass(frozen=True)
class _KinesisTable:
    role: str
    endpoint: KinesisEndpoint
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    #: source: ``earliest`` or ``latest``; sink: None
    offset: str | None
    #: sink: the column whose value is the partition key (None: a hash of the record)
    key_field: str | None
    #: sink: the bounds of one PutRecords request
    limits: RequestLimits


def read_endpoint(options: core.OptionReader, stream_required: bool = True) -> KinesisEndpoint:
    """The stream, region, endpoint and credentials of a table's (or profile's) options."""
    stream = options.required(STREAM_NAME) if stream_required else options.string(STREAM_NAME)
    stream_name = (stream or "").strip()
    region = check_region(options.required(AWS_REGION))
    url = options.string(ENDPOINT_URL)
    key_id, secret, token = (options.string(key) for key in AWS_CREDENTIALS)
    key_id, secret = check_keys(key_id, secret, "connector 'kinesis'")
    return KinesisEndpoint(
        stream_name=stream_name, region=region,
        endpoint_url=check_endpoint_url(url) if url is not None else regional_endpoint(region),
        access_key_id=key_id, secret_access_key=secret, session_token=token or None)


def _sink_options(options: core.OptionReader) -> tuple[str | None, RequestLimits]:
    """``key_field`` and the PutRecords request bounds of a sink."""
    options.reject(NOT_YET_SINK_OPTION,
                   "is not supported yet: the kinesis sink puts each epoch's records when "
                   "the epoch ends; remove it")
    key_field = options.string(KEY_FIELD)
    if key_field is not None and key_field != key_field.strip():
        raise core.ConnectorError(f"option '{KEY_FIELD.name}' must be a column name",
                                  option=KEY_FIELD.name)
    records = options.integer(MAX_RECORDS_PER_BATCH, minimum=1)
    size = options.integer(MAX_BYTES_PER_BATCH, minimum=MAX_BYTES_PER_RECORD)
    assert records is not None and size is not None
    for key, value, most in ((MAX_RECORDS_PER_BATCH, records, MAX_RECORDS_PER_REQUEST),
                             (MAX_BYTES_PER_BATCH, size, MAX_BYTES_PER_REQUEST)):
        if value > most:
            raise core.ConnectorError(f"option '{key.name}' must be at most {most} (Kinesis's "
                                      f"limit per PutRecords request), not {value}",
                                      option=key.name)
    return key_field, RequestLimits(records, size)


@core.register
class KinesisConnector(core.Connector):
    """Amazon Kinesis Data Streams (or a server speaking its API)."""

    name = "kinesis"
    roles = frozenset({core.SOURCE, core.SINK})
    options = (*core.TYPE, STREAM_NAME, AWS_REGION, *AWS_CREDENTIALS, ENDPOINT_URL, START_FROM,
               *SINK_OPTIONS, *core.FORMAT, *core.MESSAGE_RECORDS)
    examples = {
        core.SOURCE: ({"type": "source", "format": "json", "json.unstructured": "true",
                       "stream_name": "s", "aws_region": "us-east-1", "aws_access_key_id": "k",
                       "aws_secret_access_key": "s"},),
        core.SINK: ({"type": "sink", "format": "json", "stream_name": "s",
                     "aws_region": "us-east-1", "aws_access_key_id": "k",
                     "aws_secret_access_key": "s"},)}

    def _parse(self, table: core.TableConfig) -> _KinesisTable:
        options = core.OptionReader(table)
        role = core.check_role(options, self.roles)
        endpoint = read_endpoint(options)
        spec = parse_format(options, role)
        offset = key_field = None
        limits = RequestLimits()
        if role == core.SOURCE:
            core.check_source_options(options)
            offset = options.choice(START_FROM)
            for key in (*SINK_OPTIONS, NOT_YET_SINK_OPTION):
                options.reject(key, "applies to sinks only")
        else:
            core.reject_source_options(options)
            options.reject(START_FROM, "applies to sources only")
            key_field, limits = _sink_options(options)
        options.finish()
        columns = message_columns(table, spec, role)
        check_planned(endpoint, table.boundary)
        return _KinesisTable(role, endpoint, spec, columns, offset, key_field, limits)

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """A source record's shard, sequence number (TEXT: up to 128 bits) and partition
        key."""
        if role != core.SOURCE:
            return {}
        return {"shard_id": (T.StringType(),), "sequence_number": (T.StringType(),),
                "partition_key": (T.StringType(),)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return self._parse(table).columns

    def partition_count(self, table: core.TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def has_input_after(self, table: core.TableConfig, parallelism: int, offset: Any) -> bool:
        """Whether a readable shard has a record past ``offset``, asked of Kinesis."""
        del parallelism
        endpoint = self._parse(table).endpoint
        try:
            return has_records_after(connect(endpoint, table.boundary), endpoint.stream_name,
                                     offset)
        except Exception as error:  # noqa: BLE001 - boto3's errors, told without secrets
            raise failure(error, endpoint, f"kinesis source '{table.name}'") from None

    def reader_options(self, table: core.TableConfig, parallelism: int) -> dict[str, str]:
        """The options of the data source reading ``table`` (see :func:`source_options`)."""
        parsed = self._parse(table)
        if parsed.role != core.SOURCE:
            raise core.ConnectorError(f"kinesis table '{table.name}' is a sink; it cannot be read",
                                      option=core.TYPE_OPTION.name)
        endpoint = parsed.endpoint.to_dict()
        secrets = {key: endpoint.pop(key) for key in SECRET_FIELDS}
        settings = {
            "table": table.name,
            "endpoint": endpoint,
            "boundary": table.boundary.to_dict(),
            "format": parsed.spec.to_dict(),
            "offset": parsed.offset,
            "readers": self.partition_count(table, parallelism),
            "not_null": table.required_columns(parsed.columns),
            "metadata": dict(table.metadata),
        }
        options = core.source_options(source_schema(parsed.spec, parsed.columns), settings)
        return {**options, SECRET_OPTION: json.dumps(secrets)}

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        options = self.reader_options(table, parallelism)
        return core.load_stream(spark, SOURCE_NAME, options, table.primary_key)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = self._parse(table)
        if parsed.role != core.SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        if parsed.key_field is not None and parsed.key_field not in schema.fieldNames():
            raise core.ConnectorError(f"option '{KEY_FIELD.name}' names '{parsed.key_field}', "
                                      f"which is not a column of sink '{table.name}' (its columns: "
                                      f"{', '.join(schema.fieldNames())})", option=KEY_FIELD.name)
        return KinesisSink(table.name, parsed.endpoint, table.boundary, parsed.spec,
                           parsed.key_field, parsed.limits)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """DescribeStreamSummary with the table's (or profile's) own credentials."""
        table = core.TableConfig("connection", self.name, role or core.SOURCE, options, (),
                                 boundary=boundary)
        endpoint = read_endpoint(core.OptionReader(table), stream_required=role is not None)
        try:
            client = connect(endpoint, boundary)
            if not endpoint.stream_name:  # a connection profile naming no stream
                names = client.list_streams(Limit=100).get("StreamNames", [])
                return (f"kinesis in {endpoint.region} at {endpoint.shown}: "
                        f"{len(names)} stream{'' if len(names) == 1 else 's'} visible")
            summary = client.describe_stream_summary(
                StreamName=endpoint.stream_name)["StreamDescriptionSummary"]
        except Exception as error:  # noqa: BLE001 - boto3's errors, told without secrets
            raise failure(error, endpoint, "kinesis") from None
        shards = summary.get("OpenShardCount")
        return (f"kinesis stream '{endpoint.stream_name}' in {endpoint.region} at "
                f"{endpoint.shown}: {summary.get('StreamStatus', 'UNKNOWN')}, "
                f"{shards} open shard{'' if shards == 1 else 's'}")
