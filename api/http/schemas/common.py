"""Field types and the request bodies' base, shared by the resources' schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from spate.api.models import NAME_LENGTH

NAME_PATTERN = rf"^[a-z][a-z0-9_-]{{0,{NAME_LENGTH - 1}}}$"

#: A client-chosen name: lower case, digits, '-' and '_', starting with a letter.
Name = Annotated[str, Field(
    pattern=NAME_PATTERN, max_length=NAME_LENGTH,
    description="lower-case letters, digits, '-' and '_'; starts with a letter",
    examples=["clicks-per-minute"],
)]

#: Free text for people, without control characters.
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100,
                                         pattern=r"^[^\x00-\x1f\x7f]+$")]


class StrictModel(BaseModel):
    """A request body, or a part of one: a field it does not declare is a 422 naming
    it, so a misspelt setting is never silently ignored."""

    model_config = ConfigDict(extra="forbid")
