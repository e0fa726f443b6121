"""The scalar function library: every SQL function a query may call, mapped onto
Spark built-ins so that it runs as a native Spark expression (no Python per row).

:data:`FUNCTIONS` is the one table, keyed by the name a query writes.  Each
entry either keeps the node sqlglot parsed (its Spark form is already the
native built-in) or rewrites it.  :func:`translate_functions` applies the table
to a query and turns a call to anything else into a located PlanningError.
A pipeline's Python UDFs (:mod:`spate.engine.udf`) are callable too: their calls
are checked against the UDF's signature (argument count, and the types of
arguments whose type is evident: literals, casts, other UDFs' results).

``python -m spate.engine.planner.functions --markdown`` prints the table that
``engine/planner/FUNCTIONS.md`` holds.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from datetime import UTC, datetime
from weakref import WeakKeyDictionary

from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from spate.engine.planner.array_functions import ARRAY_FUNCTIONS, array_slice
from spate.engine.planner.dialect import Spate, written_name
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.function_base import Function, Translation, args_of
from spate.engine.planner.function_library import LIBRARY
from spate.engine.planner.json_functions import JSON_FUNCTIONS, json_cast
from spate.engine.planner.positions import SourceText
from spate.engine.planner.types import UnsupportedTypeError, spark_type
from spate.engine.planner.window import WINDOW_FUNCTIONS
from spate.engine.udf import UdfDefinitionError, UdfRegistry, UdfSignature, ValueType
from spate.engine.udf.signatures import AGGREGATE

#: Where the generated table lives, relative to the repository root.
DOCS_PATH = "engine/planner/FUNCTIONS.md"


#: The one table: the library's functions and the JSON ones, by the name a query writes.
FUNCTIONS: dict[str, Function] = {f.name: f for f in (*LIBRARY, *ARRAY_FUNCTIONS,
                                                       *JSON_FUNCTIONS)}

#: Functions of the dialect Spate has not implemented yet, and why or what to use instead.
NOT_YET: dict[str, str] = {
    "array_dims": "it depends on nested array types",
    "array_ndims": "it depends on nested array types",
    "list_dims": "it depends on nested array types",
    "list_ndims": "it depends on nested array types",
    "array_fill": "use array_repeat(x, n)",
    "arrow_typeof": "Spark types are not Arrow's",
    "gcd": "Spark has no native gcd",
    "lcm": "Spark has no native lcm",
    "wallclock": "now() is the pipeline's start; row_time() a row's event time",
}

#: Calls written as syntax carry no name position: their name comes from the node type.
_SYNTAX_NAMES: dict[type[exp.Func], str] = {
    exp.Floor: "floor", exp.Ceil: "ceil", exp.Trim: "trim", exp.Initcap: "initcap",
    exp.Substring: "substring", exp.Extract: "extract", exp.Decode: "decode",
    exp.CurrentTimestamp: "current_timestamp", exp.JSONExtract: "->",
    exp.JSONExtractScalar: "->>", exp.JSONBContainsTopKey: "?", exp.StrPosition: "position",
    exp.Overlay: "overlay",
}
#: Expression syntax that parses into function nodes but is not a function call.
#: (sqlglot models AND/OR/XOR as functions too: exp.Connector.)
_SYNTAX: tuple[type[exp.Expr], ...] = (exp.Cast, exp.TryCast, exp.Case, exp.If, exp.Array,
                                       exp.Unnest, exp.Explode, exp.AggFunc, exp.Connector)
#: Calls other planning steps own: windows, windowed aggregates, OVER functions.
_OTHER_CALLS = frozenset({*(w.lower() for w in WINDOW_FUNCTIONS), "mean", "unnest",
                          "approx_median", "approx_percentile_cont",
                          "approx_percentile_cont_with_weight"})

_STARTS: WeakKeyDictionary[SourceText, datetime] = WeakKeyDictionary()


def translate_functions(query: exp.Expr, text: SourceText, fallback: int,
                        udfs: UdfRegistry | None = None) -> exp.Expr:
    """Rewrite every scalar call of ``query`` (in place) into its Spark form.

    ``udfs`` are the pipeline's Python UDFs: a call of one is kept (Spark
    runs it under its name) once it passes :func:`check_udf_call`.  A call of
    any other name raises a PlanningError at the function's name.
    """
    # One SourceText per planned pipeline: every query of it sees the same now().
    start = _STARTS.setdefault(text, datetime.now(UTC))
    ctx = Translation(text, fallback, start)
    if udfs is not None:
        check_udf_names(udfs)
    names = _unaliased_names(query)
    calls = [node for node in query.walk() if isinstance(node, exp.Func)]
    for node in reversed(calls):  # innermost first: a rewrite sees translated arguments
        name = written_call_name(node, text)
        if udfs is not None and name is not None and name in udfs.functions:
            _udf_call(node, udfs.functions[name], ctx, udfs)
            continue
        if isinstance(node, exp.Cast) and (typed := json_cast(node, ctx)) is not None:
            node.replace(typed)  # CAST(j -> 'k' AS BIGINT): json_get_int(j, 'k')
            continue
        if (isinstance(node, _SYNTAX) or name in _OTHER_CALLS
                or isinstance(node.parent, exp.Window)):
            continue
        # A call sqlglot parsed into a node of its own may carry no name position.
        function = FUNCTIONS.get(name or node.sql_name().lower())
        if function is None:
            raise _unknown(node, name or node.sql_name().lower(), ctx, udfs)
        if function.translate is not None:
            replacement = function.translate(node, ctx)
            if replacement is not node:
                node.replace(replacement)
    _keep_names(names)
    _spark_cast_types(query)
    _array_slices(query)
    return query


def _array_slices(query: exp.Expr) -> None:
    """``arr[begin:end]`` (1-based, both included, either may be left out) as
    ``array_slice``; Spark has no slice syntax."""
    for bracket in list(query.find_all(exp.Bracket)):
        (index,) = bracket.expressions if len(bracket.expressions) == 1 else (None,)
        if isinstance(index, exp.Slice):
            begin = index.this if isinstance(index.this, exp.Expr) else exp.Literal.number(1)
            end = index.expression if isinstance(index.expression, exp.Expr) else \
                exp.Literal.number(-1)
            bracket.replace(array_slice(bracket.this, begin, end))


#: Types a CAST may name that Spark has no type of that name for (as column types map them).
_CAST_TYPES = {
    exp.DataType.Type.UTINYINT: "SMALLINT", exp.DataType.Type.USMALLINT: "INT",
    exp.DataType.Type.UINT: "BIGINT", exp.DataType.Type.UBIGINT: "DECIMAL(20, 0)",
    exp.DataType.Type.JSON: "STRING", exp.DataType.Type.JSONB: "STRING",
}


def _spark_cast_types(query: exp.Expr) -> None:
    """``CAST(x AS INT UNSIGNED)``, ``x::JSON`` and the like: the Spark type Spate uses
    for the column type of that name."""
    for cast in list(query.find_all(exp.Cast)):  # TryCast is a Cast too
        for node in list(cast.to.find_all(exp.DataType)):
            spark_name = _CAST_TYPES.get(node.this)
            if spark_name is not None:
                node.replace(exp.DataType.build(spark_name, dialect="spark"))


def _unaliased_names(query: exp.Expr) -> list[tuple[exp.Select, int, str]]:
    """Each unaliased SELECT item with its name as written."""
    return [(select, i, written_name(item))
            for select in query.find_all(exp.Select)
            for i, item in enumerate(select.expressions)
            if not isinstance(item, exp.Alias | exp.Column | exp.Star)]


def _keep_names(names: list[tuple[exp.Select, int, str]]) -> None:
    """Alias rewritten items by their written form: a column is named after the
    call the query wrote (``JSON_LENGTH(j)``), not after its Spark translation."""
    for select, index, name in names:
        item = select.expressions[index]
        if not isinstance(item, exp.Alias) and item.sql(dialect="spark") != name:
            item.replace(exp.alias_(item.copy(), name, quoted=True))


def written_call_name(node: exp.Func, text: SourceText) -> str | None:
    """The function name as the query wrote it (lower case), when it can be known."""
    start, end = node.meta.get("start"), node.meta.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return text.sql[start:end + 1].lower()
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return _SYNTAX_NAMES.get(type(node))


def _unknown(node: exp.Func, name: str, ctx: Translation,
             udfs: UdfRegistry | None) -> PlanningError:
    if name in NOT_YET:
        return _at_name(node, f"function '{name}' is not supported yet ({NOT_YET[name]})", ctx)
    known = [*FUNCTIONS, *(s.name for s in udfs or ())]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    udf_note = " and the pipeline's UDFs" if udfs else ""
    message = (f"unknown function '{name}'{hint}; {DOCS_PATH} lists the supported "
               f"functions{udf_note}")
    return _at_name(node, message, ctx)


def _at_name(node: exp.Func, message: str, ctx: Translation) -> PlanningError:
    start = node.meta.get("start")
    if isinstance(start, int):
        return ctx.text.error_at(message, start)
    return ctx.error(message, node)


# -- UDFs ----------------------------------------------------------------------------------

#: Aggregates and OVER functions (docs/sql/functions.md) sqlglot may not know:
#: names a UDF cannot take, besides the function table's and the parser's own.
_RESERVED_NAMES = frozenset({
    "count", "sum", "avg", "mean", "min", "max", "median", "bit_and", "bit_or", "bit_xor",
    "bool_and", "bool_or", "array_agg", "first_value", "last_value", "corr", "covar",
    "covar_samp", "covar_pop", "stddev", "stddev_samp", "stddev_pop", "var", "var_samp",
    "var_pop", "regr_slope", "regr_intercept", "regr_count", "regr_r2", "regr_avgx",
    "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy", "approx_distinct", "approx_median",
    "approx_percentile_cont", "approx_percentile_cont_with_weight", "row_number", "rank",
    "dense_rank", "ntile", "lag", "lead", "nth_value", "cume_dist", "percent_rank",
})


def check_udf_names(udfs: UdfRegistry) -> None:
    """A UDF may not take a built-in function's name (docs/udfs.md), nor a
    SQL keyword's: a call of it would not reach the UDF."""
    parser = Spate.Parser
    for signature in udfs:
        name = signature.name
        if (name in FUNCTIONS or name in _OTHER_CALLS or name in _RESERVED_NAMES
                or name.upper() in parser.FUNCTIONS or name.upper() in parser.FUNCTION_PARSERS):
            clash = f"the built-in function {name}()"
        elif [t.token_type for t in Spate().tokenize(name)] != [TokenType.VAR]:
            clash = f"the SQL keyword {name.upper()}"
        else:
            continue
        raise UdfDefinitionError(f"UDF '{name}' has the name of {clash}; rename it",
                                 signature.filename, signature.line, signature.column)


