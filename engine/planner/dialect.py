"""The Spate SQL dialect for sqlglot: RisingWave's grammar (which already reads
``WATERMARK FOR`` and ``WITH (...)`` table options) with the few changes the
Arroyo-compatible dialect needs."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.risingwave import RisingWave
from sqlglot.tokenizer_core import TokenType


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
                     "COVAR": exp.CovarSamp.from_arg_list}
        # ``x -> ...`` inside a call is the JSON operator, as anywhere else: the
        # dialect has no lambdas (sqlglot would read length(j -> 'a') as one).
        LAMBDAS = {k: v for k, v in RisingWave.Parser.LAMBDAS.items()
                   if k not in (TokenType.ARROW, TokenType.FARROW)}


def written_name(item: exp.Expr) -> str:
    """The name of an unaliased SELECT item: the expression as written in this
    dialect (``payload -> 'k'``, ``UNNEST(tags)``, ``COUNT(*)``), not its Spark
    translation."""
    return item.sql(dialect=Spate)
