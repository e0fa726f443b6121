"""Window calls (TUMBLE, HOP, SESSION) and interval literals to microseconds."""

from __future__ import annotations

import re

from sqlglot import exp

from spate.engine.planner.plan import WindowSpec
from spate.engine.planner.positions import SourceText

WINDOW_FUNCTIONS = ("TUMBLE", "HOP", "SESSION")

_UNIT_MICROS = {
    "microsecond": 1, "microseconds": 1, "us": 1,
    "millisecond": 1_000, "milliseconds": 1_000, "ms": 1_000,
    "second": 1_000_000, "seconds": 1_000_000, "s": 1_000_000, "sec": 1_000_000,
    "minute": 60_000_000, "minutes": 60_000_000, "min": 60_000_000,
    "hour": 3_600_000_000, "hours": 3_600_000_000, "h": 3_600_000_000,
    "day": 86_400_000_000, "days": 86_400_000_000, "d": 86_400_000_000,
    "week": 604_800_000_000, "weeks": 604_800_000_000,
}
_CALENDAR_UNITS = {"month", "months", "year", "years", "mon", "mons"}
_PART = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


class IntervalError(ValueError):
    """An interval literal that is not a fixed, positive duration."""


def interval_micros(node: exp.Expr) -> int:
    """Microseconds of an ``INTERVAL`` literal; raises :class:`IntervalError`."""
    if not isinstance(node, exp.Interval):
        raise IntervalError("expected an interval literal such as INTERVAL '1' MINUTE")
    value = node.this.name if node.this is not None else ""
    unit_node = node.args.get("unit")
    unit = unit_node.name if isinstance(unit_node, exp.Expr) else ""
    text = f"{value} {unit}".strip()
    total = 0.0
    position = 0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None:
            raise IntervalError(f"cannot read interval '{text}'")
        amount, name = float(match.group(1)), match.group(2).lower()
        if name in _CALENDAR_UNITS:
            raise IntervalError("intervals cannot use months or years here "
                                "(they have no fixed length)")
        if name not in _UNIT_MICROS:
            raise IntervalError(f"unknown interval unit '{name}'")
        total += amount * _UNIT_MICROS[name]
        position = match.end()
    if total <= 0:
        raise IntervalError("a window interval must be positive")
    return int(total)


def _as_interval(node: exp.Expr) -> exp.Expr:
    """A string literal argument (``TUMBLE('5 seconds')``) read as the interval it spells."""
    if isinstance(node, exp.Literal) and node.is_string:
        return exp.Interval(this=exp.Literal.string(node.name))
    return node


def window_spec(call: exp.Anonymous, text: SourceText, fallback: int) -> WindowSpec:
    """The :class:`WindowSpec` of a TUMBLE/HOP/SESSION call; raises PlanningError."""
    name = call.name.upper()
    arguments = call.expressions
    expected = 2 if name == "HOP" else 1
    if len(arguments) != expected:
        raise text.error(f"{name} takes {expected} interval argument(s)", call, fallback)
    try:
        micros = [interval_micros(_as_interval(a)) for a in arguments]
    except IntervalError as error:
        raise text.error(f"{name}: {error}", call, fallback) from error
    if name == "TUMBLE":
        return WindowSpec("tumble", micros[0], micros[0])
    if name == "SESSION":
        return WindowSpec("session", 0, 0, gap_us=micros[0])
    slide, width = micros
    if width % slide != 0:
        raise text.error("HOP width must be an exact multiple of its slide (HOP(slide, width))",
                         call, fallback)
    kind = "tumble" if width == slide else "hop"
    return WindowSpec(kind, width, slide)
