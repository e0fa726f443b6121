"""``redis`` lookup tables: rows of a lookup table stored under Redis keys.

A row's key is ``key.prefix`` followed by its PRIMARY KEY value (the values of a
composite key joined by ``key.separator``). Its other columns are either one
string value decoded with ``format`` (``value.type = 'string'``, fetched with one
MGET per batch of keys) or the fields of a hash named like the columns
(``value.type = 'hash'``, one pipelined EXISTS + HMGET per key). Options are
documented in this package's README. Under a tenant's egress policy the address
is read strictly and the client built from its checked parts
(:mod:`.destination`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import redis
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.egress import unreachable
from spate.engine.connectors.core.lookup import (
    Key,
    LookupSource,
    check_lookup_table,
    read_cache_settings,
)
from spate.engine.connectors.formats.decoders import RecordDecoder, parse_rfc3339
from spate.engine.connectors.formats.records import FormatSpec, check_columns, parse_format
from spate.engine.connectors.redis.client import TIMEOUT_S, read_connection
from spate.engine.connectors.redis.destination import (
    ADDRESS,
    confined_client,
    confined_destination,
)

STRING_VALUES = "string"
HASH_VALUES = "hash"
_KEY_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_HASH_TYPES = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
               T.FloatType, T.DoubleType, T.DecimalType, T.StringType, T.BinaryType,
               T.DateType, T.TimestampType)

KEY_PREFIX = core.option("key.prefix", core.LOOKUP_ROLES, "prepended to every key, e.g. "
                                                          "`'customer:'`",
                         default="", default_text="`''`")
KEY_SEPARATOR = core.option("key.separator", core.LOOKUP_ROLES, "joins the values of a `PRIMARY "
                            "KEY` of several columns", default=":")
VALUE_TYPE = core.option("value.type", core.LOOKUP_ROLES,
                         "`string`: the key holds one value, decoded "
                         "with `format`; `hash`: the key holds a hash whose fields are named like "
                         "the "
                         "columns", choices=(STRING_VALUES, HASH_VALUES), default=STRING_VALUES)


@dataclass(frozen=True)
class RedisLookupSettings:
    address: str
    #: ``username`` / ``password`` given as options (the address holds none)
    credentials: dict[str, str]
    value_type: str
    #: how string values decode; None for hashes
    format: FormatSpec | None
    key_prefix: str
    key_separator: str


def read_settings(table: core.TableConfig) -> RedisLookupSettings:
    """Check every option of a redis lookup table; raises :class:`ConnectorError`."""
    options = core.OptionReader(table)
    check_lookup_table(options)
    read_cache_settings(options)
    connection = read_connection(options, table.boundary.egress)
    value_type = options.choice(VALUE_TYPE)
    values = tuple(c for c in table.columns if c.name not in table.primary_key)
    spec = None
    if value_type == STRING_VALUES:
        spec = parse_format(options, "lookup")
        if spec.kind not in ("json", "raw_string"):
            raise core.ConnectorError(f"format '{spec.kind}' cannot be a lookup table's values; "
                                      "use 'json' or 'raw_string'", option=core.FORMAT_OPTION.name)
        check_columns(spec, values, "lookup")
    else:
        _check_hash_columns(options, values)
    settings = RedisLookupSettings(
        address=connection.address, credentials=connection.credentials,
        value_type=value_type or STRING_VALUES,
        format=spec,
        key_prefix=options.string(KEY_PREFIX) or KEY_PREFIX.default,
        key_separator=options.string(KEY_SEPARATOR) or KEY_SEPARATOR.default)
    for column in table.columns:
        if column.name in table.primary_key and not isinstance(column.spark_type, _KEY_TYPES):
            raise core.ConnectorError(f"PRIMARY KEY column '{column.name}' is "
                                      f"{column.spark_type.simpleString()}; a redis key is built "
                                      "from TEXT or integer columns")
    options.finish()
    return settings


def _check_hash_columns(options: core.OptionReader, values: tuple[core.ColumnDef, ...]) -> None:
    for spec in (core.FORMAT_OPTION, core.JSON_UNSTRUCTURED, core.JSON_TIMESTAMP_FORMAT,
                 core.JSON_DECIMAL_ENCODING,
                 core.FRAMING):
        options.reject(spec, f"applies to {VALUE_TYPE.name} '{STRING_VALUES}' only: hash "
                             "fields are read as text and converted to their column's type")
    for column in values:
        if not isinstance(column.spark_type, _HASH_TYPES):
            raise core.ConnectorError(f"column '{column.name}' is "
                                      f"{column.spark_type.simpleString()}: hash fields hold "
                                      f"scalars only (use {VALUE_TYPE.name} '{STRING_VALUES}' with "
                                      "JSON values)", option=VALUE_TYPE.name)


class RedisLookup(LookupSource):
    """Fetches rows from one Redis server through a connection pool."""

    def __init__(self, table: core.TableConfig, settings: RedisLookupSettings) -> None:
        super().__init__(table)
        self.settings = settings
        #: host and port the tenant wrote, under an egress policy (for its messages)
        self._destination: tuple[str, int] | None = None
        self.client = self._client()
        value_fields = T.StructType([T.StructField(c.name, c.spark_type, c.nullable)
                                     for c in self.value_columns])
        self.value_schema = arrow_schema(value_fields)
        self.decoder = (RecordDecoder(self.value_schema, settings.format)
                        if settings.format is not None and not settings.format.single_value
                        else None)

    def _client(self) -> redis.Redis:
        egress = self.table.boundary.egress
        if egress is None:  # `spate run`: one trusted user, any URL redis-py takes
            return redis.Redis.from_url(self.settings.address, socket_timeout=TIMEOUT_S,
                                        socket_connect_timeout=TIMEOUT_S,
                                        **self.settings.credentials)
        # Under an egress policy the name is resolved and checked now, and the client,
        # built from the checked parts alone, connects to the checked address.
        destination = confined_destination(self.settings.address)
        addresses = egress.resolve(destination.host, destination.port, str(destination.db),
                                   option=ADDRESS.name)
        self._destination = (destination.host, destination.port)
        return confined_client(destination, addresses[0], TIMEOUT_S,
                               self.settings.credentials)

    def redis_key(self, key: Key) -> str:
        """The Redis key of a PRIMARY KEY value."""
        return self.settings.key_prefix + self.settings.key_separator.join(str(v) for v in key)

    def fetch(self, keys: Sequence[Key]) -> pa.Table:
        if not keys:
            return self.schema.empty_table()
        names = [self.redis_key(k) for k in keys]
        try:
            if self.settings.value_type == HASH_VALUES:
                found, values = self._fetch_hashes(names)
            else:
                found, values = self._fetch_strings(names)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            if self._destination is not None:  # a tenant learns nothing about the server
                raise unreachable(f"lookup table '{self.table.name}'",
                                  *self._destination) from None
            raise core.ConnectorError(f"lookup table '{self.table.name}': Redis failed: "
                                      f"{type(error).__name__}: {error}") from None
        except redis.RedisError as error:
            raise core.ConnectorError(f"lookup table '{self.table.name}': Redis failed: "
                                      f"{type(error).__name__}: {error}") from None
        return self.rows_table([keys[i] for i in found], values)

    def _fetch_strings(self, names: list[str]) -> tuple[list[int], list[pa.Array]]:
        # Without decode_responses the client returns bytes.
        raw = cast(list[bytes | None], self.client.mget(names))
        found = [i for i, value in enumerate(raw) if value is not None]
        values = [value for value in raw if value is not None]
        return found, self._decode([names[i] for i in found], values)

    def _decode(self, names: list[str], raw: list[bytes]) -> list[pa.Array]:
        spec = self.settings.format
        assert spec is not None
        if spec.single_value:  # raw_string or json.unstructured: the value as it is
            return [pa.array([self._text(n, v, spec.unstructured)
                              for n, v in zip(names, raw, strict=True)], pa.string())]
        lines = [self._one_line(n, v) for n, v in zip(names, raw, strict=True)]
        lengths = np.array([len(v) for v in lines], dtype=np.int64)
        starts = np.zeros(len(lines), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(lines), dtype=np.uint8)
        assert self.decoder is not None
        decoded = self.decoder.decode(buf, starts, lengths)
        if decoded.bad:
            index, problem = decoded.bad[0]
            raise self._bad_value(names[index], problem)
        return decoded.columns

    def _one_line(self, name: str, value: bytes) -> bytes:
        """A JSON value on one line (the decoder reads newline-separated records).

        In valid JSON a line break can only be whitespace between tokens, so it
        becomes a space.
        """
        if not value.strip():
            raise self._bad_value(name, "the value is empty")
        if b"\n" not in value and b"\r" not in value:
            return value
        self._text(name, value, check_json=True)
        return value.replace(b"\r", b" ").replace(b"\n", b" ")

    def _text(self, name: str, value: bytes, check_json: bool) -> str:
        try:
            text = value.decode("utf-8")
            if check_json:
                json.loads(text)
        except UnicodeDecodeError as error:
            raise self._bad_value(name, f"not valid UTF-8 ({error.reason})") from None
        except ValueError as error:
            raise self._bad_value(name, f"not valid JSON: {error}") from None
        return text

    def _fetch_hashes(self, names: list[str]) -> tuple[list[int], list[pa.Array]]:
        fields = [c.name for c in self.value_columns]
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.exists(name)
            pipe.hmget(name, fields)
        replies = pipe.execute()
        found = [i for i in range(len(names)) if replies[2 * i]]
        rows = [replies[2 * i + 1] for i in found]
        columns = [self._hash_column([row[j] for row in rows], column,
                                     [names[i] for i in found])
                   for j, column in enumerate(self.value_columns)]
        return found, columns

    def _hash_column(self, raw: list[bytes | None], column: core.ColumnDef,
                     names: list[str]) -> pa.Array:
        target = self.value_schema.field(column.name).type
        if not column.nullable and None in raw:
            name = names[raw.index(None)]
            raise self._bad_value(name, f"the hash has no field '{column.name}', which is "
                                        "NOT NULL")
        if pa.types.is_binary(target):
            return pa.array(raw, target)
        try:
            text = pa.array([None if v is None else v.decode("utf-8") for v in raw], pa.string())
            if pa.types.is_timestamp(target):
                return parse_rfc3339(text)
            return text.cast(target)
        except (UnicodeDecodeError, ValueError, pa.ArrowInvalid) as error:
            raise core.ConnectorError(f"lookup table '{self.table.name}': hash field "
                                      f"'{column.name}' does not convert to "
                                      f"{column.spark_type.simpleString()}: {error}") from None

    def _bad_value(self, name: str, problem: str) -> core.ConnectorError:
        return core.ConnectorError(f"lookup table '{self.table.name}': bad value at Redis key "
                                   f"'{name}': {problem}")

    def close(self) -> None:
        self.client.close()
