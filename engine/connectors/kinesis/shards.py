"""Kinesis shards and sequence numbers: the ``kinesis`` source's offsets.

An offset is ``{"shards": {shard_id: last_sequence_number_read | null}, "start_ms":
ms | null}``. A shard not in ``shards``, or null there, has not been read:
it is read from its beginning (``TRIM_HORIZON``), or, when the source started
at ``latest``, from the records that arrived at or after ``start_ms``
(``AT_TIMESTAMP``). A sequence number means "read up to and including it";
the next read starts ``AFTER_SEQUENCE_NUMBER``.

Resharding: a shard closed by a split or merge has an ending sequence number.
It is finished once read up to it (or once Kinesis says it has no more
records: its ending number is then stored). A child shard is read only once
every parent it names is finished, in a later batch than the parent's last
records, so the records of one partition key stay in order across a reshard.
A parent that has expired from the stream (no longer listed) counts as finished.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The most records GetRecords returns per call (Kinesis's own limit).
MAX_RECORDS_PER_CALL = 10_000
#: GetRecords pages the driver reads per shard to find a batch's end (empty pages
#: happen on real Kinesis while a shard iterator moves through a gap).
MAX_PAGES_PER_SHARD = 10


@dataclass(frozen=True)
class ShardInfo:
    """A shard as ListShards describes it."""

    shard_id: str
    parents: tuple[str, ...]
    #: the last sequence number a closed shard can hold; None while it is open
    ending: str | None


def list_shards(client: Any, stream_name: str) -> dict[str, ShardInfo]:
    """Every shard of the stream (open and closed but not expired), by id."""
    shards: dict[str, ShardInfo] = {}
    request: dict[str, Any] = {"StreamName": stream_name}
    while True:
        page = client.list_shards(**request)
        for shard in page["Shards"]:
            parents = tuple(p for p in (shard.get("ParentShardId"),
                                        shard.get("AdjacentParentShardId")) if p)
            ending = shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
            shards[shard["ShardId"]] = ShardInfo(shard["ShardId"], parents, ending)
        token = page.get("NextToken")
        if not token:
            return shards
        request = {"NextToken": token}


def is_finished(info: ShardInfo, read_to: str | None) -> bool:
    """Whether a shard read up to ``read_to`` holds nothing more, ever."""
    return info.ending is not None and read_to is not None and int(read_to) >= int(info.ending)


def readable_shards(shards: Mapping[str, ShardInfo], read: Mapping[str, str | None]
                    ) -> list[ShardInfo]:
    """The shards a batch may read: unfinished ones whose parents are all finished."""
    def finished(shard_id: str) -> bool:
        info = shards.get(shard_id)
        return info is None or is_finished(info, read.get(shard_id))

    return [info for info in shards.values()
            if not finished(info.shard_id) and all(finished(p) for p in info.parents)]


def shard_iterator(client: Any, stream_name: str, shard_id: str, after: str | None,
                   start_ms: int | None) -> str:
    """An iterator at the first record after ``after`` (see the module docstring)."""
    request: dict[str, Any] = {"StreamName": stream_name, "ShardId": shard_id}
    if after is not None:
        request |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                    "StartingSequenceNumber": after}
    elif start_ms is not None:
        request |= {"ShardIteratorType": "AT_TIMESTAMP",
                    "Timestamp": dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC)}
    else:
        request["ShardIteratorType"] = "TRIM_HORIZON"
    iterator: str = client.get_shard_iterator(**request)["ShardIterator"]
    return iterator


def find_end(client: Any, stream_name: str, info: ShardInfo, after: str | None,
             start_ms: int | None, limit: int) -> str | None:
    """The sequence number a batch reads a shard up to: at most ``limit`` records after
    ``after``, or all there are now (``after`` itself when there are none)."""
    iterator: str | None = shard_iterator(client, stream_name, info.shard_id, after, start_ms)
    last, count = after, 0
    for _ in range(MAX_PAGES_PER_SHARD):
        page = client.get_records(ShardIterator=iterator,
                                  Limit=min(MAX_RECORDS_PER_CALL, limit - count))
        records = page["Records"]
        if records:
            last = records[-1]["SequenceNumber"]
            count += len(records)
        iterator = page.get("NextShardIterator")
        if iterator is None:  # a closed shard read to its end
            return info.ending or last
        if count >= limit or (not records and page.get("MillisBehindLatest", 0) == 0):
            break
    return last


def has_records_after(client: Any, stream_name: str, offset: Mapping[str, Any]) -> bool:
    """Whether a shard a batch may read has a record past ``offset`` (one look each)."""
    read: Mapping[str, str | None] = offset["shards"]
    for info in readable_shards(list_shards(client, stream_name), read):
        after = read.get(info.shard_id)
        if find_end(client, stream_name, info, after, offset["start_ms"], 1) != after:
            return True
    return False


def reader_of(shard_id: str, readers: int) -> int:
    """The reader (source partition) that owns a shard, the same on every batch."""
    return zlib.crc32(shard_id.encode()) % readers
