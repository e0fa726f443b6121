"""Where a Kinesis table's requests go, and with which credentials.

Every client is built from the table's own options and nothing else: the
access key, secret and session token of its connection profile, its region
and its endpoint. boto3's default chain (environment variables, ``~/.aws``,
instance metadata) is never consulted: the botocore session of
:func:`..core.aws.client` reads no environment variable and no configuration
file, so a server's own AWS identity cannot leak into a tenant's job.

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

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from spate.engine.connectors import core
from spate.engine.connectors.core import aws
from spate.engine.connectors.core.egress import unreachable
from spate.engine.connectors.core.errors import ConnectorError

# The options a Kinesis endpoint is made of: its stream, and the AWS options every
# connector reaching AWS shares (:mod:`..core.aws`), as a Kinesis table needs them.
STREAM_NAME = core.option("stream_name", core.BOTH, "the stream", required=True)
AWS_REGION = aws.AWS_REGION.described("e.g. `us-east-1`; the endpoint is then "
                                      "`https://kinesis.<region>.amazonaws.com`", required=True)
AWS_ACCESS_KEY_ID = aws.AWS_ACCESS_KEY_ID.described(aws.AWS_ACCESS_KEY_ID.description,
                                                    required=True)
AWS_SECRET_ACCESS_KEY = aws.AWS_SECRET_ACCESS_KEY.described(
    aws.AWS_SECRET_ACCESS_KEY.description, required=True)
AWS_SESSION_TOKEN = aws.AWS_SESSION_TOKEN
ENDPOINT_URL = aws.ENDPOINT_URL.described("`http(s)://host[:port]` of a Kinesis-compatible "
                                          "server", default_text="the region's AWS endpoint")
#: The credentials, in the order a boto3 session takes them.
AWS_CREDENTIALS = (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)

#: Error codes AWS answers for keys it does not accept.
_CREDENTIAL_ERRORS = frozenset({
    "UnrecognizedClientException", "InvalidSignatureException", "AccessDeniedException",
    "ExpiredTokenException", "IncompleteSignature", "MissingAuthenticationToken",
    "InvalidClientTokenId", "SignatureDoesNotMatch",
})


@dataclass(frozen=True)
class KinesisEndpoint(aws.AwsAccess):
    """A stream, and where and as whom a table's requests to it go."""

    stream_name: str

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


def regional_endpoint(region: str) -> str:
    """AWS's Kinesis endpoint of ``region``."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://kinesis.{region}.{suffix}"


def check_planned(endpoint: KinesisEndpoint, boundary: core.Boundary) -> None:
    """At planning: refuse an endpoint the tenant's egress policy plainly refuses."""
    if boundary.egress is not None:
        host, port = endpoint.host_port
        boundary.egress.check_literal(host, port, option=_endpoint_option(endpoint))


def _endpoint_option(endpoint: KinesisEndpoint) -> str:
    return (AWS_REGION.name if endpoint.endpoint_url == regional_endpoint(endpoint.region)
            else ENDPOINT_URL.name)


def connect(endpoint: KinesisEndpoint, boundary: core.Boundary) -> Any:
    """A Kinesis client of ``endpoint``'s stream, through ``boundary``'s egress policy."""
    return aws.client("kinesis", endpoint, boundary, _endpoint_option(endpoint))


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
