"""Memory tables of one pipeline: declared, written once, then read like views.

A memory table's rows are its one ``INSERT INTO`` query's rows, cast by
position to its declared columns.  Readers inline that query (see
:mod:`.scopes`), so nothing is materialised between queries: each reader runs
it natively on the epoch's (shared, cached) source batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from spate.engine.planner.catalog import MemoryTable
from spate.engine.planner.positions import SourceText


@dataclass
class MemoryTables:
    """The pipeline's memory tables and which of them an INSERT INTO has written."""

    declared: dict[str, MemoryTable] = field(default_factory=dict)
    #: name -> the query a reader inlines
    written: dict[str, exp.Query] = field(default_factory=dict)

    @property
    def unwritten(self) -> frozenset[str]:
        return frozenset(self.declared.keys() - self.written.keys())

    def write(self, name: str, query: exp.Query, output_columns: tuple[str, ...],
              target: exp.Expr, text: SourceText, fallback: int) -> None:
        """Record the INSERT INTO ``name`` whose (planned) ``query`` gives ``output_columns``."""
        if name in self.written:
            raise text.error(f"memory table '{name}' is written twice: only one INSERT INTO "
                             "may write a memory table", target, fallback)
        columns = self.declared[name].columns
        if columns is None:
            self.written[name] = query.copy()
            return
        if len(columns) != len(output_columns):
            offset = text.offset_of(query, fallback)
            raise text.error_at(
                f"INSERT INTO {name} gives {len(output_columns)} columns but memory table "
                f"'{name}' declares {len(columns)} ({', '.join(c for c, _ in columns)})",
                text.keyword_before(offset, ("SELECT",), offset))
        # Columns go by position and take the declared types, as for a sink.
        items = [exp.alias_(exp.Cast(this=exp.column(source, quoted=True), to=kind.copy()),
                            column)
                 for source, (column, kind) in zip(output_columns, columns, strict=True)]
        inner = exp.Subquery(this=_named_outputs(query, output_columns), alias=exp.TableAlias(
            this=exp.to_identifier(f"__spate_{name}")))
        self.written[name] = exp.select(*items).from_(inner)


def _named_outputs(query: exp.Query, output_columns: tuple[str, ...]) -> exp.Query:
    """A copy of ``query`` whose unnamed outputs (``UNNEST(tags)``, ``a + 1``) carry the
    names the planner gave them, so the casting SELECT above can name them too."""
    query = query.copy()
    first: exp.Expr = query
    while isinstance(first, exp.Union | exp.Subquery):  # a UNION ALL takes its first names
        first = first.this
    if not isinstance(first, exp.Select) or len(first.expressions) != len(output_columns) \
            or any(isinstance(item, exp.Star) or item.find(exp.Star) for item in first.expressions):
        return query
    first.set("expressions", [
        item if isinstance(item, exp.Alias | exp.Column) else exp.alias_(item, name, quoted=True)
        for item, name in zip(first.expressions, output_columns, strict=True)])
    return query
