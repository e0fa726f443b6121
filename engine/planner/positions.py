"""Maps sqlglot nodes back to line and column of the pipeline's SQL text."""

from __future__ import annotations

import bisect

from sqlglot import exp

from engine.planner.errors import PlanningError


class SourceText:
    """The pipeline text, able to turn character offsets into line/column."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(sql) if ch == "\n"]

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a 0-based character offset."""
        line_index = bisect.bisect_right(self._line_starts, offset) - 1
        return line_index + 1, offset - self._line_starts[line_index] + 1

    def offset_of(self, node: exp.Expression | None, fallback: int = 0) -> int:
        """Start offset of the first token of ``node`` that carries a position."""
        if node is None:
            return fallback
        starts = [
            sub.meta["start"]
            for sub in node.walk()
            if isinstance(sub, exp.Expression) and "start" in sub.meta
        ]
        return min(starts) if starts else fallback

    def error(
        self, message: str, node: exp.Expression | None, fallback: int = 0
    ) -> PlanningError:
        """A :class:`PlanningError` located at ``node`` (or ``fallback``)."""
        line, column = self.line_col(self.offset_of(node, fallback))
        return PlanningError(message, line, column)
