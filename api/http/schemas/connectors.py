"""Body of ``GET /connectors``: the connectors a table's ``WITH (connector = …)`` may name,
and the options each declares."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from spate.engine.connectors.core.metadata import KINDS


class ConnectorOption(BaseModel):
    """One WITH option a connector declares, as its declaration says (the same words as
    the SQL reference's option tables, which are generated from it)."""

    name: str
    roles: list[str] = Field(description="the roles of the tables that accept it: source, sink, "
                                         "lookup")
    secret: bool = Field(description="a credential: stored encrypted and never shown again")
    kind: Literal[KINDS] = Field(  # type: ignore[valid-type]
        description="the type of its values: text, integer, number, boolean, choice, "
                    "duration ('10s', '5 minutes') or size ('64MB')")
    required: bool = Field(description="whether every table of its roles must give it")
    required_when: str | None = Field(
        None, description="when only some tables must give it: which ones, in words")
    default: str | None = Field(
        None, description="the value an absent option has, as SQL would write it")
    default_text: str | None = Field(
        None, description="the default in words, when it is not one value")
    choices: list[str] = Field(default_factory=list,
                               description="the values a choice takes")
    description: str = Field(description="what it means (Markdown: `code` spans and links)")


class ConnectorPublic(BaseModel):
    name: str
    roles: list[str] = Field(description="what tables of it can be: source, sink or both")
    options: list[ConnectorOption] = Field(
        default_factory=list, description="the WITH options it declares, by name (a table's "
                                          "role is its 'type' option, where it has one)")


class ConnectorList(BaseModel):
    items: list[ConnectorPublic]
