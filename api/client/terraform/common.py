"""What the resources share: their base class, API errors as Terraform diagnostics, an
object type."""

from __future__ import annotations

import json
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tf.iface import Resource
from tf.types import TfType, Unknown
from tf.utils import Diagnostics

from spate.api.client.sdk import ClientError, SpateClient

if TYPE_CHECKING:
    from spate.api.client.terraform.provider import SpateProvider


def api_path(*parts: str) -> str:
    """The API path of ``parts``, each quoted (a name may hold any character)."""
    return "/" + "/".join(quote(part, safe="") for part in parts)


def absent(error: ClientError) -> bool:
    """Whether the API said the object is not there (it was deleted outside Terraform)."""
    return error.status == 404


class ApiResource(Resource):  # type: ignore[misc]
    """A resource the provider's API client reads and writes."""

    def __init__(self, provider: SpateProvider) -> None:
        self.provider = provider

    @property
    def client(self) -> SpateClient:
        return self.provider.client

    def get_if_present(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``; None when the API has none there."""
        try:
            found: dict[str, Any] = self.client.get(path)
        except ClientError as error:
            if absent(error):
                return None
            raise
        return found

    def delete_if_present(self, path: str, **params: Any) -> None:
        """Delete the object at ``path``; one already gone is fine."""
        try:
            self.client.delete(path, **params)
        except ClientError as error:
            if not absent(error):
                raise


def report(diags: Diagnostics, error: ClientError, path: list[str] | None = None) -> None:
    """One diagnostic per problem the API named: SQL errors at their line and column
    (on ``sql``), everything else as the API's message (on ``path``)."""
    located = [d for d in error.details if isinstance(d, dict) and "line" in d]
    if error.code == "invalid_sql" and located:
        for detail in located:
            diags.add_error(f"Invalid SQL at line {detail['line']}, column {detail.get('column')}",
                            str(detail.get("message", error.message)), path=["sql"])
        return
    code = f" ({error.code})" if error.code else ""
    lines = [error.message]
    for detail in error.details:
        if isinstance(detail, dict) and "message" in detail:
            where = detail.get("location") or detail.get("option") or ""
            lines.append(f"{where}: {detail['message']}" if where else str(detail["message"]))
        elif detail:
            lines.append(json.dumps(detail, sort_keys=True))
    text = "\n".join(lines)
    diags.add_error(f"Spate API error{code}", text, path=path)


class api_errors:  # noqa: N801 - used as a statement: ``with api_errors(diags):``
    """Turn what the API refused, and any other failure, into diagnostics (never a
    traceback); the statement after the block runs when one was caught."""

    def __init__(self, diags: Diagnostics, path: list[str] | None = None) -> None:
        self.diags = diags
        self.path = path

    def __enter__(self) -> api_errors:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> bool:
        if isinstance(error, ClientError):
            report(self.diags, error, self.path)
            return True
        if isinstance(error, Exception):
            self.diags.add_error("Spate provider error", f"{type(error).__name__}: {error}",
                                 path=self.path)
            return True
        return False


class Object(TfType):  # type: ignore[misc]
    """A Terraform object of named, typed attributes (a Python dict)."""

    def __init__(self, attributes: dict[str, TfType]) -> None:
        self.attributes = attributes

    def encode(self, value: Any) -> Any:
        if value is None or value is Unknown:
            return value
        return {k: t.encode(value.get(k)) for k, t in self.attributes.items()}

    def decode(self, value: Any) -> Any:
        if value is None or value is Unknown:
            return value
        return {k: t.decode(value.get(k)) for k, t in self.attributes.items()}

    def tf_type(self) -> bytes:
        inner = ",".join(f'"{k}":{t.tf_type().decode()}' for k, t in self.attributes.items())
        return f'["object",{{{inner}}}]'.encode()


def known(value: Any) -> bool:
    return value is not None and value is not Unknown
