"""``UNNEST(array)`` in a SELECT list: one output row per array element.

The SELECT is rewritten to read a FROM subquery that explodes the array
natively in Spark (``SELECT *, explode(arr) AS __spate_unnest FROM ...``); every
``UNNEST(arr)`` of the list then names that column.  Because the exploded
rows keep all their input columns (event time included), a GROUP BY with a
window over the unnested values works unchanged.
"""

from __future__ import annotations

from sqlglot import exp

from spate.engine.planner.positions import SourceText

UNNEST_COLUMN = "__spate_unnest"


def check_unnest_placement(select: exp.Select, text: SourceText, fallback: int) -> None:
    """UNNEST only in the SELECT list, and of one distinct array."""
    for key in ("where", "group", "having"):
        part = select.args.get(key)
        node = part.find(exp.Explode) if isinstance(part, exp.Expr) else None
        if node is not None:
            raise text.error_at("UNNEST is only allowed in the SELECT list",
                                _keyword(node, text, fallback))
    _the_array(select, text, fallback)


def rewrite_unnest(select: exp.Select, scope_name: str, text: SourceText,
                   fallback: int) -> None:
    """Rewrite ``select`` (in place) so its UNNEST reads an exploded FROM subquery."""
    array = _the_array(select, text, fallback)
    if array is None:
        return
    from_ = select.args.get("from_")
    assert isinstance(from_, exp.From)  # name resolution required one
    inner = exp.select(exp.Star(), exp.alias_(exp.Explode(this=array.copy()), UNNEST_COLUMN))
    inner = inner.from_(from_.this.copy())
    where = select.args.get("where")
    if where is not None:
        inner.set("where", where.copy())  # filter before exploding: fewer rows
        select.set("where", None)
    select.set("from_", exp.From(this=exp.Subquery(
        this=inner, alias=exp.TableAlias(this=exp.to_identifier(scope_name or "__spate_u")))))
    select.set("expressions", [
        item.transform(lambda n: exp.column(UNNEST_COLUMN) if isinstance(n, exp.Explode) else n)
        for item in select.expressions])


def _the_array(select: exp.Select, text: SourceText, fallback: int) -> exp.Expr | None:
    found: exp.Expr | None = None
    for item in select.expressions:
        for node in item.find_all(exp.Explode):
            if found is None:
                found = node.this
            elif node.this != found:
                raise text.error_at(
                    "several UNNESTs in one SELECT: only one distinct array may be unnested "
                    f"per SELECT (found UNNEST({found.sql()}) and UNNEST({node.this.sql()}))",
                    _keyword(node, text, fallback))
    return found



def _keyword(node: exp.Explode, text: SourceText, fallback: int) -> int:
    """Offset of the ``UNNEST`` keyword opening ``node`` (sqlglot keeps no position for
    it): the last UNNEST token before the first positioned token of its argument."""
    offset = text.offset_of(node, fallback)
    starts = [t.start for t in text.tokens
              if t.start <= offset and t.text.upper() in ("UNNEST", "EXPLODE")]
    return starts[-1] if starts else offset
