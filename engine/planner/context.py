"""What the planning of one query shares across its modules: the SQL text for
located errors, the tables and names it may read, and the operators planned
so far."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.planner.catalog import Table
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.plan import Operator, Stream
from spate.engine.planner.positions import SourceText
from spate.engine.planner.scopes import NameScope

#: Keywords that open a clause; errors about a clause point at its first keyword.
CLAUSE_WORDS = ("JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL",
                "ORDER", "GROUP", "BY", "LIMIT")
#: ``select.meta`` key: the :class:`Stream` a SELECT's rows form.
STREAM_META = "spate_stream"
#: ``select.meta`` key: the :class:`Scope` list of a SELECT's FROM and JOIN items.
SCOPES_META = "spate_scopes"


@dataclass(frozen=True)
class Scope:
    """One FROM or JOIN item of a SELECT: the name its columns are qualified by."""

    name: str
    columns: tuple[str, ...]
    stream: Stream
    #: a lookup table (CREATE TEMPORARY TABLE): rows fetched per key, no event time
    lookup: bool = False
    #: the known types of its columns (a computed column's is not known)
    types: Mapping[str, T.DataType] = field(default_factory=dict)


@dataclass
class QueryContext:
    text: SourceText
    fallback: int
    tables: dict[str, Table]
    names: NameScope
    query_index: int
    sources: list[str] = field(default_factory=list)
    operators: list[Operator] = field(default_factory=list)

    def error(self, message: str, node: exp.Expr | None) -> PlanningError:
        return self.text.error(message, node, self.fallback)

    def error_at_keyword(self, message: str, node: exp.Expr,
                         words: tuple[str, ...]) -> PlanningError:
        """An error at the run of ``words`` keywords just before ``node``."""
        offset = self.text.offset_of(node, self.fallback)
        return self.text.error_at(message, self.text.keyword_before(offset, words, offset))

    def clause_error(self, message: str, node: exp.Expr) -> PlanningError:
        """An error at the keywords opening ``node`` (JOIN, ORDER BY, GROUP BY ...)."""
        return self.error_at_keyword(message, node, CLAUSE_WORDS)

    def operator_id(self, kind: str) -> str:
        """A new operator's id, stable for the same SQL: ``q<query>_<kind>[<n>]``.

        State is stored under it, so the first of a kind keeps the plain name.
        """
        base = f"q{self.query_index}_{kind}"
        taken = {o.operator_id for o in self.operators}
        if base not in taken:
            return base
        n = 2
        while f"{base}{n}" in taken:
            n += 1
        return f"{base}{n}"


def stream_of(node: exp.Expr) -> Stream:
    """The stream a planned SELECT (or UNION ALL of them, or subquery) produces."""
    if isinstance(node, exp.Subquery):
        return stream_of(node.this)
    if isinstance(node, exp.Union):
        left, right = stream_of(node.this), stream_of(node.expression)
        return Stream(updating=left.updating or right.updating,
                      window=left.window if left.window == right.window else None,
                      window_columns=left.window_columns & right.window_columns)
    stream = node.meta.get(STREAM_META)
    return stream if isinstance(stream, Stream) else Stream()


def branches(query: exp.Expr) -> Iterator[exp.Select]:
    """The SELECTs a query is made of: itself, or each branch of its UNION ALLs."""
    if isinstance(query, exp.Select):
        yield query
    elif isinstance(query, exp.Union | exp.Subquery):
        yield from branches(query.this)
        if isinstance(query, exp.Union):
            yield from branches(query.expression)


def scopes_of(select: exp.Select) -> list[Scope]:
    scopes = select.meta.get(SCOPES_META)
    return list(scopes) if scopes else []


def is_nested(select: exp.Expr) -> bool:
    """Whether ``select`` sits inside a FROM subquery (its rows feed another SELECT)."""
    parent = select.parent
    while parent is not None:
        if isinstance(parent, exp.Subquery):
            return True
        parent = parent.parent
    return False


def own_nodes(select: exp.Select) -> list[exp.Expr]:
    """Nodes of ``select`` itself (its list, join conditions, WHERE, GROUP BY, HAVING),
    not of the subqueries it reads."""
    parts: list[exp.Expr] = []
    for key in ("expressions", "where", "group", "having"):
        value = select.args.get(key)
        parts.extend(p for p in (value if isinstance(value, list) else [value])
                     if isinstance(p, exp.Expr))
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if isinstance(on, exp.Expr):
            parts.append(on)
    return [n for part in parts for n in part.walk() if isinstance(n, exp.Expr)]
