"""The provider's data sources: the connectors SQL may use, the tenant's pipelines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tf.iface import Config, DataSource, ReadDataContext, State
from tf.schema import Attribute, Schema
from tf.types import List, Number, String

from spate.api.client.terraform.common import Object, api_errors

if TYPE_CHECKING:
    from spate.api.client.terraform.provider import SpateProvider

_CONNECTOR = Object({"name": String(), "roles": List(String())})
_PIPELINE = Object({"name": String(), "id": String(), "version": Number(),
                    "desired_state": String(), "state": String()})


class _Data(DataSource):  # type: ignore[misc]
    def __init__(self, provider: SpateProvider) -> None:
        self.provider = provider


class ConnectorsData(_Data):
    """``spate_connectors``: every connector, with its roles (source, sink)."""

    @classmethod
    def get_name(cls) -> str:
        return "connectors"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(attributes=[
            Attribute("connectors", List(_CONNECTOR), computed=True),
            Attribute("names", List(String()), computed=True),
        ])

    def read(self, ctx: ReadDataContext, config: Config) -> State | None:
        with api_errors(ctx.diagnostics):
            items = self.provider.client.get("/connectors")["items"]
            connectors = [{"name": c["name"], "roles": list(c["roles"])} for c in items]
            return {"connectors": connectors, "names": [c["name"] for c in connectors]}
        return None


class PipelinesData(_Data):
    """``spate_pipelines``: the tenant's pipelines (optionally those whose name starts
    with ``name_prefix``) with their version and state."""

    @classmethod
    def get_name(cls) -> str:
        return "pipelines"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(attributes=[
            Attribute("name_prefix", String(), optional=True),
            Attribute("pipelines", List(_PIPELINE), computed=True),
            Attribute("names", List(String()), computed=True),
        ])

    def read(self, ctx: ReadDataContext, config: Config) -> State | None:
        prefix = config.get("name_prefix")
        with api_errors(ctx.diagnostics):
            pipelines = [
                {"name": p["name"], "id": p["id"], "version": p["version"],
                 "desired_state": p["desired_state"],
                 "state": (p.get("job") or {}).get("state", "")}
                for p in self.provider.client.items("/pipelines", name_prefix=prefix)]
            return {"name_prefix": prefix, "pipelines": pipelines,
                    "names": [p["name"] for p in pipelines]}
        return None
