"""A real S3-API server for the file connectors' tests: moto's, on a free port.

The server is the one :mod:`.kinesis_support` starts (moto's server speaks every
AWS API); this adds buckets, and the WITH options of a table on them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3

from tests.engine.connectors.kinesis.kinesis_support import KEY_ID, REGION, SECRET, serve_kinesis


@dataclass(frozen=True)
class S3Server:
    """moto's server, and a boto3 S3 client of it for the tests' own setup and checks."""

    url: str

    def client(self) -> Any:
        session = boto3.Session(aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                                region_name=REGION)
        return session.client("s3", endpoint_url=self.url)

    def create_bucket(self) -> str:
        name = f"spate-test-{secrets.token_hex(4)}"
        self.client().create_bucket(Bucket=name)
        return name

    def options(self, path: str, **extra: str) -> dict[str, str]:
        """The WITH options of a table at ``path`` (``s3://...``) on this server."""
        return {"path": path, "aws_region": REGION, "endpoint_url": self.url,
                "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET, **extra}

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                        Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def get(self, bucket: str, key: str) -> bytes:
        data: bytes = self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return data

    def uploads(self, bucket: str) -> list[str]:
        return [u["Key"] for u in self.client().list_multipart_uploads(Bucket=bucket)
                .get("Uploads", [])]


def serve_s3() -> Iterator[S3Server]:
    """moto's server until the generator closes: ``yield from`` it in a fixture."""
    for server in serve_kinesis():
        yield S3Server(server.url)
