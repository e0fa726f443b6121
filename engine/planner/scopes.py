"""Named queries inlined where they are read: ``WITH`` CTEs, views and memory tables.

Every named query becomes a FROM subquery at each place it is read, so the
query the planner splits is one tree of SELECTs over source tables and the
stateless parts stay native Spark SQL.  A name resolves to the innermost
``WITH`` that defines it, then to a view or a written memory table; a CTE sees
only the CTEs defined before it, and a view only other views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from spate.engine.planner.positions import SourceText

_WITH_WORDS = ("WITH", "RECURSIVE")
#: ``table.meta`` key of a name that is none of these: the names it could have
#: meant (its CTEs, views and memory tables), for the planner's did-you-mean.
NAMES_META = "spate_names_in_scope"


@dataclass(frozen=True)
class Named:
    """A named query and the names its own body may read."""

    body: exp.Query
    scope: Mapping[str, Named]


@dataclass(frozen=True)
class NameScope:
    """What a query may read by name besides source tables."""

    names: Mapping[str, Named]
    #: memory tables declared but not yet written by an INSERT INTO
    unwritten: frozenset[str] = frozenset()


def view_scope(views: Mapping[str, exp.Query], memory: Mapping[str, exp.Query],
               unwritten: frozenset[str]) -> NameScope:
    """The names a pipeline's query may read: its views and written memory tables."""
    names: dict[str, Named] = {}
    for name, body in views.items():
        names[name] = Named(body, names)  # a view may read the views before it
    for name, body in memory.items():
        names[name] = Named(body, names)  # its INSERT's query, over views and earlier tables
    return NameScope(names, unwritten)


def inline_names(query: exp.Query, scope: NameScope, text: SourceText,
                 fallback: int) -> exp.Query:
    """``query`` (modified in place) with every CTE, view and memory table inlined."""
    return _Inliner(scope.unwritten, text, fallback).expand(query, scope.names, frozenset())


class _Inliner:
    def __init__(self, unwritten: frozenset[str], text: SourceText, fallback: int) -> None:
        self.unwritten = unwritten
        self.text = text
        self.fallback = fallback

    def expand(self, query: exp.Query, names: Mapping[str, Named],
               active: frozenset[str]) -> exp.Query:
        with_ = query.args.get("with_")
        if isinstance(with_, exp.With):
            names = self._ctes(with_, names)
            query.set("with_", None)
        self._replace(query, names, active)
        return query

    def _ctes(self, with_: exp.With, names: Mapping[str, Named]) -> dict[str, Named]:
        if with_.args.get("recursive"):
            offset = self.text.offset_of(with_, self.fallback)
            raise self.text.error_at(
                "recursive CTEs (WITH RECURSIVE) are not supported",
                self.text.keyword_before(offset, _WITH_WORDS, offset))
        scope = dict(names)
        for cte in with_.expressions:
            name = cte.alias.lower()
            if not isinstance(cte.this, exp.Query):
                raise self.text.error(f"CTE '{name}' needs a query", cte, self.fallback)
            # Its body sees only the CTEs before it: a CTE never reads itself.
            scope[name] = Named(cte.this, dict(scope))
        return scope

    def _replace(self, node: exp.Expr, names: Mapping[str, Named],
                 active: frozenset[str]) -> None:
        for child in list(node.iter_expressions()):
            if isinstance(child, exp.Query) and child.args.get("with_") is not None:
                self.expand(child, names, active)
            elif isinstance(child, exp.Table) and not child.args.get("db"):
                self._table(child, names, active)
            else:
                self._replace(child, names, active)

    def _table(self, table: exp.Table, names: Mapping[str, Named],
               active: frozenset[str]) -> None:
        name = table.name.lower()
        named = names.get(name)
        if named is None:
            table.meta[NAMES_META] = tuple(names)
            if name in self.unwritten:
                raise self.text.error(
                    f"memory table '{name}' is read before it is written: put its "
                    f"INSERT INTO {name} before the queries that read it", table, self.fallback)
            return
        if name in active:
            raise self.text.error(f"'{name}' refers to itself", table, self.fallback)
        body = self.expand(named.body.copy(), named.scope, active | {name})
        alias = table.alias or name
        table.replace(exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier(alias))))
