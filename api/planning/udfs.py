"""Checking a tenant's UDF file for the API, and finding the pipelines that call a UDF:
both run in the planning pool's processes (:mod:`spate.api.planning.pool`).

A UDF file is checked as ``spate run --udf`` checks one — the engine's loader
reads its decorators and type hints with :mod:`ast` (the file never runs),
and the planner refuses a UDF named like a built-in — plus the service's one
rule: a UDF kept by the service is a file declaring one UDF, named as it, so
a pipeline calls it by the name it is stored under and two of a tenant's UDFs
never declare the same function. Parsing happens in a worker because a file
can be made expensive to parse, as SQL can.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType

from spate.engine.planner.dialect import Spate
from spate.engine.planner.functions import check_udf_names
from spate.engine.udf import UdfDefinitionError, UdfFile, UdfSignature, load_udfs

#: Tokens that may name a called function: ``ratio(`` and ``"ratio"(``.
_NAME_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER)


def udf_file(name: str, source: str) -> UdfFile:
    """The file a stored UDF is, for the planner and jobs: its errors and tracebacks
    name it ``<name>.py``."""
    return UdfFile(f"{name}.py", source)


@dataclass(frozen=True)
class UdfCheckRequest:
    """A UDF to check: the name it is stored under and its source text."""

    name: str
    source: str


@dataclass(frozen=True)
class UdfCheckAnswer:
    """Located problems (``message``, ``line``, ``column`` in the file), or the UDF's kind
    and signature when there are none."""

    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    kind: str | None = None
    signature: str | None = None

    @property
    def valid(self) -> bool:
        return not self.diagnostics


def check_udf(request: UdfCheckRequest) -> UdfCheckAnswer:
    """Check one UDF file (in a planning process)."""
    file = udf_file(request.name, request.source)
    try:
        registry = load_udfs(file.source, file.filename)
        check_udf_names(registry)
        signature = _the_one(request.name, list(registry), file.filename)
    except UdfDefinitionError as error:
        return UdfCheckAnswer([{"message": error.message, "line": error.line,
                                "column": error.column}])
    except (RecursionError, MemoryError):
        return UdfCheckAnswer([{"message": "the file is nested too deeply to read; simplify "
                                           "it", "line": 1, "column": 1}])
    return UdfCheckAnswer(kind=signature.kind, signature=signature.describe())


def _the_one(name: str, signatures: Sequence[UdfSignature], filename: str) -> UdfSignature:
    """The file's one UDF, named ``name``; any other is an error at its definition."""
    other = next((s for s in signatures if s.name != name), None)
    if other is not None:
        wanted = (f"this file is stored as UDF '{name}', so it must declare one UDF, "
                  f"named {name}")
        what = (f"it also declares UDF '{other.name}'" if len(signatures) > 1
                else f"it declares UDF '{other.name}'")
        raise UdfDefinitionError(f"{wanted}: {what}; store each UDF under its own name",
                                 filename, other.line, other.column)
    return signatures[0]


@dataclass(frozen=True)
class UdfCallersRequest:
    """A UDF's name, and the SQL texts of the pipelines that might call it."""

    name: str
    sql: Mapping[str, Sequence[str]]


def udf_callers(request: UdfCallersRequest) -> list[str]:
    """The pipelines whose SQL calls the UDF (in a planning process), by name.

    A call is the UDF's name followed by ``(`` among the SQL's tokens, so a
    column, a string or a comment of that name is not one. SQL that no longer
    tokenizes counts as calling it: refusing a delete is the safe mistake.
    """
    return sorted(pipeline for pipeline, texts in request.sql.items()
                  if any(_calls(text, request.name) for text in texts))


def _calls(sql: str, name: str) -> bool:
    try:
        tokens = Spate().tokenize(sql)
    except (SqlglotError, RecursionError):
        return True
    return any(token.token_type in _NAME_TOKENS and token.text.lower() == name
               and following.token_type == TokenType.L_PAREN
               for token, following in pairwise(tokens))
