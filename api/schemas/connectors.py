"""Body of ``GET /connectors``: the connectors a table's ``WITH (connector = …)`` may name,
and the options each declares."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ConnectorOption(BaseModel):
    """One WITH option a connector declares (``engine/connectors/README.md`` documents
    what each means and takes)."""

    name: str
    roles: list[str] = Field(description="the roles of the tables that accept it: source, sink, "
                                         "lookup")
    secret: bool = Field(description="a credential: stored encrypted and never shown again")


class ConnectorPublic(BaseModel):
    name: str
    roles: list[str] = Field(description="what tables of it can be: source, sink or both")
    options: list[ConnectorOption] = Field(
        default_factory=list, description="the WITH options it declares, by name (a table's "
                                          "role is its 'type' option, where it has one)")


class ConnectorList(BaseModel):
    items: list[ConnectorPublic]
