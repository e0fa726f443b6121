"""Body of ``GET /connectors``: the connectors a table's ``WITH (connector = …)`` may name."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ConnectorPublic(BaseModel):
    name: str
    roles: list[str] = Field(description="what tables of it can be: source, sink or both")


class ConnectorList(BaseModel):
    items: list[ConnectorPublic]
