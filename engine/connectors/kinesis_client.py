"""Where a Kinesis table's requests go, and with which credentials.

Every client is built from the table's own options and nothing else: the
access key, secret and session token of its connection profile, its region
and its endpoint. boto3's default chain (environment variables, ``~/.aws``,
instance metadata) is never consulted: the botocore session below reads no
environment variable and no configuration file, so a server's own AWS
identity cannot leak into a tenant's job.

The endpoint is always explicit: ``endpoint_url`` when given (a
Kinesis-compatible server), else the region's ``https://kinesis.<region>.
amazonaws.com``. Under an egress policy its host is resolved and checked
before the client is built; a plain ``http://`` endpoint is then connected to
at the checked address itself. An ``https://`` endpoint is connected to by
name, so that its certificate is verified against that name (a name that
resolves elsewhere between the check and the connect is not caught there: the
job's sandbox enforces the same policy again, from outside).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from spate.engine.connectors.boundary import Boundary
from spate.engine.connectors.egress import unreachable
from spate.engine.connectors.errors import ConnectorError
from spate.engine.connectors.metadata import BOTH, option

# The options a Kinesis endpoint is made of. The AWS ones are the same for every
# connector reaching AWS (delta and filesystem's s3:// paths re-describe them), so one
# AWS connection profile serves them all.
STREAM_NAME = option("stream_name", BOTH, "the stream", required=True)
AWS_REGION = option("aws_region", BOTH, "e.g. `us-east-1`; the endpoint is then "
                    "`https://kinesis.<region>.amazonaws.com`", required=True)
AWS_ACCESS_KEY_ID = option("aws_access_key_id", BOTH, "the access key, best kept in a "
                           "connection profile", required=True)
AWS_SECRET_ACCESS_KEY = option("aws_secret_access_key", BOTH, "its secret", required=True)
AWS_SESSION_TOKEN = option("aws_session_token", BOTH, "for temporary credentials")
ENDPOINT_URL = option("endpoint_url", BOTH, "`http(s)://host[:port]` of a Kinesis-compatible "
                      "server", default_text="the region's AWS endpoint")
#: The credentials, in the order a boto3 session takes them.
AWS_CREDENTIALS = (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)

_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")
#: Error codes AWS answers for keys it does not accept.
_CREDENTIAL_ERRORS = frozenset({
    "UnrecognizedClientException", "InvalidSignatureException", "AccessDeniedException",
    "ExpiredTokenException", "IncompleteSignature", "MissingAuthenticationToken",
    "InvalidClientTokenId", "SignatureDoesNotMatch",
})
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 30


@dataclass(frozen=True)
class KinesisEndpoint:
    """Where and as whom a table's requests go (secrets kept out of ``repr``)."""

    stream_name: str
    region: str
    #: the endpoint as the tenant wrote it, or the region's AWS endpoint
    endpoint_url: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.endpoint_url)
        default_port = 443 if parts.scheme == "https" else 80
        return parts.hostname or "", parts.port or default_port

    @property
    def shown(self) -> str:
        """``host:port`` for messages (never a credential)."""
        host, port = self.host_port
        return f"{host}:{port}"

    def to_dict(self) -> dict[str, Any]:
        """The settings shipped to executors (inside the job's own options)."""
        return {"stream_name": self.stream_name, "region": self.region,
                "endpoint_url": self.endpoint_url, "access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key,
                "session_token": self.session_token}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KinesisEndpoint:
        return cls(**data)


def check_region(region: str) -> str:
    """An AWS region name such as ``us-east-1``; raises naming ``aws_region``."""
    region = region.strip().lower()
    if not _REGION.fullmatch(region):
        raise ConnectorError(f"option '{AWS_REGION.name}' must be an AWS region such as "
                             f"'us-east-1', not '{region}'", option=AWS_REGION.name)
    return region


def check_endpoint_url(url: str) -> str:
    """``http(s)://host[:port]`` with nothing after it; raises naming ``endpoint_url``."""
    parts = urlsplit(url.strip())
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if (parts.scheme not in ("http", "https") or not parts.hostname or not port_ok
            or parts.username or parts.password or parts.path.strip("/")
            or parts.query or parts.fragment):
        raise ConnectorError(f"option '{ENDPOINT_URL.name}' must be 'http(s)://host[:port]' "
                             "with no credentials, path or query, e.g. "
                             "'https://kinesis.example:4567'", option=ENDPOINT_URL.name)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def regional_endpoint(region: str) -> str:
    """AWS's Kinesis endpoint of ``region``."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://kinesis.{region}.{suffix}"


def check_planned(endpoint: KinesisEndpoint, boundary: Boundary) -> None:
    """At planning: refuse an endpoint the tenant's egress policy plainly refuses."""
    if boundary.egress is not None:
        host, port = endpoint.host_port
        boundary.egress.check_literal(host, port, option=_endpoint_option(endpoint))


def _endpoint_option(endpoint: KinesisEndpoint) -> str:
    return (AWS_REGION.name if endpoint.endpoint_url == regional_endpoint(endpoint.region)
            else ENDPOINT_URL.name)


def _isolated_session() -> botocore.session.Session:
    """A botocore session that reads no environment variable and no config file."""
    session = botocore.session.Session()
    for name, (config_name, _env, default, convert) in list(session.session_var_map.items()):
        session.session_var_map[name] = (config_name, None, default, convert)
    session.set_config_variable("config_file", os.devnull)
    session.set_config_variable("credentials_file", os.devnull)
    return session


def connect(endpoint: KinesisEndpoint, boundary: Boundary) -> Any:
    """A Kinesis client of ``endpoint``'s stream, through ``boundary``'s egress policy."""
    url = endpoint.endpoint_url
    if boundary.egress is not None:
        host, port = endpoint.host_port
        addresses = boundary.egress.resolve(host, port, option=_endpoint_option(endpoint))
        url = _at_address(url, addresses[0])
    session = boto3.Session(
        aws_access_key_id=endpoint.access_key_id,
        aws_secret_access_key=endpoint.secret_access_key,
        aws_session_token=endpoint.session_token,
        region_name=endpoint.region, botocore_session=_isolated_session())
    config = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                    retries={"max_attempts": 3, "mode": "standard"})
    return session.client("kinesis", endpoint_url=url, verify=True, config=config)


def _at_address(url: str, address: str) -> str:
    """``url`` with its host replaced by the checked ``address`` (plain http only)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return url
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, "", "", ""))


def failure(error: Exception, endpoint: KinesisEndpoint, what: str) -> ConnectorError:
    """A boto3 failure as a :class:`ConnectorError` naming no secret."""
    if isinstance(error, ConnectorError):
        return error
    stream = f"kinesis stream '{endpoint.stream_name}'"
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            return ConnectorError(f"{what}: {stream} does not exist in region "
                                  f"{endpoint.region} at {endpoint.shown}; check "
                                  f"{STREAM_NAME.name} and {AWS_REGION.name}",
                                  option=STREAM_NAME.name)
        if code in _CREDENTIAL_ERRORS:
            return ConnectorError(f"{what}: {endpoint.shown} refused the credentials "
                                  f"({code}); check {AWS_ACCESS_KEY_ID.name}, "
                                  f"{AWS_SECRET_ACCESS_KEY.name} and {AWS_SESSION_TOKEN.name} "
                                  "in the connection profile", option=AWS_ACCESS_KEY_ID.name)
        return ConnectorError(f"{what}: {stream} at {endpoint.shown} answered {code}")
    if isinstance(error, EndpointConnectionError | BotoCoreError):
        host, port = endpoint.host_port
        return unreachable(f"{what}: {stream}", host, port)
    raise error
