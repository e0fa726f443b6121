"""Bodies of the connection-profiles and connection-tables resources.

Secrets are write-only: requests carry them in ``secrets``; responses list the
secret option names with a ``"********"`` marker and never a value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from spate.api.http.schemas.common import Name, StrictModel
from spate.api.models import NAME_LENGTH

MAX_OPTIONS = 100
MAX_FIELDS = 500

#: A table's name is an SQL identifier, so pipelines can name it unquoted.
TABLE_NAME_PATTERN = rf"^[a-z_][a-z0-9_]{{0,{NAME_LENGTH - 1}}}$"
TableName = Annotated[str, Field(
    pattern=TABLE_NAME_PATTERN, max_length=NAME_LENGTH,
    description="an SQL identifier: lower-case letters, digits and '_'; not starting with a "
                "digit", examples=["orders"])]
Connector = Annotated[str, Field(min_length=1, max_length=NAME_LENGTH,
                                 description="a connector name, e.g. single_file",
                                 examples=["single_file"])]
OptionName = Annotated[str, StringConstraints(min_length=1, max_length=100,
                                              pattern=r"^[A-Za-z0-9_.-]+$")]
OptionValue = Annotated[str, Field(max_length=4096)] | int | float | bool
SecretValue = Annotated[str, Field(max_length=4096)]
Config = Annotated[dict[OptionName, OptionValue], Field(
    max_length=MAX_OPTIONS,
    description="WITH options but connector; credentials (password, token, …) are kept "
                "secret even here")]
Secrets = Annotated[dict[OptionName, SecretValue], Field(
    max_length=MAX_OPTIONS,
    description="options stored encrypted and never returned (write-only)")]
Masked = Annotated[dict[str, str], Field(
    description="secret options that are set, each shown as \"********\"")]


class ConnectionProfileCreate(StrictModel):
    name: Name
    connector: Connector
    config: Config = Field(default_factory=dict)
    secrets: Secrets = Field(default_factory=dict)


class ConnectionProfileUpdate(StrictModel):
    """Options to set (a value) or remove (null); options left out keep their values."""

    config: Annotated[dict[OptionName, OptionValue | None],
                      Field(max_length=MAX_OPTIONS)] = Field(default_factory=dict)
    secrets: Annotated[dict[OptionName, SecretValue | None],
                       Field(max_length=MAX_OPTIONS)] = Field(default_factory=dict)


class ConnectionProfilePublic(BaseModel):
    id: str
    name: str
    connector: str
    config: dict[str, str]
    secrets: Masked
    created_at: datetime
    updated_at: datetime


class FieldSchema(StrictModel):
    """One column of a connection table."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=NAME_LENGTH,
                                           pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    type: Annotated[str, StringConstraints(min_length=1, max_length=1000)] = Field(
        description="an SQL column type: BIGINT, TEXT, TIMESTAMP, DECIMAL(10, 2), "
                    "STRUCT<a INT>, INT[], …")
    nullable: bool = True


class ConnectionTableCreate(StrictModel):
    name: TableName
    connector: Connector
    profile: Name | None = Field(None, description="a connection profile whose options the "
                                                   "table starts from (its own win)")
    config: Config = Field(default_factory=dict)
    secrets: Secrets = Field(default_factory=dict)
    fields: Annotated[list[FieldSchema], Field(max_length=MAX_FIELDS)] = Field(
        default_factory=list)


class ConnectionTablePublic(BaseModel):
    id: str
    name: str
    connector: str
    profile: str | None
    role: str = Field(description="source or sink")
    bounded: bool = Field(description="a source that ends by itself")
    config: dict[str, str]
    secrets: Masked
    fields: list[FieldSchema]
    created_at: datetime
    updated_at: datetime


class ConnectionCheck(BaseModel):
    """The result of a connectivity/validation check."""

    ok: bool
    message: str
