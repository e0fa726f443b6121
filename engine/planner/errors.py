"""Planning errors: every one names a 1-based line and column of the SQL text."""

from __future__ import annotations


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
