"""Reads a UDF file's signatures from its source text, without running it.

Tenant code runs only on Spark executors (DESIGN.md), so planning — in the
CLI, a job, and the API — must not import the file.  The loader parses
it with :mod:`ast`, finds the top-level functions decorated with
:func:`~spate.engine.udf.udf`, :func:`~spate.engine.udf.vectorized_udf` or
:func:`~spate.engine.udf.udaf` (however they were imported), and turns their type
hints into :class:`~spate.engine.udf.signatures.UdfSignature`.  Hints are read as
written, so they must name the supported types directly: ``int``,
``Optional[float]``, ``float | None``, ``list[str]``, ``datetime`` … (an alias
of one's own is rejected with a message saying what is allowed).

A pipeline under the service takes its tenant's UDFs from several files, one
per UDF (:func:`load_udf_files`); a SQL name is declared once across them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from spate.engine.udf.errors import UdfDefinitionError
from spate.engine.udf.signatures import (
    AGGREGATE,
    LIST,
    SCALAR,
    VECTORIZED,
    Param,
    UdfFile,
    UdfRegistry,
    UdfSignature,
    ValueType,
)

_DECORATOR_KINDS = {"udf": SCALAR, "vectorized_udf": VECTORIZED, "udaf": AGGREGATE}
_DECORATOR_MODULES = ("spate.engine.udf", "spate.engine.udf.decorators")
#: Qualified hint name -> scalar type name.
_HINT_SCALARS = {
    **{f"builtins.{name}": name for name in ("bool", "int", "float", "str", "bytes")},
    "datetime.datetime": "datetime", "datetime.date": "date", "decimal.Decimal": "Decimal",
}
_LISTS = ("builtins.list", "typing.List")
_OPTIONAL, _UNION = "typing.Optional", "typing.Union"
_ARROW_ARRAY = "pyarrow.Array"
_BUILTINS = ("bool", "int", "float", "str", "bytes", "list")
SUPPORTED_HINTS = ("bool, int, float, str, bytes, datetime, date, Decimal, list[T], "
                   "Optional[T] (or T | None)")


def load_udfs(source: str, filename: str = "udfs.py") -> UdfRegistry:
    """The UDFs ``source`` declares; raises a located :class:`UdfDefinitionError`."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        raise UdfDefinitionError(f"syntax error: {error.msg}", filename, error.lineno or 1,
                                 error.offset or 1) from None
    reader = _Reader(filename, _imports(tree))
    functions: dict[str, UdfSignature] = {}
    for node in tree.body:
        signature = reader.signature(node)
        if signature is None:
            continue
        first = functions.get(signature.name)
        if first is not None:
            raise reader.error(f"UDF '{signature.name}' is defined twice (first at line "
                               f"{first.line})", node)
        functions[signature.name] = signature
    if not functions:
        raise UdfDefinitionError(
            "the file declares no UDF: decorate functions with @udf, @vectorized_udf(...) "
            "or @udaf (from spate.engine.udf import udf, vectorized_udf, udaf)", filename)
    return UdfRegistry((UdfFile(filename, source),), functions)


def load_udf_files(files: Iterable[UdfFile]) -> UdfRegistry:
    """The UDFs several files declare together; a SQL name declared in two of them is
    an error at the second declaration (files are read in the order given)."""
    loaded: list[UdfFile] = []
    functions: dict[str, UdfSignature] = {}
    for file in files:
        if any(f.filename == file.filename for f in loaded):
            raise UdfDefinitionError("two UDF files have this name; rename one", file.filename)
        for signature in load_udfs(file.source, file.filename):
            first = functions.get(signature.name)
            if first is not None:
                raise UdfDefinitionError(
                    f"UDF '{signature.name}' is also defined in {first.filename} (line "
                    f"{first.line}); a name may be declared once", file.filename,
                    signature.line, signature.column)
            functions[signature.name] = signature
        loaded.append(file)
    return UdfRegistry(tuple(loaded), functions)


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> qualified name, from the module's top-level imports."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:  # ``import a.b`` binds ``a``
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