class UdafRows(exp.Expression, exp.AggFunc):
    """The rows of an aggregate UDF's arguments over a group (a STRUCT per row).

    ``spread(x)`` plans as ``spread(UdafRows(STRUCT(x AS a0)))``: the window
    operator collects the rows (aggregate kind ``udaf_rows``) and the UDF,
    registered in Spark as a scalar function of those rows, runs in the
    query's output SQL when the window fires.
    """

    arg_types = {"this": True}


def _udf_call(node: exp.Func, signature: UdfSignature, ctx: Translation,
              udfs: UdfRegistry) -> None:
    if isinstance(node.parent, exp.Window):
        raise _at_name(node, f"UDF {signature.name}() cannot be used with OVER", ctx)
    check_udf_call(node, signature, ctx, udfs)
    if signature.kind == AGGREGATE:
        fields = [exp.alias_(arg.copy(), f"a{i}") for i, arg in enumerate(args_of(node))]
        node.set("expressions", [UdafRows(this=exp.Struct(expressions=fields))])


def check_udf_call(node: exp.Func, signature: UdfSignature, ctx: Translation,
                   udfs: UdfRegistry) -> None:
    """The call passes one argument per parameter, of an accepted type where it is evident."""
    args = args_of(node)
    if len(args) != len(signature.params):
        raise _at_name(node, f"{signature.kind} UDF {signature.describe()} takes "
                             f"{len(signature.params)} argument(s), got {len(args)}", ctx)
    for position, (arg, param) in enumerate(zip(args, signature.params, strict=True), 1):
        given = _evident_type(arg, udfs)
        if given is not None and not param.type.accepts(given):
            message = (f"argument {position} of {signature.name}() is {given.sql}, but "
                       f"parameter '{param.name}' is {param.type.hint()} ({param.type.sql}); "
                       "cast it or change the UDF's type hint")
            # A literal or call is located at itself; syntax (TRUE, CAST) carries no
            # position of its own, so the error points at the call.
            if "start" in arg.meta:
                raise ctx.error(message, arg)
            raise _at_name(node, message, ctx)


