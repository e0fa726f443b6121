"""Syntax errors in the user's words, located at the offending token.

sqlglot reports what its parser missed in its own terms (``Expecting )``,
``Required keyword: 'this' missing for <class '...Paren'>``, ``Invalid
expression / Unexpected token``) at the token it last read. Spate's parser adds
where it stood (:data:`.dialect.PARSER_AT` and its neighbours), from which this
module says what was expected there and what was found instead, and points at
what was found: the token, or the end of the statement. A message sqlglot has
no rule here for is passed on as it is, at sqlglot's place.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from spate.engine.planner.dialect import PARSER_AFTER, PARSER_AT, PARSER_INCOMPLETE, Spate
from spate.engine.planner.errors import PlanningError, did_you_mean
from spate.engine.planner.positions import SourceText

#: The words a statement starts with.
_STATEMENTS = ("CREATE", "INSERT", "SELECT", "SET", "WITH")
#: What closes what: a closer sqlglot expected names the opener left open.
_OPENERS = {")": (TokenType.L_PAREN, TokenType.R_PAREN),
            "]": (TokenType.L_BRACKET, TokenType.R_BRACKET),
            "END": (TokenType.CASE, TokenType.END)}
#: Tokens that are names or values, never keywords, whatever their text.
_NOT_KEYWORDS = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER)
#: Clauses whose keyword comes in two words.
_BY_CLAUSES = ("GROUP", "ORDER", "PARTITION")
_UNCLOSED = re.compile(r"Missing (?P<delimiter>\S+) from \d+:(?P<start>\d+)")
_QUOTED = {"'": "string", '"': "quoted name", "$$": "dollar-quoted string"}


def tokenize(text: SourceText) -> list[Token]:
    """The script's tokens; a string, quoted name or comment left open is a located
    error at its opening."""
    tokenizer = Spate().tokenizer()
    try:
        return tokenizer.tokenize(text.sql)
    except TokenError as error:
        unclosed = _UNCLOSED.fullmatch(str(error.__cause__ or ""))
        if unclosed is not None:
            delimiter = unclosed["delimiter"]
            what = _QUOTED.get(delimiter, "quoted text")
            raise text.error_at(f"syntax error: unterminated {what}: add the closing "
                                f"{delimiter}", int(unclosed["start"])) from error
        # Where it stopped: the first character after the last token it read.
        last = tokenizer.tokens[-1].end + 1 if tokenizer.tokens else 0
        start = last + len(text.sql[last:]) - len(text.sql[last:].lstrip())
        if text.sql.startswith("/*", start):
            raise text.error_at("syntax error: unterminated comment: close it with */",
                                start) from error
        raise text.error_at(f"syntax error: cannot read the SQL from here "
                            f"({error.__cause__ or error})", start) from error


@dataclass(frozen=True)
class _Stop:
    """Where the parser stopped: the token it found (None: the statement ended)."""

    at: Token | None
    after: Token
    incomplete: exp.Expr | None
    text: SourceText
    #: offset of the statement's first token
    statement: int

    @property
    def offset(self) -> int:
        """Where the error points: the token found, or the statement's end (its ``;``)."""
        if self.at is not None:
            return self.at.start
        return next((t.start for t in self.text.tokens if t.start > self.after.end),
                    self.after.end + 1)

    @property
    def found(self) -> str:
        return "the end of the statement" if self.at is None else _named(self.at)


def parse_error(error: ParseError, text: SourceText, statement: int) -> PlanningError:
    """``error`` of the statement starting at offset ``statement``, in the user's words."""
    details = error.errors[0] if error.errors else {}
    description = str(details.get("description") or error)
    first = next((t for t in text.tokens if t.start >= statement), None)
    if first is not None and first.token_type == TokenType.VAR:
        return text.error_at(f"syntax error: a statement starts with {', '.join(_STATEMENTS)}"
                             f", not '{first.text}'{did_you_mean(first.text, _STATEMENTS)}",
                             first.start)
    after = details.get(PARSER_AFTER)
    if isinstance(after, Token):
        stop = _Stop(details.get(PARSER_AT), after, details.get(PARSER_INCOMPLETE), text,
                     statement)
        for pattern, words in _WORDINGS:
            match = pattern.fullmatch(description)
            if match is not None:
                offset, message = words(match, stop)
                return text.error_at(f"syntax error: {message}", offset)
    return _as_reported(details, description, text, statement)


def _as_reported(details: dict[str, object], description: str, text: SourceText,
                 fallback: int) -> PlanningError:
    """sqlglot's message at sqlglot's place (the start of the token it highlighted)."""
    line, column = details.get("line"), details.get("col")
    if not isinstance(line, int) or not isinstance(column, int) or not line or not column:
        line, column = text.line_col(fallback)
    else:
        column = max(1, column - len(str(details.get("highlight") or "x")) + 1)
    return PlanningError(f"syntax error: {description}", line, column)


