"""What every connector reaching AWS shares (Kinesis, and S3 for filesystem's ``s3://``
paths and delta): the AWS options, declared once with the same names everywhere so one
AWS connection profile serves them all (each connector re-describes them as it needs
them), their checks, and a boto3 client built from a table's own keys with a session that
reads nothing of the host's, its endpoint passing the tenant's egress policy."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
import botocore.session
from botocore.config import Config

from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.errors import ConnectorError
from spate.engine.connectors.core.metadata import BOTH, option

AWS_REGION = option("aws_region", BOTH, "the AWS region, e.g. `us-east-1`")
AWS_ACCESS_KEY_ID = option("aws_access_key_id", BOTH, "the access key, best kept in a "
                           "connection profile")
AWS_SECRET_ACCESS_KEY = option("aws_secret_access_key", BOTH, "its secret")
AWS_SESSION_TOKEN = option("aws_session_token", BOTH, "for temporary credentials")
ENDPOINT_URL = option("endpoint_url", BOTH, "`http(s)://host[:port]` of an AWS-compatible "
                      "server", default_text="the region's AWS endpoint")

_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")
#: Seconds a request waits to connect, and for an answer.
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 30


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


def check_keys(key_id: str | None, secret: str | None, needed_by: str) -> tuple[str, str]:
    """The access key id (stripped) and secret; raises naming the first one missing, as
    ``needed_by`` needs it (``connector 'kinesis'``, ``an 's3://' path``)."""
    if not key_id or not secret:
        missing = AWS_ACCESS_KEY_ID.name if not key_id else AWS_SECRET_ACCESS_KEY.name
        raise ConnectorError(
            f"{needed_by} needs option '{missing}' (with '{AWS_ACCESS_KEY_ID.name}' and "
            f"'{AWS_SECRET_ACCESS_KEY.name}', and '{AWS_SESSION_TOKEN.name}' for temporary "
            "keys), best kept in a connection profile; Spate never uses the server's own AWS "
            "credentials", option=missing)
    return key_id.strip(), secret


@dataclass(frozen=True, kw_only=True)
class AwsAccess:
    """Where and as whom a table's AWS requests go, the part a Kinesis endpoint and an S3
    location share (secrets kept out of ``repr``)."""

    region: str
    #: the endpoint as the tenant wrote it, or the region's AWS endpoint
    endpoint_url: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def host_port(self) -> tuple[str, int]:
        """The endpoint's host and port (443 for https, else 80, when not given)."""
        parts = urlsplit(self.endpoint_url)
        return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def client(service: str, access: AwsAccess, boundary: Boundary, option: str,
           **config: Any) -> Any:
    """A boto3 client of ``service`` with ``access``'s own keys, its endpoint resolved
    through ``boundary``'s egress policy (a refusal names ``option``); ``config``: more
    botocore ``Config`` settings."""
    url = access.endpoint_url
    if boundary.egress is not None:
        host, port = access.host_port
        addresses = boundary.egress.resolve(host, port, option=option)
        url = at_address(url, addresses[0])
    session = boto3.Session(
        aws_access_key_id=access.access_key_id,
        aws_secret_access_key=access.secret_access_key,
        aws_session_token=access.session_token, region_name=access.region,
        botocore_session=isolated_session())
    settings = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                      retries={"max_attempts": 3, "mode": "standard"}, **config)
    return session.client(service, endpoint_url=url, verify=True, config=settings)


def isolated_session() -> botocore.session.Session:
    """A botocore session that reads no environment variable and no config file."""
    session = botocore.session.Session()
    for name, (config_name, _env, default, convert) in list(session.session_var_map.items()):
        session.session_var_map[name] = (config_name, None, default, convert)
    session.set_config_variable("config_file", os.devnull)
    session.set_config_variable("credentials_file", os.devnull)
    return session


def at_address(url: str, address: str) -> str:
    """``url`` with its host replaced by the checked ``address`` (plain http only)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return url
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, "", "", ""))
