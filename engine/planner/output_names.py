"""The names of a SELECT's output columns, unique as every query's output must be.

An item is named by its alias, by its column's name, or (at the top of a query)
by the expression as written in Spate's dialect.  Two items may share a name
only when they are columns of different tables of a join, as in
``SELECT * FROM a JOIN b ON ...`` where both tables have ``counter``: the later
ones are then renamed as DataFusion renames them where it drops the tables'
names, ``counter:1``, ``counter:2``, … (docs/sql/joins.md#columns-of-the-same-name).
Any other repeated name (two aliases, one column twice) is an error asking for
an alias.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from spate.engine.planner.context import QueryContext
from spate.engine.planner.dialect import written_name


def output_names(select: exp.Select, ctx: QueryContext, top: bool,
                 hidden: Collection[str]) -> list[str]:
    """The output column names of ``select``, renaming a join's repeated column names
    (and, at the top of a query, naming every item and leaving ``hidden`` columns out
    of the names)."""
    names: list[str] = []
    #: per name, the table each item so named is a column of ("" for any other item)
    tables: dict[str, list[str]] = {}
    items = []
    renamed = False
    for item in select.expressions:
        name = item.alias_or_name if isinstance(item, exp.Alias | exp.Column) else ""
        if not name:  # named as written in Spate's dialect: "payload -> 'k'", "UNNEST(tags)"
            name = written_name(item)
            if top:
                item = exp.alias_(item, name, quoted=True)
        name = name.lower() if not (isinstance(item, exp.Alias) and top) else name
        table = _table_of(item)
        if name in names:
            if not table or "" in tables[name] or table in tables[name]:
                raise ctx.error(f"output column name '{name}' appears twice; give each an "
                                "alias", item)
            tables[name].append(table)
            name = _free_name(name, names)
            item = exp.alias_(item, name, quoted=True)
            renamed = True
        tables.setdefault(name, []).append(table)
        if name in hidden and top:
            continue
        names.append(name)
        items.append(item)
    if top or renamed:
        select.set("expressions", items)
    return names


def _table_of(item: exp.Expr) -> str:
    """The table (or subquery) an unaliased column item belongs to, as written; ""."""
    return item.table.lower() if isinstance(item, exp.Column) and item.table else ""


def _free_name(name: str, taken: list[str]) -> str:
    """``name:1``, or the first of ``name:2``, ``name:3``, … not taken yet."""
    count = 1
    while f"{name}:{count}" in taken:
        count += 1
    return f"{name}:{count}"
