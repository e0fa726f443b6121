"""Maps sqlglot nodes back to line and column of the pipeline's SQL text.

sqlglot records positions on identifiers and literals but not on keywords
(``JOIN``, ``ORDER BY``, ``GROUP BY``) nor on option keys, so those are found
in the token stream, searching back from the nearest positioned node.
"""

from __future__ import annotations

import bisect
from functools import cached_property

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from spate.engine.planner.dialect import Spate
from spate.engine.planner.errors import PlanningError


class SourceText:
    """The pipeline text, able to turn character offsets into line/column."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(sql) if ch == "\n"]

    @cached_property
    def tokens(self) -> list[Token]:
        """The script's tokens (empty if it does not tokenize)."""
        try:
            return Spate().tokenize(self.sql)
        except TokenError:
            return []

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a 0-based character offset."""
        line_index = bisect.bisect_right(self._line_starts, offset) - 1
        return line_index + 1, offset - self._line_starts[line_index] + 1

    def offset_of(self, node: exp.Expr | None, fallback: int = 0) -> int:
        """Start offset of the first token of ``node`` that carries a position."""
        if node is None:
            return fallback
        starts = [
            sub.meta["start"]
            for sub in node.walk()
            if isinstance(sub, exp.Expr) and "start" in sub.meta
        ]
        return min(starts) if starts else fallback

    def keyword_before(self, offset: int, words: tuple[str, ...], fallback: int) -> int:
        """Offset of the first of the run of ``words`` tokens ending just before ``offset``.

        ``keyword_before(start of t, ("LEFT", "JOIN"))`` in ``a LEFT JOIN t`` finds
        ``LEFT``.  Returns ``fallback`` when the token before ``offset`` is not in ``words``.
        """
        index = self._token_index(offset) - 1
        found = fallback
        while index >= 0 and _first_word(self.tokens[index]) in words:
            found = self.tokens[index].start
            index -= 1
        return found

    def empty_clause(self, start: int, word: str, enders: tuple[str, ...]) -> int | None:
        """Offset of the first ``word`` token from ``start`` that is followed by nothing
        but one of ``enders`` (or the end of the text): a clause with no content."""
        tokens = self.tokens
        for index in range(self._token_index(start), len(tokens)):
            if _first_word(tokens[index]) != word:
                continue
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following is None or _first_word(following) in enders \
                    or following.token_type == TokenType.SEMICOLON:
                return tokens[index].start
        return None

    def word_before(self, offset: int, word: str, fallback: int) -> int:
        """Offset of the last ``word`` token that starts at or before ``offset`` (a
        keyword sqlglot keeps no position for: ``EXISTS`` before its subquery)."""
        starts = [t.start for t in self.tokens if t.start <= offset and _first_word(t) == word]
        return starts[-1] if starts else fallback

    def trailing_comma(self, inside: int, word: str, enders: tuple[str, ...]) -> int | None:
        """Offset of a comma that ends the ``word`` clause holding ``inside`` (the ``,``
        of ``GROUP BY zone,;``), if there is one. The clause runs from the last ``word``
        token before ``inside`` to the first of ``enders``, a ``;``, the ``)`` closing
        its subquery or the end of the text."""
        tokens = self.tokens
        index = self._token_index(inside) - 1
        while index >= 0 and _first_word(tokens[index]) != word:
            index -= 1
        if index < 0:
            return None
        depth, last = 0, None
        for token in tokens[index + 1:]:
            if token.token_type == TokenType.L_PAREN:
                depth += 1
            elif token.token_type == TokenType.R_PAREN:
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (token.token_type == TokenType.SEMICOLON
                                 or (_first_word(token) in enders
                                     and token.token_type not in _NAMES)):
                break
            last = token
        return last.start if last is not None and last.token_type == TokenType.COMMA else None

    def option_key_before(self, value_offset: int, fallback: int) -> int:
        """Offset of ``key`` in ``key = value`` given the offset of ``value``."""
        index = self._token_index(value_offset) - 1
        if index >= 1 and self.tokens[index].token_type == TokenType.EQ:
            return self.tokens[index - 1].start
        return fallback

    def _token_index(self, offset: int) -> int:
        starts = [token.start for token in self.tokens]
        return bisect.bisect_left(starts, offset)

    def error(
        self, message: str, node: exp.Expr | None, fallback: int = 0
    ) -> PlanningError:
        """A :class:`PlanningError` located at ``node`` (or ``fallback``)."""
        return self.error_at(message, self.offset_of(node, fallback))

    def error_at(self, message: str, offset: int) -> PlanningError:
        """A :class:`PlanningError` at a character offset."""
        line, column = self.line_col(offset)
        return PlanningError(message, line, column)


#: Tokens that name something: ``window`` is a column's name, never the WINDOW clause.
_NAMES = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING)


def _first_word(token: Token) -> str:
    """``ORDER`` for the one token ``ORDER BY``; the upper-cased text otherwise."""
    words = token.text.upper().split(maxsplit=1)
    return words[0] if words else ""
