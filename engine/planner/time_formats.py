"""strftime-style formats (``%Y-%m-%d %H:%M:%S``, as ``to_timestamp`` and ``to_char``
take them in the dialect) to Spark datetime patterns (``yyyy-MM-dd HH:mm:ss``).

The conversion happens when a query is planned, on a literal format, so the
query runs Spark's native parsing and formatting. A specifier with no Spark
equivalent is a :class:`TimeFormatError` naming it.
"""

from __future__ import annotations

#: Specifier (the letter after ``%``) -> Spark pattern, for parsing and formatting alike.
_SPECIFIERS = {
    "Y": "yyyy", "y": "yy", "m": "MM", "b": "MMM", "h": "MMM", "B": "MMMM", "d": "dd",
    "e": "d", "a": "EEE", "A": "EEEE", "j": "DDD", "H": "HH", "k": "H", "I": "hh", "l": "h",
    "p": "a", "P": "a", "M": "mm", "S": "ss", "f": "SSSSSSSSS", "Z": "z", "z": "xx",
    "T": "HH:mm:ss", "X": "HH:mm:ss", "R": "HH:mm", "D": "MM/dd/yy", "x": "MM/dd/yy",
    "F": "yyyy-MM-dd", "r": "hh:mm:ss a", "c": "EEE MMM d HH:mm:ss yyyy",
    "+": "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]XXX",
}
#: Unpadded forms (``%-d``) of the numeric specifiers.
_UNPADDED = {"d": "d", "e": "d", "m": "M", "H": "H", "k": "H", "I": "h", "l": "h", "M": "m",
             "S": "s", "j": "D"}
#: Literal characters a Spark pattern may hold unquoted.
_PLAIN = set(" -/:,.")


class TimeFormatError(ValueError):
    """A format with a specifier Spark cannot express."""


def spark_pattern(chrono: str, *, parsing: bool) -> str:
    """The Spark datetime pattern of a strftime-style format.

    ``parsing``: the pattern reads text (``%.f`` is then an optional fraction
    of any length) rather than writes it (``%.f`` writes microseconds).
    """
    out: list[str] = []
    literal: list[str] = []
    index = 0
    while index < len(chrono):
        char = chrono[index]
        if char != "%":
            literal.append(char)
            index += 1
            continue
        spec, index = _specifier(chrono, index + 1)
        if spec in ("%", "t", "n"):
            literal.append({"%": "%", "t": "\t", "n": "\n"}[spec])
            continue
        out.append(_quoted("".join(literal)))
        literal.clear()
        out.append(_translate(spec, parsing))
    out.append(_quoted("".join(literal)))
    return "".join(out)


def _specifier(chrono: str, index: int) -> tuple[str, int]:
    """The specifier starting at ``index`` (after ``%``), with its modifiers, and the
    index after it."""
    end = index
    while end < len(chrono) and chrono[end] in "-_0.:#3469":
        end += 1
    if end >= len(chrono):
        raise TimeFormatError(f"format '{chrono}' ends inside a % specifier")
    return chrono[index:end + 1], end + 1


def _translate(spec: str, parsing: bool) -> str:
    letter, modifiers = spec[-1], spec[:-1]
    if letter == "f" and modifiers in ("", ".", "3", "6", "9", ".3", ".6", ".9"):
        digits = int(modifiers.lstrip(".") or 9)
        if modifiers == ".":  # an optional fraction of any length when read
            return "[.SSSSSSSSS]" if parsing else ".SSSSSS"
        return ("." if modifiers.startswith(".") else "") + "S" * digits
    if letter == "z" and modifiers == ":":
        return "xxx"
    if modifiers == "-" and letter in _UNPADDED:
        return _UNPADDED[letter]
    if modifiers in ("", "_", "0") and letter in _SPECIFIERS:
        return _SPECIFIERS[letter]
    raise TimeFormatError(f"format specifier %{spec} is not supported yet (supported: "
                          f"{' '.join('%' + s for s in _SPECIFIERS)} %.f %-d ...)")


def _quoted(text: str) -> str:
    """Literal text of a pattern: letters and most punctuation are quoted."""
    if not text or set(text) <= _PLAIN:
        return text
    return "'" + text.replace("'", "''") + "'"
