"""The Spate SQL dialect for sqlglot: RisingWave's grammar (which already reads
``WATERMARK FOR`` and ``WITH (...)`` table options) with the few changes the
Arroyo-compatible dialect needs."""

from __future__ import annotations

from sqlglot.dialects.risingwave import RisingWave
from sqlglot.tokenizer_core import TokenType


class Spate(RisingWave):
    """Arroyo-compatible streaming SQL."""

    class Tokenizer(RisingWave.Tokenizer):
        # SESSION(gap) is a window function here, not the SESSION keyword.
        KEYWORDS = {k: v for k, v in RisingWave.Tokenizer.KEYWORDS.items() if k != "SESSION"}

    class Parser(RisingWave.Parser):  # type: ignore[misc,valid-type]
        FUNC_TOKENS = RisingWave.Parser.FUNC_TOKENS | {TokenType.VAR}
