"""Where file connectors keep files: a local folder or an S3 bucket/prefix.

A :class:`Store` lists, reads and writes files named relative to its root, and
stages files in two phases for sinks that publish an epoch only once the engine
committed it: :meth:`Store.stage` puts a file where nobody reading the final
names sees it, :meth:`Store.publish` makes it appear under its final name in one
atomic step, :meth:`Store.discard_staged` drops everything staged and not
published.

- Local: a file is staged under ``<root>/.spate-pending/<epoch>/<name>`` (the same
  file system as its final place) and published with ``os.replace``. Every local
  root went through the tenant's :meth:`Boundary.resolve_path` first.
- S3: a file is staged as a multipart upload whose one part is uploaded but which
  is not completed (invisible to readers); publishing completes it. The client is
  built from the table's own options only (keys, region, endpoint), never from the
  server's AWS configuration, and its endpoint passes the tenant's egress policy
  (:func:`spate.engine.connectors.core.aws.client`, as for Kinesis).

Names whose path has a part starting with ``.`` or ``_`` are not listed: they are
staging areas and markers of writers (ours and Spark's or Hadoop's ``_SUCCESS``).
"""

from __future__ import annotations

import os
import re
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from spate.engine.connectors import core
from spate.engine.connectors.core import aws
from spate.engine.connectors.core.aws import check_endpoint_url, check_keys, check_region
from spate.engine.connectors.core.egress import unreachable
from spate.engine.connectors.core.errors import ConnectorError

PENDING_DIR = ".spate-pending"
S3_SCHEME = "s3://"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")

# The WITH options of a location. The s3:// ones have the same names as the kinesis and
# delta connectors', so one AWS connection profile serves them all.
PATH = core.option("path", core.BOTH, "a folder (in the Spate service: relative to the tenant's "
                   "storage root) or `s3://bucket/prefix`", required=True)
AWS_REGION = aws.AWS_REGION.described("the bucket's AWS region, e.g. `us-east-1`",
                                      required_when="with `s3://` paths")
AWS_ACCESS_KEY_ID = aws.AWS_ACCESS_KEY_ID.described(aws.AWS_ACCESS_KEY_ID.description,
                                                    required_when="with `s3://` paths")
AWS_SECRET_ACCESS_KEY = aws.AWS_SECRET_ACCESS_KEY.described(
    aws.AWS_SECRET_ACCESS_KEY.description, required_when="with `s3://` paths")
AWS_SESSION_TOKEN = aws.AWS_SESSION_TOKEN
ENDPOINT_URL = aws.ENDPOINT_URL.described("`http(s)://host[:port]` of an S3-compatible "
                                          "server (path-style requests)",
                                          default_text="`https://s3.<region>.amazonaws.com`")
S3_OPTIONS = (AWS_REGION, ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
              AWS_SESSION_TOKEN)

#: The fields of an :class:`S3Location` that travel apart from the others (secrets).
SECRET_FIELDS = ("secret_access_key", "session_token")
_CREDENTIAL_ERRORS = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                                "ExpiredToken", "InvalidToken"})


@dataclass(frozen=True)
class FileEntry:
    """A listed file: its name relative to the root, size and modification time."""

    name: str
    size: int
    mtime_ns: int


def hidden(name: str) -> bool:
    """Whether a relative name is a writer's private file (not data)."""
    return any(part.startswith((".", "_")) for part in name.split("/"))


@dataclass(frozen=True)
class S3Location(aws.AwsAccess):
    """A bucket and prefix, with the endpoint and keys to reach it."""

    bucket: str
    prefix: str

    @property
    def shown(self) -> str:
        """``s3://bucket/prefix`` for messages (no credential)."""
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    def to_dict(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "prefix": self.prefix, "region": self.region,
                "endpoint_url": self.endpoint_url, "access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key,
                "session_token": self.session_token}


