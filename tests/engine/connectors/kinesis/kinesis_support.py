"""A real Kinesis-API server for the kinesis connector's tests: moto's, on a free port.

moto keeps streams per account (taken from a request's ``x-moto-account-id``
header, else from the IAM access key signing it) and per region.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3

from tests.ports import free_port

REGION = "us-east-1"
#: Keys moto accepts (it checks no signature): what a connection profile would hold.
KEY_ID = "AKIATESTPROFILEKEY01"
SECRET = "profile-secret-never-shown"


@dataclass(frozen=True)
class KinesisServer:
    """moto's server, and a boto3 client of it for the tests' own setup and checks."""

    url: str
    port: int

    def client(self, account: str | None = None) -> Any:
        session = boto3.Session(aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                                region_name=REGION)
        client = session.client("kinesis", endpoint_url=self.url)
        if account is not None:
            _in_account(client, account)
        return client

    def iam(self, account: str) -> Any:
        session = boto3.Session(aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                                region_name=REGION)
        client = session.client("iam", endpoint_url=self.url)
        _in_account(client, account)
        return client

    def options(self, stream: str, **extra: str) -> dict[str, str]:
        """The WITH options of a table of ``stream`` on this server."""
        return {"stream_name": stream, "aws_region": REGION, "endpoint_url": self.url,
                "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET, **extra}

    def create_stream(self, shards: int = 2) -> str:
        name = f"spate-test-{secrets.token_hex(4)}"
        client = self.client()
        client.create_stream(StreamName=name, ShardCount=shards)
        return name

    def put_json(self, stream: str, rows: list[dict[str, Any]]) -> None:
        """One record per row, spread over the shards by a hash of its id."""
        self.put_raw(stream, [json.dumps(row).encode() for row in rows],
                     [str(row.get("id", i)) for i, row in enumerate(rows)])

    def put_raw(self, stream: str, data: list[bytes], keys: list[str] | None = None) -> None:
        keys = keys or [str(i) for i in range(len(data))]
        entries = [{"Data": d, "PartitionKey": k} for d, k in zip(data, keys, strict=True)]
        for first in range(0, len(entries), 500):
            self.client().put_records(StreamName=stream, Records=entries[first:first + 500])

    def read_all(self, stream: str) -> list[dict[str, Any]]:
        """Every record of every shard (from its beginning), shard by shard."""
        client = self.client()
        records: list[dict[str, Any]] = []
        for shard in client.list_shards(StreamName=stream)["Shards"]:
            iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                                 ShardIteratorType="TRIM_HORIZON")
            page = client.get_records(ShardIterator=iterator["ShardIterator"], Limit=10_000)
            records.extend(page["Records"])
        return records


def _in_account(client: Any, account: str) -> None:
    def add_header(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = account

    client.meta.events.register("before-sign.*.*", add_header)


def serve_kinesis() -> Iterator[KinesisServer]:
    """moto's server until the generator closes: ``yield from`` it in a fixture."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                "-p", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert process.poll() is None, "moto's server did not start"
                assert time.monotonic() < deadline, "moto's server did not start in 30 s"
                time.sleep(0.1)
        yield KinesisServer(f"http://127.0.0.1:{port}", port)
    finally:
        process.terminate()
        process.wait(10)
