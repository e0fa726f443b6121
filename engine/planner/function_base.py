"""What the scalar function library is made of: a table entry per function, and the
helpers its translators share (argument checks, Spark calls by name)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlglot import exp

from spate.engine.planner.errors import PlanningError
from spate.engine.planner.positions import SourceText


@dataclass
class Translation:
    """What a translator needs besides the call: where errors point, and ``now``."""

    text: SourceText
    fallback: int
    pipeline_start: datetime

    def error(self, message: str, node: exp.Expr) -> PlanningError:
        return self.text.error(message, node, self.fallback)


Translator = Callable[[exp.Func, Translation], exp.Expr]


@dataclass(frozen=True)
class Function:
    """One supported function: its family, its Spark form, and how to get there."""

    name: str
    family: str
    spark: str
    #: None: the parsed node's own Spark SQL is already the native built-in.
    translate: Translator | None = field(default=None, compare=False)
    note: str = ""


def args_of(node: exp.Func) -> list[exp.Expr]:
    """The call's arguments in written order (Anonymous keeps them in ``expressions``)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    return [v for v in (node.args.get(k) for k in node.arg_types) if isinstance(v, exp.Expr)]


def arity(node: exp.Func, ctx: Translation, name: str, low: int, high: int) -> list[exp.Expr]:
    args = args_of(node)
    if not low <= len(args) <= high:
        wanted = str(low) if low == high else f"{low} to {high}"
        raise ctx.error(f"{name}() takes {wanted} argument(s), got {len(args)}", node)
    return args


def call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def string_literal(node: exp.Expr, ctx: Translation, what: str) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise ctx.error(f"{what} must be a string literal", node)
    return str(node.name)


def rename(spark_name: str) -> Translator:
    """A call of the same arguments under Spark's name for the function."""
    return lambda node, _ctx: call(spark_name, *args_of(node))
