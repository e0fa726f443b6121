"""What a pipeline knows about its UDFs without running them: name, kind, and
the SQL types of the arguments and the result, as read from the type hints.

A :class:`UdfRegistry` is plain data (the files' source texts and the
signatures), so it travels inside a plan and is pickled to executors.  A
pipeline of ``spate run --udf`` has one file; one under the service has one
file per UDF of its tenant that its SQL names (docs/udfs.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from pyspark.sql import types as T

SCALAR, VECTORIZED, AGGREGATE = "scalar", "vectorized", "aggregate"

#: Python type name -> (Spark type, SQL type name) of the scalar types a hint may use.
_SCALARS: dict[str, tuple[T.DataType, str]] = {
    "bool": (T.BooleanType(), "BOOLEAN"),
    "int": (T.LongType(), "BIGINT"),
    "float": (T.DoubleType(), "DOUBLE"),
    "Decimal": (T.DecimalType(38, 10), "DECIMAL"),
    "str": (T.StringType(), "TEXT"),
    "bytes": (T.BinaryType(), "BYTEA"),
    "datetime": (T.TimestampType(), "TIMESTAMP"),
    "date": (T.DateType(), "DATE"),
}
SCALAR_NAMES = tuple(_SCALARS)
LIST = "list"


@dataclass(frozen=True)
class ValueType:
    """A UDF parameter's or result's type: a scalar Python type or ``list`` of one."""

    python: str  # a key of _SCALARS, or LIST
    nullable: bool = False
    element: ValueType | None = None

    def __post_init__(self) -> None:
        if (self.python == LIST) != (self.element is not None):
            raise ValueError("a list type needs an element type, a scalar type none")
        if self.python != LIST and self.python not in _SCALARS:
            raise ValueError(f"unknown UDF value type {self.python!r}")

    @property
    def spark(self) -> T.DataType:
        """The Spark type (always nullable inside: the UDF wrappers enforce nullability)."""
        if self.element is not None:
            return T.ArrayType(self.element.spark, containsNull=True)
        return _SCALARS[self.python][0]

    @property
    def sql(self) -> str:
        """The SQL name, for messages (``BIGINT``, ``TEXT[]``)."""
        if self.element is not None:
            return f"{self.element.sql}[]"
        return _SCALARS[self.python][1]

    def hint(self) -> str:
        """The type as a Python hint (``Optional[list[int]]``)."""
        text = f"list[{self.element.hint()}]" if self.element is not None else self.python
        return f"Optional[{text}]" if self.nullable else text

    def accepts(self, other: ValueType) -> bool:
        """Whether a value of ``other``'s type may be passed where this type is declared.

        Integers widen to float and Decimal, Decimal narrows to float (as SQL
        arithmetic does); anything else must match.
        """
        if self.element is not None or other.element is not None:
            return (self.element is not None and other.element is not None
                    and self.element.accepts(other.element))
        widening = {"float": ("int", "Decimal"), "Decimal": ("int",)}
        return other.python == self.python or other.python in widening.get(self.python, ())


@dataclass(frozen=True)
class Param:
    name: str
    type: ValueType


@dataclass(frozen=True)
class UdfSignature:
    """One UDF of a pipeline.

    For an aggregate UDF, ``params`` hold the types of the SQL arguments (the
    elements of its ``list[T]`` parameters).
    """

    name: str  # as SQL calls it: the function's name in lower case
    function: str  # the Python function's name
    kind: str  # SCALAR | VECTORIZED | AGGREGATE
    params: tuple[Param, ...]
    returns: ValueType
    line: int = 1
    column: int = 1
    #: the file that declares it (errors and tracebacks name it)
    filename: str = "udfs.py"

    def describe(self) -> str:
        """``ratio(a: int, b: Optional[int]) -> float``, as the Python file declares it."""
        hints = [p.type.hint() for p in self.params]
        if self.kind == AGGREGATE:
            hints = [f"list[{h}]" for h in hints]
        params = ", ".join(f"{p.name}: {h}" for p, h in zip(self.params, hints, strict=True))
        return f"{self.name}({params}) -> {self.returns.hint()}"


@dataclass(frozen=True)
class UdfFile:
    """One UDF file: the name errors and tracebacks give it, and its source text."""

    filename: str
    source: str


@dataclass(frozen=True)
class UdfRegistry:
    """The UDFs of one pipeline: their files and their signatures by SQL name."""

    files: tuple[UdfFile, ...]
    functions: Mapping[str, UdfSignature] = field(default_factory=dict)

    def get(self, name: str) -> UdfSignature | None:
        return self.functions.get(name.lower())

    def file(self, signature: UdfSignature) -> UdfFile:
        """The file that declares ``signature`` (all an executor needs to run it)."""
        return next(f for f in self.files if f.filename == signature.filename)

    def __iter__(self) -> Iterator[UdfSignature]:
        return iter(self.functions.values())

    def __len__(self) -> int:
        return len(self.functions)
