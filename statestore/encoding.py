"""Versioned value encoding for operator state.

Every stored value starts with a format byte, so data written by an older
format keeps reading after the format changes:

* ``0x01`` — version 1: the msgpack payload follows directly.
* ``0x02`` — version 2 (written now): a flags byte (bit 0: zlib-compressed),
  the CRC-32 of the payload as it is stored (4 bytes, big-endian), then the
  payload.  The checksum turns silent corruption into a
  :class:`CorruptValueError`.

msgpack keeps the encoding compact and language-neutral; tuples come back as
lists.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import msgpack

from spate.statestore.errors import CorruptValueError

VERSION_1 = 0x01
VERSION_2 = 0x02
CURRENT_VERSION = VERSION_2

_COMPRESSED = 0x01
#: Payloads at least this long are compressed (small ones would only grow).
COMPRESS_FROM_BYTES = 4096
_HEADER = struct.Struct(">BBI")


def encode(value: Any) -> bytes:
    """Encode ``value`` (msgpack-able) in the current format."""
    payload: bytes = msgpack.packb(value, use_bin_type=True)
    flags = 0
    if len(payload) >= COMPRESS_FROM_BYTES:
        packed = zlib.compress(payload, 1)
        if len(packed) < len(payload):
            payload, flags = packed, _COMPRESSED
    return _HEADER.pack(CURRENT_VERSION, flags, zlib.crc32(payload)) + payload


def decode(raw: bytes) -> Any:
    """Decode a value written by any known format version."""
    if not raw:
        raise CorruptValueError("a stored state value is empty: the store is damaged; "
                                "restore it or restart the pipeline without state")
    version = raw[0]
    if version == VERSION_1:
        return _unpack(raw[1:])
    if version == VERSION_2:
        if len(raw) < _HEADER.size:
            raise CorruptValueError("a stored state value is truncated (shorter than its "
                                    "header): restore the store or restart without state")
        _, flags, checksum = _HEADER.unpack_from(raw)
        payload = raw[_HEADER.size:]
        if zlib.crc32(payload) != checksum:
            raise CorruptValueError("a stored state value fails its checksum: the store is "
                                    "damaged; restore it or restart the pipeline without state")
        if flags & _COMPRESSED:
            payload = zlib.decompress(payload)
        return _unpack(payload)
    raise CorruptValueError(
        f"a stored state value has unknown format version {version}: it was written by a "
        f"newer Spate or is damaged; upgrade Spate or restore the store")


def _unpack(payload: bytes) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as error:
        raise CorruptValueError(
            f"a stored state value cannot be decoded ({error}): the store is damaged; "
            f"restore it or restart the pipeline without state") from error