#: Spark type -> the UDF value type a value of it arrives as.
_SPARK_VALUE_TYPES: tuple[tuple[type[T.DataType], str], ...] = (
    (T.BooleanType, "bool"), (T.ByteType, "int"), (T.ShortType, "int"),
    (T.IntegerType, "int"), (T.LongType, "int"), (T.FloatType, "float"),
    (T.DoubleType, "float"), (T.DecimalType, "Decimal"), (T.StringType, "str"),
    (T.BinaryType, "bytes"), (T.TimestampType, "datetime"), (T.TimestampNTZType, "datetime"),
    (T.DateType, "date"),
)


def _evident_type(node: exp.Expr, udfs: UdfRegistry) -> ValueType | None:
    """The type of an argument when it is evident without resolving columns."""
    if isinstance(node, exp.Paren | exp.Neg):
        return _evident_type(node.this, udfs)
    if isinstance(node, exp.Boolean):
        return ValueType("bool", True)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return ValueType("str", True)
        number = str(node.name).lower()
        # Spark reads 1.5 as DECIMAL and 1e3 as DOUBLE.
        kind = "float" if "e" in number else "Decimal" if "." in number else "int"
        return ValueType(kind, True)
    if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
        try:
            return _value_type(spark_type(node.to))
        except UnsupportedTypeError:
            return None
    if isinstance(node, exp.Anonymous):
        signature = udfs.get(str(node.name))
        return signature.returns if signature is not None else None
    return None


