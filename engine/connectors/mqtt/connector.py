"""``mqtt`` (docs/sql/connectors.md): a source subscribed to a topic filter, and a sink
publishing each row to a topic.

Source: at-least-once with ``qos = 1`` (the default).  It keeps a persistent
MQTT 5 session under a stable client id, and acknowledges a message only once
the epoch holding it has committed, so whatever a crash or a stop left
unacknowledged the broker delivers again (:mod:`.source`).  ``qos = 0`` is
at-most-once.  Sink: at-least-once, every publish acknowledged before the epoch
commits; a replayed epoch publishes again (:mod:`.sink`).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_sink_schema,
    message_columns,
    parse_format,
    source_schema,
)
from spate.engine.connectors.mqtt.client import (
    DEFAULT_PORT,
    MAX_PACKET_SIZE,
    PASSWORD,
    TOPIC,
    URL,
    USERNAME,
    BrokerSettings,
    close,
    connect,
)
from spate.engine.connectors.mqtt.sink import MqttSink
from spate.engine.connectors.mqtt.source import SOURCE_NAME

_PLAIN_SCHEMES = ("tcp", "mqtt")
_TLS_SCHEMES = ("ssl", "mqtts")
#: Options of TLS connections, refused as not supported yet (so not declared).
_TLS_OPTIONS = ("tls.ca", "tls.cert", "tls.key")
#: The framing options, refused: one message is one record.
_FRAMING = (core.FRAMING, core.FRAMING_MAX_LENGTH)
#: MQTT's own bound on a packet (a 4-byte variable length).
_MAX_PACKET_BYTES = 268_435_455

# The connection's options (url, topic, username, password, max_packet_size) are
# declared in :mod:`.client`, whose errors name them.
QOS = core.option("qos", core.BOTH, "source: `1` (at-least-once) or `0` (at-most-once); `2` is not "
                  "supported yet by sources. Sink: `0`, `1` or `2`", choices=("0", "1", "2"),
                  default="1")
CLIENT_PREFIX = core.option("client_prefix", core.BOTH, "start of the MQTT client ids; a source's "
                            "id is `<client_prefix>-<table>-<hash of the pipeline, broker and "
                            "topic>`",
                            default="spate")
RETAIN = core.option("retain", core.SINKS, "publish with the retain flag", default=False)
MAX_MESSAGES_PER_BATCH = core.option("max_messages_per_batch", core.SOURCES, "messages per epoch "
                                     "(Spark micro-batch)", default=10_000)


@dataclass(frozen=True)
class MqttTable:
    """A validated mqtt table."""

    role: str
    broker: BrokerSettings
    topic: str
    qos: int
    client_prefix: str
    #: a source's stable client id (:func:`client_id`)
    client_id: str
    retain: bool
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    max_messages_per_batch: int


def read_broker(options: core.OptionReader, boundary: core.Boundary) -> BrokerSettings:
    """The connection options (``url``, credentials, ``max_packet_size``, TLS)."""
    url = options.required(URL).strip()
    host, port = _parse_url(url)
    for key in _TLS_OPTIONS:
        options.reject(key, "is not supported yet: Spate's mqtt connector speaks plain TCP "
                            "(tcp:// or mqtt://) only; remove it")
    egress = None
    if boundary.egress is not None:
        boundary.egress.check_literal(host, port, option=URL.name)
        egress = boundary.egress.to_dict()
    return BrokerSettings(
        host=host, port=port, username=options.string(USERNAME),
        password=options.string(PASSWORD),
        max_packet_size=options.integer(MAX_PACKET_SIZE, minimum=1),
        egress=egress)


def _parse_url(url: str) -> tuple[str, int]:
    """``host, port`` of ``tcp://host[:port]`` / ``mqtt://``; the URL is never echoed
    (a user may have put a password in it)."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or DEFAULT_PORT
        has_extras = bool(parts.username or parts.password or parts.path.strip("/")
                          or parts.query or parts.fragment)
    except ValueError:
        scheme, port, has_extras = "", DEFAULT_PORT, True
    if scheme in _TLS_SCHEMES:
        raise core.ConnectorError(f"option '{URL.name}': {scheme}:// (TLS) is not supported yet; "
                                  "use tcp:// or mqtt://", option=URL.name)
    if scheme not in _PLAIN_SCHEMES or not parts.hostname or has_extras:
        raise core.ConnectorError(f"option '{URL.name}' must be tcp://host[:port] or "
                                  f"mqtt://host[:port] (port {DEFAULT_PORT} by default), with "
                                  f"credentials in options '{USERNAME.name}' and '{PASSWORD.name}'",
                                  option=URL.name)
    return parts.hostname, port


def _read_topic(options: core.OptionReader, role: str) -> str:
    topic = options.required(TOPIC)
    levels = topic.split("/")
    if role == core.SINK and ("+" in topic or "#" in topic):
        raise core.ConnectorError(f"option '{TOPIC.name}': a sink publishes to one topic; "
                                  f"'{topic}' holds a wildcard (+ or #)", option=TOPIC.name)
    for index, level in enumerate(levels):
        if ("+" in level and level != "+") or ("#" in level and (
                level != "#" or index != len(levels) - 1)):
            raise core.ConnectorError(f"option '{TOPIC.name}': '{topic}' is not a valid topic "
                                      f"filter ('+' must be a whole level, '#' the whole last "
                                      f"level)",
                                      option=TOPIC.name)
    return topic


