"""Planning errors: every one names a 1-based line and column of the SQL text."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PlanningError(Exception):
    """A pipeline's SQL cannot be planned; the message says what to change."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        """The diagnostic shape the CLI and the API report."""
        return {"message": self.message, "line": self.line, "column": self.column}


def did_you_mean(name: str, known: Iterable[str], shown: str = "{}") -> str:
    """`` (did you mean 'x'?)`` naming the known name closest to ``name``, or nothing.

    Most unknown names are typos of a known one, which a long list of every name
    hides. Names fold to lower case, so they are compared that way; ``shown`` is
    how to write the match (``"bids.{}"`` for a column of ``bids``).
    """
    close = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=1)
    return f" (did you mean '{shown.format(close[0])}'?)" if close else ""
