"""Keyset pagination: ``limit`` and an opaque ``cursor``, ordered by id (creation time).

A page holds at most ``limit`` items and, when more follow, a ``next_cursor``
to pass back as ``cursor``. Rows created after a listing began appear on a
later page; none is skipped or repeated.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Annotated, Generic, Self, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field

from spate.api.http.errors import BadRequestError
from spate.api.ids import is_id

DEFAULT_LIMIT = 50
MAX_LIMIT = 200

LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="most items per page")]
CursorQuery = Annotated[
    str | None,
    Query(max_length=200, description="next_cursor of the previous page; omit for the first"),
]


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing."""

    items: list[T]
    next_cursor: str | None = Field(
        None, description="pass as `cursor` for the next page; null on the last page",
    )

    @classmethod
    def of_rows(cls, rows: Sequence[object], next_cursor: str | None) -> Self:
        """The page of ``rows`` (as a repository lists them), each read into the item
        model from its attributes: ``Page[JobEventPublic].of_rows(rows, next_cursor)``."""
        return cls.model_validate({"items": rows, "next_cursor": next_cursor},
                                  from_attributes=True)


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": last_id}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The id a page starts after; a cursor not made by this API is a 400."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))["after"]
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
        after = None
    if not isinstance(after, str) or not is_id(after):
        raise BadRequestError("invalid cursor: pass the next_cursor of a previous page")
    return after
