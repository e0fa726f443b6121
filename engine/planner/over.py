"""SQL window functions, ``f(...) OVER (PARTITION BY <window> [ORDER BY ...])``
(docs/sql/windows.md): the top-N-per-window pattern.

The input must be TUMBLE/HOP-windowed and PARTITION BY must hold its window
column.  All rows of a window reach this SELECT in one epoch (the one whose
watermark closed the window), so Spark computes the function natively over
the epoch's rows, partitioned by the window: no state is needed.
"""

from __future__ import annotations

from sqlglot import exp

from spate.engine.planner.context import QueryContext, Scope, own_nodes
from spate.engine.planner.plan import Stream


def over_calls(select: exp.Select) -> list[exp.Window]:
    return [n for n in own_nodes(select) if isinstance(n, exp.Window)]


def check_over(select: exp.Select, scopes: list[Scope], source: Stream,
               ctx: QueryContext) -> None:
    """The rules of docs/sql/windows.md for a SELECT using OVER; raises located errors."""
    calls = over_calls(select)
    if not calls:
        return
    first = calls[0]
    if len(scopes) > 1:
        raise ctx.error("a window function cannot be used in a SELECT with a JOIN; join in "
                        "a subquery first", first)
    if source.window is None or source.updating:
        raise ctx.error("window functions (OVER) need TUMBLE- or HOP-windowed input: read a "
                        "windowed aggregate and PARTITION BY its window column", first)
    if source.window.kind == "session":
        raise ctx.error("window functions (OVER) need TUMBLE or HOP input, not SESSION",
                        first)
    for call in calls:
        if call.args.get("alias") and not call.args.get("partition_by"):
            raise ctx.error("named windows (WINDOW w AS ...) are not supported", call)
        spec = (call.args.get("partition_by"), call.args.get("order"), call.args.get("spec"))
        if spec != (first.args.get("partition_by"), first.args.get("order"),
                    first.args.get("spec")):
            raise ctx.error("a SELECT may use one OVER (...) specification; compute others "
                            "in another subquery", call)
    partition = first.args.get("partition_by") or []
    windows = [p for p in partition if isinstance(p, exp.Column)
               and p.name.lower() in source.window_columns]
    if len(windows) != 1:
        names = ", ".join(sorted(source.window_columns))
        raise ctx.error(f"OVER needs PARTITION BY the input's window column ({names}) "
                        "exactly once", partition[0] if partition else first)
