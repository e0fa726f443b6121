"""JetStream for the ``nats`` connector: reading a sequence range, publishing with acks.

A source's offset is ``{"sequence": N}``, the last stream sequence consumed.
A batch reads the stream's messages with sequences in ``(start, end]`` (those
matching the filter subject, if any) through an ephemeral, memory-only
consumer created for that read at ``start + 1`` and deleted after it: a
replayed batch reads exactly the same messages, as long as the stream still
holds them. Sinks publish with a ``Nats-Msg-Id`` header and wait for every
PubAck, so the stream's duplicate window drops a replayed epoch's messages.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from spate.engine.connectors.core.errors import ConnectorError
from spate.engine.connectors.nats.client import NATS_STREAM, NATS_SUBJECT, TIMEOUT_S

#: Messages asked for per pull request while reading a range.
_FETCH_BATCH = 1000
#: Seconds an abandoned read's consumer lives on the server.
_CONSUMER_TTL_S = 60.0
#: Publishes in flight at once while writing an epoch.
_PUBLISH_WINDOW = 512


@dataclass(frozen=True)
class StreamMessage:
    """A message read from a stream: its sequence, timestamp (µs), payload and subject."""

    sequence: int
    timestamp_us: int
    data: bytes
    subject: str = ""


async def last_sequence(client: NatsClient, stream: str) -> int:
    """The stream's last sequence (0 when it never held a message)."""
    info = await client.jetstream().stream_info(stream)
    return int(info.state.last_seq or 0)


async def read_range(client: NatsClient, stream: str, filter_subject: str | None,
                     start: int, end: int) -> list[StreamMessage]:
    """The messages with sequences in ``(start, end]``, in order."""
    js = client.jetstream()
    name = f"spate_{uuid.uuid4().hex}"
    config = ConsumerConfig(name=name, deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                            opt_start_seq=start + 1, ack_policy=AckPolicy.NONE,
                            filter_subject=filter_subject, inactive_threshold=_CONSUMER_TTL_S,
                            mem_storage=True, num_replicas=1)
    info = await js.add_consumer(stream, config)
    try:
        return await _pull_until(js, stream, name, int(info.num_pending or 0), end)
    finally:
        await js.delete_consumer(stream, name)


async def _pull_until(js: nats.js.JetStreamContext, stream: str, consumer: str,
                      pending: int, end: int) -> list[StreamMessage]:
    """Pull until the sequence ``end`` is passed or nothing more is pending.

    ``pending`` (what the server counts after the last message delivered) only
    grows with messages published after ``end`` was chosen, so reaching zero
    before ``end`` means the range's last messages were filtered out or deleted.
    """
    subscription = await js.pull_subscribe_bind(stream=stream, consumer=consumer)
    messages: list[StreamMessage] = []
    try:
        while pending > 0:
            fetched = await subscription.fetch(batch=min(pending, _FETCH_BATCH),
                                               timeout=TIMEOUT_S)
            for message in fetched:
                metadata = message.metadata
                if metadata.sequence.stream > end:
                    return messages
                messages.append(_stream_message(message))
                pending = int(metadata.num_pending)
                if metadata.sequence.stream == end:
                    return messages
        return messages
    finally:
        await subscription.unsubscribe()


def _stream_message(message: Msg) -> StreamMessage:
    metadata = message.metadata
    stamp: datetime | None = metadata.timestamp
    micros = 0 if stamp is None else int(stamp.timestamp() * 1_000_000)
    return StreamMessage(int(metadata.sequence.stream), micros, bytes(message.data),
                         str(message.subject))


async def publish_all(client: NatsClient, subject: str, stream: str,
                      records: Sequence[bytes], message_ids: Sequence[str]) -> int:
    """Publish ``records`` with their ``Nats-Msg-Id`` and wait for every PubAck;
    returns how many the stream dropped as duplicates."""
    js = client.jetstream(timeout=TIMEOUT_S)
    window = asyncio.Semaphore(_PUBLISH_WINDOW)

    async def one(record: bytes, message_id: str) -> bool:
        async with window:
            ack = await js.publish(subject, record, stream=stream,
                                   headers={"Nats-Msg-Id": message_id})
        return bool(ack.duplicate)

    duplicates = await asyncio.gather(*(one(r, i) for r, i in
                                        zip(records, message_ids, strict=True)))
    return sum(duplicates)


def jetstream_error(what: str, stream: str, error: Exception) -> ConnectorError:
    """A JetStream request that failed: a missing stream, or a server's refusal."""
    if isinstance(error, nats.js.errors.NotFoundError):
        return ConnectorError(f"{what}: JetStream stream '{stream}' does not exist; create it "
                              f"or fix '{NATS_STREAM.name}'", option=NATS_STREAM.name)
    if isinstance(error, nats.errors.NoRespondersError | nats.js.errors.NoStreamResponseError):
        return ConnectorError(f"{what}: no JetStream answered for stream '{stream}' (is "
                              "JetStream enabled on the server, and does a stream capture "
                              f"'{NATS_SUBJECT.name}'?)", option=NATS_STREAM.name)
    detail = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    return ConnectorError(f"{what}: JetStream failed on stream '{stream}': "
                          f"{type(error).__name__} {detail}".rstrip(),
                          option=NATS_STREAM.name)