def _named(token: Token) -> str:
    """A token as a message names it: ``the keyword FROM``, ``'counter'``, ``')'``."""
    if token.token_type == TokenType.STRING:
        return f"the string '{token.text}'"
    if _is_keyword(token):
        return f"the keyword {token.text.upper()}"
    return f"'{token.text}'"


def _written(token: Token) -> str:
    """A token written in a message: a keyword as itself, anything else quoted."""
    return token.text.upper() if _is_keyword(token) else f"'{token.text}'"


def _is_keyword(token: Token) -> bool:
    return (token.token_type not in _NOT_KEYWORDS
            and token.text.upper() in Spate.Tokenizer.KEYWORDS
            and token.text.replace(" ", "").isalpha())


def _missing_closer(match: re.Match[str], stop: _Stop) -> tuple[int, str]:
    """``(`` / ``[`` / ``CASE`` left open: name the opener still open where it stopped."""
    closer = match["what"]
    opening, closing = _OPENERS[closer]
    open_starts: list[Token] = []
    for token in stop.text.tokens:
        if token.start < stop.statement or token.start >= stop.offset:
            continue
        if token.token_type == opening:
            open_starts.append(token)
        elif token.token_type == closing and open_starts:
            open_starts.pop()
    shown = closer if closer == "END" else f"'{closer}'"
    if not open_starts:
        return stop.offset, f"expected {shown}, found {stop.found}"
    opener = open_starts[-1]
    line, column = stop.text.line_col(opener.start)
    return stop.offset, (f"expected {shown} to close the {_written(opener)} at line {line}, "
                         f"column {column}, found {stop.found}")


def _missing_part(match: re.Match[str], stop: _Stop) -> tuple[int, str]:
    """A node sqlglot built without a part it needs: mostly an operand or a clause's
    expression, which names what came before the gap."""
    node = stop.incomplete
    if match["part"] not in ("this", "expression"):
        kind = node.key.upper() if node is not None else "expression"
        return stop.offset, (f"incomplete {kind}: expected more after "
                             f"{_written(stop.after)}, found {stop.found}")
    right = node.expression if isinstance(node, exp.Binary) else None
    if match["part"] == "this" and right is not None:  # ``WHERE AND x``: no left operand
        operator = _token_before(stop.text, stop.text.offset_of(right, -1))
        before = _token_before(stop.text, operator.start) if operator is not None else None
        if operator is not None and before is not None:
            return operator.start, (f"expected an expression after {_written(before)}, "
                                    f"found {_named(operator)}")
    return stop.offset, f"expected an expression after {_written(stop.after)}, found {stop.found}"


def _token_before(text: SourceText, offset: int) -> Token | None:
    """The last token starting before ``offset`` (None if there is none, or no offset)."""
    if offset < 0:
        return None
    return next((t for t in reversed(text.tokens) if t.start < offset), None)


def _unexpected(_: re.Match[str], stop: _Stop) -> tuple[int, str]:
    """A statement sqlglot finished before a token it could not place."""
    after, at = stop.after, stop.at
    if at is None:
        return stop.offset, f"unexpected end of the statement after {_written(after)}"
    if at.token_type == TokenType.R_PAREN:
        return at.start, "unexpected ')': there is no '(' open for it to close"
    before = _token_before(stop.text, after.start)
    if before is not None and before.token_type == TokenType.ALIAS and _is_keyword(after):
        return after.start, f"expected a name after AS, found {_named(after)}"
    if after.text.upper() in _BY_CLAUSES:
        return at.start, f"expected BY after {after.text.upper()}, found {stop.found}"
    if _is_keyword(at) and _is_keyword(after):
        return at.start, f"expected an expression after {_written(after)}, found {stop.found}"
    return at.start, (f"unexpected {stop.found} after {_written(after)} (is a comma, an "
                      "operator or a keyword missing before it?)")


def _missing_table(_: re.Match[str], stop: _Stop) -> tuple[int, str]:
    return stop.offset, f"expected a table name after {_written(stop.after)}, found {stop.found}"


def _expected(match: re.Match[str], stop: _Stop) -> tuple[int, str]:
    """``Expected TYPE after CAST`` and the like: a keyword or a symbol was due here."""
    word = match["what"]
    shown = "a type" if word == "TYPE" else word if word.isalpha() else f"'{word}'"
    return stop.offset, f"expected {shown} after {_written(stop.after)}, found {stop.found}"


#: How one of sqlglot's messages is said: the offset to point at, and the message.
_Wording = Callable[[re.Match[str], _Stop], tuple[int, str]]
#: sqlglot's messages and how each is said to the user, first match wins.
_WORDINGS: tuple[tuple[re.Pattern[str], _Wording], ...] = (
    (re.compile(r"Expect(?:ing|ed) (?P<what>[)\]]|END)( after \S+)?"), _missing_closer),
    (re.compile(r"Expected table name but got .*", re.DOTALL), _missing_table),
    (re.compile(r"Required keyword: '(?P<part>\w+)' missing for .*"), _missing_part),
    (re.compile(r"Invalid expression / Unexpected token"), _unexpected),
    (re.compile(r"Expect(?:ing|ed) (?P<what>\S+)( after \S+)?"), _expected),
)