def parse_location(path: str, options: core.OptionReader, boundary: core.Boundary
                   ) -> str | S3Location:
    """``path`` as a local absolute path (through the boundary) or an S3 location, with
    the S3 options (:data:`S3_OPTIONS`) of ``options``."""
    given = path.strip()
    if not given.startswith(S3_SCHEME):
        for spec in S3_OPTIONS:
            if options.string(spec) is not None:
                raise ConnectorError(f"option '{spec.name}' applies to 's3://' paths only; "
                                     f"path '{given}' is local", option=spec.name)
        return boundary.resolve_path(given)
    bucket, _, prefix = given.removeprefix(S3_SCHEME).partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise ConnectorError(f"path '{given}' must be 's3://bucket[/prefix]' with a valid "
                             "bucket name", option=PATH.name)
    prefix = prefix.strip("/")
    if ".." in prefix.split("/"):
        raise ConnectorError("an S3 path must not contain '..'", option=PATH.name)
    region = check_region(options.string(AWS_REGION) or "")
    key_id, secret = check_keys(options.string(AWS_ACCESS_KEY_ID),
                                options.string(AWS_SECRET_ACCESS_KEY), "an 's3://' path")
    url = options.string(ENDPOINT_URL)
    endpoint = check_endpoint_url(url) if url else f"https://s3.{region}.amazonaws.com"
    location = S3Location(bucket, prefix, region=region, endpoint_url=endpoint,
                          access_key_id=key_id, secret_access_key=secret,
                          session_token=options.string(AWS_SESSION_TOKEN) or None)
    if boundary.egress is not None:
        host, port = location.host_port
        boundary.egress.check_literal(host, port,
                                      option=ENDPOINT_URL.name if url else AWS_REGION.name)
    return location


class Store(ABC):
    """Files under one root (see the module's docstring)."""

    #: the root as the table named it, for messages
    shown: str

    @abstractmethod
    def list(self) -> list[FileEntry]:
        """Every data file under the root (hidden names left out), in no order."""

    @abstractmethod
    def read(self, name: str) -> bytes:
        """The bytes of file ``name``."""

    @abstractmethod
    def stage(self, epoch: int, name: str, data: bytes) -> str:
        """Write ``data`` for ``name``, invisible until published; returns a token."""

    @abstractmethod
    def publish(self, epoch: int, name: str, token: str) -> None:
        """Make a staged file visible under ``name``; already published: nothing."""

    @abstractmethod
    def discard_staged(self) -> None:
        """Drop every staged file not published."""

    @abstractmethod
    def reach(self) -> str:
        """Check the root can be listed; say what is there."""


