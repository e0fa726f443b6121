"""Helpers of the nats connector tests, against the NATS server (JetStream on) at
127.0.0.1:4222: throwaway streams with unique names, publishing and reading back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from nats.js.api import StreamConfig

SERVERS = "nats://127.0.0.1:4222"


@dataclass(frozen=True)
class TestStream:
    """A JetStream stream capturing ``<prefix>.>``."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    name: str
    prefix: str

    def subject(self, leaf: str = "a") -> str:
        return f"{self.prefix}.{leaf}"


def unique(word: str) -> str:
    return f"spate_test_{word}_{uuid.uuid4().hex[:10]}"


async def _admin(operation: Any) -> Any:
    client = await nats.connect(SERVERS)
    try:
        return await operation(client)
    finally:
        await client.close()


def admin(operation: Any) -> Any:
    """Run ``operation(client)`` on a fresh connection to the test server."""
    return asyncio.run(_admin(operation))


def create_stream(word: str, duplicate_window_s: float = 120.0) -> TestStream:
    stream = TestStream(unique(word).upper(), unique(word))
    config = StreamConfig(name=stream.name, subjects=[f"{stream.prefix}.>"],
                          duplicate_window=duplicate_window_s)
    admin(lambda c: c.jetstream().add_stream(config))
    return stream


def delete_stream(stream: TestStream) -> None:
    admin(lambda c: c.jetstream().delete_stream(stream.name))


@pytest.fixture
def js_stream() -> Iterator[TestStream]:
    """A fresh stream, deleted after the test."""
    stream = create_stream("js")
    yield stream
    delete_stream(stream)


def publish(subject: str, payloads: list[bytes]) -> list[int]:
    """Publish through JetStream; the stream sequences the messages got."""
    async def run(client: Any) -> list[int]:
        js = client.jetstream()
        return [(await js.publish(subject, payload)).seq for payload in payloads]
    result: list[int] = admin(run)
    return result


def publish_core(subject: str, payloads: list[bytes]) -> None:
    async def run(client: Any) -> None:
        for payload in payloads:
            await client.publish(subject, payload)
        await client.flush()
    admin(run)


def stream_payloads(stream: TestStream) -> list[bytes]:
    """Every message the stream holds, in sequence order."""
    async def run(client: Any) -> list[bytes]:
        js = client.jetstream()
        info = await js.stream_info(stream.name)
        found = []
        for sequence in range(info.state.first_seq, info.state.last_seq + 1):
            if info.state.messages == 0:
                break
            found.append((await js.get_msg(stream.name, sequence)).data)
        return found
    result: list[bytes] = admin(run)
    return result
