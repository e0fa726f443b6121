"""Fixtures of the rabbitmq tests: throwaway queues and streams on the local broker.

The broker is RabbitMQ on 127.0.0.1 (guest/guest): AMQP on 5672, streams on 5552
(the ``rabbitmq_stream`` plugin: ``rabbitmq-plugins enable rabbitmq_stream``).
Every queue and stream is named uniquely per test and deleted afterwards.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import closing

import pika
import pytest
from rstream import (
    AMQPMessage,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetType,
    Producer,
    amqp_decoder,
)

HOST = "127.0.0.1"
AMQP_PORT = 5672
STREAM_PORT = 5552


def _producer() -> Producer:
    return Producer(HOST, STREAM_PORT, username="guest", password="guest")


def port_answers(port: int) -> bool:
    with closing(socket.socket()) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((HOST, port)) == 0


def _amqp() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(HOST, AMQP_PORT))


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A fresh durable queue, deleted after the test."""
    if not port_answers(AMQP_PORT):
        pytest.skip(f"RabbitMQ does not answer on {HOST}:{AMQP_PORT}")
    name = f"spate-test-{secrets.token_hex(6)}"
    with closing(_amqp()) as connection:
        connection.channel().queue_declare(name, durable=True)
    yield name
    with closing(_amqp()) as connection:
        connection.channel().queue_delete(name)


def publish_to_queue(queue: str, bodies: list[bytes]) -> None:
    with closing(_amqp()) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        for body in bodies:
            channel.basic_publish("", queue, body)


def drain_queue(queue: str) -> list[bytes]:
    """Every message ready in ``queue``, acknowledged."""
    bodies: list[bytes] = []
    with closing(_amqp()) as connection:
        channel = connection.channel()
        while True:
            method, _, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return bodies
            bodies.append(body)


def ready_messages(queue: str) -> int:
    with closing(_amqp()) as connection:
        declared = connection.channel().queue_declare(queue, passive=True)
        return int(declared.method.message_count)


def _throwaway_stream() -> Iterator[str]:
    if not port_answers(STREAM_PORT):
        pytest.skip(f"RabbitMQ streams do not answer on {HOST}:{STREAM_PORT}: enable them "
                    "with `rabbitmq-plugins enable rabbitmq_stream`")
    name = f"spate-test-{secrets.token_hex(6)}"

    async def create() -> None:
        async with _producer() as producer:
            await producer.create_stream(name)

    async def delete() -> None:
        async with _producer() as producer:
            await producer.delete_stream(name, missing_ok=True)

    asyncio.run(create())
    yield name
    asyncio.run(delete())


@pytest.fixture
def stream_name() -> Iterator[str]:
    """A fresh stream, deleted after the test; skips when the stream port is closed."""
    yield from _throwaway_stream()


@pytest.fixture
def output_stream() -> Iterator[str]:
    """Another fresh stream, for a pipeline that writes one."""
    yield from _throwaway_stream()


def publish_to_stream(stream: str, bodies: list[bytes]) -> None:
    """Publish ``bodies`` as AMQP 1.0 messages, waiting for their confirms."""

    async def publish() -> None:
        async with _producer() as producer:
            for body in bodies:
                await producer.send_wait(stream, AMQPMessage(body=body))

    asyncio.run(publish())


def read_stream(stream: str, expected: int, timeout_s: float = 10.0) -> list[bytes]:
    """The message bodies of ``stream`` from its first offset: once ``expected`` have
    arrived, whatever else arrives in the next 0.3 s (a duplicate would) is kept too."""
    bodies: list[tuple[int, bytes]] = []

    def on_message(message: AMQPMessage, context: MessageContext) -> None:
        bodies.append((context.offset, message.body))

    async def read() -> None:
        async with Consumer(HOST, STREAM_PORT, username="guest", password="guest") as consumer:
            await consumer.subscribe(stream, on_message, decoder=amqp_decoder,
                                     offset_specification=ConsumerOffsetSpecification(
                                         OffsetType.FIRST, None))
            deadline = time.monotonic() + timeout_s
            while len(bodies) < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)

    asyncio.run(read())
    return [body for _, body in sorted(bodies)]