class LocalStore(Store):
    """A folder of the local file system."""

    def __init__(self, root: str, shown: str) -> None:
        self.root = root
        self.shown = shown

    def _pending(self, epoch: int, name: str) -> str:
        return os.path.join(self.root, PENDING_DIR, str(epoch), name)

    def list(self) -> list[FileEntry]:
        entries: list[FileEntry] = []
        if not os.path.isdir(self.root):
            return entries
        for directory, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            for file in files:
                if file.startswith((".", "_")):
                    continue
                full = os.path.join(directory, file)
                if os.path.islink(full):
                    continue  # a link could lead out of the tenant's storage root
                stat = os.stat(full)
                name = os.path.relpath(full, self.root).replace(os.sep, "/")
                entries.append(FileEntry(name, stat.st_size, stat.st_mtime_ns))
        return entries

    def read(self, name: str) -> bytes:
        with open(os.path.join(self.root, name), "rb") as handle:
            return handle.read()

    def stage(self, epoch: int, name: str, data: bytes) -> str:
        pending = self._pending(epoch, name)
        os.makedirs(os.path.dirname(pending), exist_ok=True)
        with open(pending, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return ""

    def publish(self, epoch: int, name: str, token: str) -> None:
        del token
        pending, final = self._pending(epoch, name), os.path.join(self.root, name)
        if not os.path.exists(pending):
            if os.path.exists(final):
                return  # published before a crash
            raise ConnectorError(f"file {name} of epoch {epoch} under {self.shown} was "
                                 "neither staged nor published: it was removed outside Spate",
                                 option=PATH.name)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.replace(pending, final)

    def discard_staged(self) -> None:
        shutil.rmtree(os.path.join(self.root, PENDING_DIR), ignore_errors=True)

    def reach(self) -> str:
        if not os.path.isdir(self.root):
            raise ConnectorError(f"directory {self.shown} does not exist", option=PATH.name)
        files = len(self.list())
        return f"directory {self.shown}: {files} file{'' if files == 1 else 's'}"


class S3Store(Store):
    """A bucket and prefix of S3 (or of a server speaking its API)."""

    def __init__(self, location: S3Location, boundary: core.Boundary) -> None:
        self.location = location
        self.shown = location.shown
        self.boundary = boundary
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """Sinks' tasks take the store to the executors, each to build its own client."""
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect(self.location, self.boundary)
        return self._client

    def _key(self, name: str) -> str:
        return f"{self.location.prefix}/{name}" if self.location.prefix else name

    def _root(self) -> str:
        return f"{self.location.prefix}/" if self.location.prefix else ""

    def list(self) -> list[FileEntry]:
        root = self._root()
        entries: list[FileEntry] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.location.bucket, Prefix=root)
            for page in pages:
                for item in page.get("Contents", []):
                    name = item["Key"][len(root):]
                    if name and not name.endswith("/") and not hidden(name):
                        stamp = item["LastModified"].timestamp()
                        entries.append(FileEntry(name, int(item["Size"]),
                                                 int(round(stamp * 1000)) * 1_000_000))
        except Exception as error:  # noqa: BLE001 - boto3's errors, told without secrets
            raise self.failure(error) from None
        return entries

    def read(self, name: str) -> bytes:
        try:
            body = self.client.get_object(Bucket=self.location.bucket, Key=self._key(name))
            data: bytes = body["Body"].read()
            return data
        except Exception as error:  # noqa: BLE001
            raise self.failure(error) from None

    def stage(self, epoch: int, name: str, data: bytes) -> str:
        del epoch
        bucket, key = self.location.bucket, self._key(name)
        try:
            upload = self.client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            etag = self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload,
                                           PartNumber=1, Body=data)["ETag"]
        except Exception as error:  # noqa: BLE001
            raise self.failure(error) from None
        return f"{upload} {etag}"

    def publish(self, epoch: int, name: str, token: str) -> None:
        upload, _, etag = token.partition(" ")
        bucket, key = self.location.bucket, self._key(name)
        try:
            self.client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "NoSuchUpload":
                raise self.failure(error) from None
            try:  # completed before a crash?
                self.client.head_object(Bucket=bucket, Key=key)
            except Exception:  # noqa: BLE001
                raise ConnectorError(
                    f"object {name} of epoch {epoch} under {self.shown} was neither staged "
                    "nor published: its upload was aborted outside Spate", option=PATH.name
                ) from None
        except Exception as error:  # noqa: BLE001
            raise self.failure(error) from None

    def discard_staged(self) -> None:
        try:
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.location.bucket, Prefix=self._root())
            for page in pages:
                for upload in page.get("Uploads", []):
                    self.client.abort_multipart_upload(
                        Bucket=self.location.bucket, Key=upload["Key"],
                        UploadId=upload["UploadId"])
        except Exception as error:  # noqa: BLE001
            raise self.failure(error) from None

    def reach(self) -> str:
        try:
            page = self.client.list_objects_v2(Bucket=self.location.bucket,
                                               Prefix=self._root(), MaxKeys=1000)
        except Exception as error:  # noqa: BLE001
            raise self.failure(error) from None
        count = page.get("KeyCount", 0)
        more = "+" if page.get("IsTruncated") else ""
        return (f"{self.shown} at {self.location.host_port[0]}:{self.location.host_port[1]}: "
                f"{count}{more} object{'' if count == 1 else 's'}")

    def failure(self, error: Exception) -> ConnectorError:
        """A boto3 failure as a :class:`ConnectorError` naming no secret."""
        if isinstance(error, ConnectorError):
            return error
        host, port = self.location.host_port
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                return ConnectorError(f"bucket '{self.location.bucket}' does not exist at "
                                      f"{host}:{port}", option=PATH.name)
            if code in _CREDENTIAL_ERRORS:
                return ConnectorError(f"{host}:{port} refused the credentials ({code}) for "
                                      f"{self.shown}; check {AWS_ACCESS_KEY_ID.name}, "
                                      f"{AWS_SECRET_ACCESS_KEY.name} and "
                                      f"{AWS_SESSION_TOKEN.name} in the connection profile",
                                      option=AWS_ACCESS_KEY_ID.name)
            return ConnectorError(f"{self.shown} at {host}:{port} answered {code}")
        if isinstance(error, BotoCoreError):
            return unreachable(f"S3 {self.shown}", host, port)
        raise error


def connect(location: S3Location, boundary: core.Boundary) -> Any:
    """An S3 client with the location's own keys, through the boundary's egress policy."""
    return aws.client("s3", location, boundary, ENDPOINT_URL.name,
                      s3={"addressing_style": "path"})


def open_store(root: str | S3Location, shown: str, boundary: core.Boundary) -> Store:
    """The store of a parsed location (:func:`parse_location`)."""
    if isinstance(root, S3Location):
        return S3Store(root, boundary)
    return LocalStore(root, shown)


def store_settings(root: str | S3Location) -> dict[str, Any]:
    """A location as plain settings (for executors): ``{"local": path}`` or ``{"s3": ...}``."""
    if isinstance(root, S3Location):
        return {"s3": root.to_dict()}
    return {"local": root}


def store_from_settings(settings: dict[str, Any], shown: str, boundary: core.Boundary) -> Store:
    if "s3" in settings:
        return S3Store(S3Location(**settings["s3"]), boundary)
    return LocalStore(settings["local"], shown)