def _read_qos(options: core.OptionReader, role: str) -> int:
    qos = options.choice(QOS)
    if qos == "2" and role == core.SOURCE:
        raise core.ConnectorError(f"option '{QOS.name}': 2 is not supported yet by mqtt sources "
                                  "(their at-least-once delivery relies on QoS 1 "
                                  "acknowledgements); use 1", option=QOS.name)
    assert qos is not None
    return int(qos)


def _client_prefix(options: core.OptionReader) -> str:
    """``client_prefix``; an empty one is the default's."""
    return options.string(CLIENT_PREFIX) or str(CLIENT_PREFIX.default)


def client_id(prefix: str, table: core.TableConfig, broker: BrokerSettings, topic: str) -> str:
    """The stable client id of a source: its MQTT session survives restarts under it.

    It is the reading pipeline's own (``table.owner``): two pipelines, or a preview,
    reading one table of one broker and topic never take each other's session.
    """
    digest = hashlib.sha256(f"{table.owner}\n{broker.shown}\n{topic}".encode()).hexdigest()
    return f"{prefix}-{table.name}-{digest[:12]}"


def parse_table(table: core.TableConfig) -> MqttTable:
    """Check every option of an mqtt table; raises :class:`ConnectorError` naming it."""
    options = core.OptionReader(table)
    role = core.check_role(options, frozenset({core.SOURCE, core.SINK}))
    broker = read_broker(options, table.boundary)
    topic = _read_topic(options, role)
    qos = _read_qos(options, role)
    prefix = _client_prefix(options)
    for key in _FRAMING:
        options.reject(key, "is not supported yet by mqtt tables: one message is one record; "
                            "remove it")
    spec = parse_format(options, role, records_in=(TOPIC,))
    if role == core.SOURCE:
        core.check_source_options(options)
        options.reject(RETAIN, "applies to sinks only")
        retain = False
        max_messages = options.integer(MAX_MESSAGES_PER_BATCH, minimum=1)
    else:
        core.reject_source_options(options)
        options.reject(MAX_MESSAGES_PER_BATCH, "applies to sources only")
        retain = options.boolean(RETAIN)
        max_messages = MAX_MESSAGES_PER_BATCH.default
    options.finish()
    columns = message_columns(table, spec, role)
    assert max_messages is not None
    return MqttTable(role, broker, topic, qos, prefix,
                     client_id(prefix, table, broker, topic),
                     retain, spec, columns, max_messages)


@core.register
class MqttConnector(core.Connector):
    """MQTT 5 over plain TCP: a subscribing source and a publishing sink."""

    name = "mqtt"
    roles = frozenset({core.SOURCE, core.SINK})
    # tls.* are not listed: they are refused as not supported yet (read_broker).
    options = (*core.TYPE, URL, TOPIC, QOS, USERNAME, PASSWORD, CLIENT_PREFIX, RETAIN,
               MAX_PACKET_SIZE, MAX_MESSAGES_PER_BATCH,
               *(spec for spec in (*core.FORMAT, *core.FORMAT_SOURCE) if spec not in _FRAMING),
               *core.DEAD_LETTER, *core.FORMAT_BINARY, *core.SOURCE_TIME)
    examples = {
        core.SOURCE: ({"type": "source", "format": "json", "url": "tcp://h", "topic": "a/#"},),
        core.SINK: ({"type": "sink", "format": "json", "url": "tcp://h", "topic": "a"},)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return parse_table(table).columns

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """The topic a source's message was published to (a wildcard subscription's
        topics differ)."""
        return {"topic": (T.StringType(),)} if role == core.SOURCE else {}

    def batch_limit(self, table: core.TableConfig) -> int | None:
        return parse_table(table).max_messages_per_batch

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """Connect (CONNECT / CONNACK) with a throwaway clean session, then disconnect."""
        table = core.TableConfig(name="check", connector=self.name, role=role or core.SOURCE,
                                 options=options, columns=(), boundary=boundary)
        reader = core.OptionReader(table)
        broker = read_broker(reader, boundary)
        prefix = _client_prefix(reader)
        client = connect(broker, f"{prefix}-check-{secrets.token_hex(4)}",
                         what="mqtt check", persistent=False)
        close(client)
        login = f" as user '{broker.username}'" if broker.username else ""
        return f"connected to the MQTT broker {broker.shown}{login}"

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        parsed = parse_table(table)
        if parsed.role != core.SOURCE:  # one reader whatever the parallelism: one MQTT session
            return super().read_stream(spark, table, parallelism)
        settings = {
            "table": table.name,
            "broker": parsed.broker.to_dict(),
            "topic": parsed.topic,
            "qos": parsed.qos,
            "client_id": parsed.client_id,
            "format": parsed.spec.to_dict(),
            "max_messages_per_batch": parsed.max_messages_per_batch,
            "not_null": table.required_columns(parsed.columns),
            "metadata": dict(table.metadata),
        }
        options = core.source_options(source_schema(parsed.spec, parsed.columns), settings)
        return core.load_stream(spark, SOURCE_NAME, options, table.primary_key)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = parse_table(table)
        if parsed.role != core.SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        return MqttSink(table.name, parsed.broker, parsed.topic, parsed.qos, parsed.retain,
                        parsed.spec, parsed.client_prefix)
