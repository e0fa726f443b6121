"""The decorators a tenant's UDF file uses to declare its functions.

::

    from spate.engine.udf import udaf, udf, vectorized_udf

    @udf
    def ratio(a: int, b: Optional[int]) -> Optional[float]: ...

    @vectorized_udf(args=[float, float], returns=float)
    def scaled(x: pa.Array, factor: pa.Array) -> pa.Array: ...

    @udaf
    def spread(values: list[float]) -> float: ...

They only mark a function and return it unchanged, so a UDF stays an
ordinary Python function its author can call and test.  Spate never reads the
marks: it finds the decorated functions and their signatures in the file's
source text (:mod:`spate.engine.udf.loader`), without running it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute a decorated function carries: ``scalar``, ``vectorized`` or ``aggregate``.
MARK = "__spate_udf__"


def udf(function: F) -> F:
    """A scalar UDF, called once per row with Python values."""
    setattr(function, MARK, "scalar")
    return function


def vectorized_udf(*, args: Sequence[Any], returns: Any) -> Callable[[F], F]:
    """A vectorized UDF, called per batch with one ``pyarrow.Array`` per argument.

    ``args`` and ``returns`` give the SQL types as Python types (``int``,
    ``float``, ``str``, ``list[int]`` …), one per parameter; the arrays may
    hold NULLs.
    """
    del args, returns  # read from the source text by the loader

    def mark(function: F) -> F:
        setattr(function, MARK, "vectorized")
        return function

    return mark


def udaf(function: F) -> F:
    """An aggregate UDF: each ``list[T]`` parameter receives the window's values."""
    setattr(function, MARK, "aggregate")
    return function
