"""The Spate SQL dialect for sqlglot: RisingWave's grammar (which already reads
``WATERMARK FOR`` and ``WITH (...)`` table options) with the few changes the
Arroyo-compatible dialect needs."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.risingwave import RisingWave
from sqlglot.errors import ParseError
from sqlglot.tokenizer_core import Token, TokenType

#: Keys a Spate parser adds to a ``ParseError``'s error: the token it stood at (None at
#: the statement's end), the token before it, and the node it could not complete.
PARSER_AT = "spate_at"
PARSER_AFTER = "spate_after"
PARSER_INCOMPLETE = "spate_incomplete"


class MetadataColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    """``col type METADATA FROM 'key'``: the column holds a connector's metadata field."""

    arg_types = {"this": True}


def _strftime_aware(name: str, builder: Callable[..., exp.Expr]) -> Callable[..., exp.Expr]:
    """``to_timestamp``/``to_char`` as sqlglot reads them (a PostgreSQL format), unless a
    format is strftime-style (``%Y``) or there are several: then the call is kept for
    the function library, which converts strftime formats itself."""
    def build(args: list[exp.Expr], dialect: Dialect) -> exp.Expr:
        strftime = any(isinstance(f, exp.Literal) and "%" in str(f.name) for f in args[1:])
        if len(args) > 2 or strftime:
            return exp.Anonymous(this=name, expressions=args)
        return builder(args, dialect)
    return build


class Spate(RisingWave):
    """Arroyo-compatible streaming SQL."""

    class Tokenizer(RisingWave.Tokenizer):
        # SESSION(gap) is a window function here, not the SESSION keyword; ``window``
        # is the usual name of a window column (``TUMBLE(...) AS window``), not the
        # WINDOW clause (named windows are not part of the dialect).
        KEYWORDS = {k: v for k, v in RisingWave.Tokenizer.KEYWORDS.items()
                    if k not in ("SESSION", "WINDOW")}

    class Parser(RisingWave.Parser):  # type: ignore[misc,valid-type]
        FUNC_TOKENS = RisingWave.Parser.FUNC_TOKENS | {TokenType.VAR}
        # var(x) is var_samp(x), as in DataFusion
        # and covar(y, x) covar_samp(y, x)
        FUNCTIONS = {**RisingWave.Parser.FUNCTIONS, "VAR": exp.Variance.from_arg_list,
                     "COVAR": exp.CovarSamp.from_arg_list,
                     **{name: _strftime_aware(name, RisingWave.Parser.FUNCTIONS[name])
                        for name in ("TO_TIMESTAMP", "TO_CHAR")}}
        # ``x -> ...`` inside a call is the JSON operator, as anywhere else: the
        # dialect has no lambdas (sqlglot would read length(j -> 'a') as one).
        LAMBDAS = {k: v for k, v in RisingWave.Parser.LAMBDAS.items()
                   if k not in (TokenType.ARROW, TokenType.FARROW)}
        CONSTRAINT_PARSERS = {
            **RisingWave.Parser.CONSTRAINT_PARSERS,
            "METADATA": lambda self: self._match(TokenType.FROM) and self.expression(
                MetadataColumnConstraint(this=self._parse_string())),
        }

        def _parse_projections(self) -> tuple[list[exp.Expr], list[exp.Expr] | None]:
            """sqlglot reads past a comma that ends the SELECT list (``SELECT a, b, FROM t``),
            which hides a column the user meant to write or one they deleted: refused at the
            comma. An empty list is refused too, at what came instead."""
            projections, exclude = super()._parse_projections()
            comma, following = self._prev, self._curr
            at_end = following.token_type == TokenType.SENTINEL
            before = "" if at_end else f" before {following.text.upper()}"
            if projections and comma.token_type == TokenType.COMMA:
                self.raise_error(f"the SELECT list ends with a comma{before}; remove it or "
                                 "add the column that should follow", comma)
            if not projections:  # sqlglot reads PostgreSQL's empty ``SELECT FROM t``
                self.raise_error("the SELECT list is empty: name at least one column or "
                                 f"expression (or *){before}")
            return projections, exclude

        def raise_error(self, message: str, token: Token | None = None) -> None:
            """sqlglot's error, carrying where the parser stood, from which the planner
            says what was expected and what it found instead (``planner/syntax.py``)."""
            try:
                super().raise_error(message, token)
            except ParseError as error:
                at = self._curr if self._curr.token_type != TokenType.SENTINEL else None
                for details in error.errors[:1]:
                    details.update({PARSER_AT: at, PARSER_AFTER: self._prev})
                raise

        def validate_expression(self, expression: exp.Expr,
                                args: list[object] | None = None) -> exp.Expr:
            """sqlglot's check that a node has its parts; a failed one names the node."""
            try:
                checked: exp.Expr = super().validate_expression(expression, args)
            except ParseError as error:
                for details in error.errors[:1]:
                    details[PARSER_INCOMPLETE] = expression
                raise
            return checked

    class Generator(RisingWave.Generator):  # type: ignore[misc,valid-type]
        TRANSFORMS = {
            **RisingWave.Generator.TRANSFORMS,
            MetadataColumnConstraint: lambda self, e: f"METADATA FROM {self.sql(e, 'this')}",
        }


def written_name(item: exp.Expr) -> str:
    """The name of an unaliased SELECT item: the expression as written in this
    dialect (``payload -> 'k'``, ``UNNEST(tags)``, ``COUNT(*)``), not its Spark
    translation."""
    return item.sql(dialect=Spate)