def _value_type(kind: T.DataType) -> ValueType | None:
    if isinstance(kind, T.ArrayType):
        element = _value_type(kind.elementType)
        return None if element is None else ValueType("list", True, element)
    for spark_kind, python in _SPARK_VALUE_TYPES:
        if isinstance(kind, spark_kind):
            return ValueType(python, True)
    return None


def markdown() -> str:
    """The generated documentation table, by family."""
    lines = [
        "# Supported functions",
        "",
        "Generated by `python -m spate.engine.planner.functions --markdown > "
        f"{DOCS_PATH}`; a test fails when it is out of date. Every function runs as "
        "a native Spark expression. Aggregates, windows (TUMBLE, HOP, SESSION) and "
        "OVER functions are planned elsewhere; any other name is a planning error.",
        "",
        "| Function | Family | Spark translation | Note |",
        "|---|---|---|---|",
    ]
    for function in sorted(FUNCTIONS.values(), key=lambda f: (f.family, f.name)):
        cells = (f"`{function.name}`", function.family, f"`{function.spark}`", function.note)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", "## Not supported yet", "",
              "A call of one of these is a planning error saying so.", "",
              "| Function | Why, or what to use instead |", "|---|---|"]
    lines += [f"| `{name}` | {reason} |" for name, reason in sorted(NOT_YET.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m spate.engine.planner.functions --markdown``: print the documentation table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--markdown", action="store_true", required=True,
                        help="print the function table as Markdown")
    parser.parse_args(argv)
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