@dataclass
class _Reader:
    filename: str
    imports: dict[str, str]

    def error(self, message: str, node: ast.AST) -> UdfDefinitionError:
        return UdfDefinitionError(message, self.filename, *_position(node))

    def qualified(self, node: ast.expr) -> str | None:
        """``pa.Array`` -> ``pyarrow.Array``; None for anything but a (dotted) name."""
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return self.imports[node.id]
            return f"builtins.{node.id}" if node.id in _BUILTINS else node.id
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    # -- decorators ---------------------------------------------------------------

    def signature(self, node: ast.stmt) -> UdfSignature | None:
        """The signature of a decorated top-level function; None for other statements."""
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        marks = [(d, kind) for d in node.decorator_list
                 if (kind := self._decorator_kind(d)) is not None]
        if not marks:
            return None
        if len(marks) > 1:
            raise self.error(f"'{node.name}' has two UDF decorators; keep one", marks[1][0])
        if isinstance(node, ast.AsyncFunctionDef):
            raise self.error(f"UDF '{node.name}' is async; UDFs must be plain functions", node)
        decorator, kind = marks[0]
        self._check_parameters(node)
        if kind == SCALAR:
            self._no_arguments(decorator, "udf")
            params = [Param(a.arg, self.hint(self._annotation(a, node), node)) for a in _args(node)]
            returns = self.hint(self._return(node), node)
        elif kind == AGGREGATE:
            self._no_arguments(decorator, "udaf")
            params = [Param(a.arg, self._list_element(a, node)) for a in _args(node)]
            if not params:
                raise self.error(f"aggregate UDF '{node.name}' needs at least one list[T] "
                                 "parameter", node)
            returns = self.hint(self._return(node), node)
        else:
            params, returns = self._vectorized(node, decorator)
        return UdfSignature(node.name.lower(), node.name, kind, tuple(params), returns,
                            *_position(node), filename=self.filename)

    def _decorator_kind(self, decorator: ast.expr) -> str | None:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = self.qualified(target)
        if name is None:
            return None
        module, _, short = name.rpartition(".")
        if module in _DECORATOR_MODULES and short in _DECORATOR_KINDS:
            return _DECORATOR_KINDS[short]
        if not module and short in _DECORATOR_KINDS:
            raise self.error(f"decorator '{short}' is not imported: add 'from spate.engine.udf "
                             f"import {short}'", decorator)
        return None

    def _no_arguments(self, decorator: ast.expr, name: str) -> None:
        if isinstance(decorator, ast.Call):
            raise self.error(f"write @{name} without parentheses or arguments", decorator)

    # -- parameters and hints -----------------------------------------------------------

    def _check_parameters(self, node: ast.FunctionDef) -> None:
        arguments = node.args
        if arguments.vararg or arguments.kwarg or arguments.kwonlyargs:
            raise self.error(f"UDF '{node.name}' may only have positional parameters "
                             "(no *args, **kwargs or keyword-only ones)", node)
        if arguments.defaults:
            raise self.error(f"UDF '{node.name}': parameters cannot have defaults (a SQL "
                             "call passes every argument)", arguments.defaults[0])

    def _annotation(self, argument: ast.arg, node: ast.FunctionDef) -> ast.expr:
        if argument.annotation is None:
            raise self.error(f"parameter '{argument.arg}' of UDF '{node.name}' has no type "
                             f"hint; supported: {SUPPORTED_HINTS}", argument)
        return argument.annotation

    def _return(self, node: ast.FunctionDef) -> ast.expr:
        if node.returns is None:
            raise self.error(f"UDF '{node.name}' has no return type hint (-> T); "
                             f"supported: {SUPPORTED_HINTS}", node)
        return node.returns

    def hint(self, node: ast.expr, function: ast.FunctionDef) -> ValueType:
        """The :class:`ValueType` a hint names."""
        inner, nullable = self._unwrap_optional(node, function)
        if isinstance(inner, ast.Subscript) and self.qualified(inner.value) in _LISTS:
            return ValueType(LIST, nullable, self.hint(inner.slice, function))
        name = self.qualified(inner)
        if name in _HINT_SCALARS:
            return ValueType(_HINT_SCALARS[name], nullable)
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            try:
                parsed = ast.parse(inner.value, mode="eval").body
            except SyntaxError:
                raise self.error(f"type hint {inner.value!r} does not parse", inner) from None
            value = self.hint(ast.copy_location(parsed, inner), function)
            return ValueType(value.python, value.nullable or nullable, value.element)
        what = "a list needs its element type (list[int])" if name in _LISTS else (
            f"unsupported type hint '{ast.unparse(inner)}'")
        raise self.error(f"UDF '{function.name}': {what}; supported: {SUPPORTED_HINTS}", inner)

    def _unwrap_optional(self, node: ast.expr, function: ast.FunctionDef
                         ) -> tuple[ast.expr, bool]:
        """``Optional[T]``, ``Union[T, None]``, ``T | None`` -> (T, True); else (node, False)."""
        if isinstance(node, ast.Subscript) and self.qualified(node.value) == _OPTIONAL:
            return node.slice, True
        members: list[ast.expr] | None = None
        if isinstance(node, ast.Subscript) and self.qualified(node.value) == _UNION:
            members = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else None
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            members = [node.left, node.right]
        if members is None:
            return node, False
        others = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
        if len(others) != 1 or len(others) == len(members):
            raise self.error(f"UDF '{function.name}': a union type may only be "
                             "Optional[T] (T | None)", node)
        return others[0], True

    def _list_element(self, argument: ast.arg, node: ast.FunctionDef) -> ValueType:
        """An aggregate UDF's ``list[T]`` parameter: T is the SQL argument's type."""
        hinted = self.hint(self._annotation(argument, node), node)
        if hinted.element is None or hinted.nullable:
            raise self.error(f"parameter '{argument.arg}' of aggregate UDF '{node.name}' must "
                             "be list[T]: it receives the window's values of one argument",
                             argument)
        return hinted.element

    def _vectorized(self, node: ast.FunctionDef, decorator: ast.expr
                    ) -> tuple[list[Param], ValueType]:
        keywords = ({k.arg: k.value for k in decorator.keywords}
                    if isinstance(decorator, ast.Call) else {})
        if (not isinstance(decorator, ast.Call) or decorator.args
                or set(keywords) != {"args", "returns"}):
            raise self.error("write @vectorized_udf(args=[T, ...], returns=T) with the SQL "
                             "types as Python types", decorator)
        types = keywords["args"]
        if not isinstance(types, ast.List | ast.Tuple):
            raise self.error("args= must be a list of types, one per parameter", types)
        parameters = _args(node)
        if not parameters:
            raise self.error(f"vectorized UDF '{node.name}' needs at least one parameter (a "
                             "batch is as long as its arrays)", node)
        if len(types.elts) != len(parameters):
            raise self.error(f"args= lists {len(types.elts)} type(s) but '{node.name}' has "
                             f"{len(parameters)} parameter(s)", types)
        for hinted in [*(self._annotation(a, node) for a in parameters), self._return(node)]:
            if self.qualified(hinted) != _ARROW_ARRAY:
                raise self.error(f"vectorized UDF '{node.name}' takes and returns pyarrow "
                                 "arrays: hint its parameters and result as pa.Array", hinted)
        params = [Param(a.arg, _nullable(self.hint(t, node)))
                  for a, t in zip(parameters, types.elts, strict=True)]
        return params, _nullable(self.hint(keywords["returns"], node))


def _args(node: ast.FunctionDef) -> list[ast.arg]:
    return [*node.args.posonlyargs, *node.args.args]


def _nullable(value: ValueType) -> ValueType:
    """Arrow arrays may always hold NULLs."""
    return ValueType(value.python, True, value.element)


def _position(node: ast.AST) -> tuple[int, int]:
    """1-based line and column; a function is located at its name."""
    line = getattr(node, "lineno", 1)
    column = getattr(node, "col_offset", 0) + 1
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        column += len("async def " if isinstance(node, ast.AsyncFunctionDef) else "def ")
    return line, column
