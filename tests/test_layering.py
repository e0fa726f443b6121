"""The layering rule of ARCHITECTURE.md, read from the source: imports flow one way,
``api → scheduler → engine → statestore``.

Every ``import``/``from … import`` statement of every module counts, wherever it
stands (in a function, under ``TYPE_CHECKING``), as does
``importlib.import_module("…")`` with a literal name. (The finer rules inside the
engine are checked in a fresh interpreter by ``tests/engine/test_layering.py``.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The folders of the import root ``spate`` (pyproject.toml's package-dir).
FOLDERS = ("api", "engine", "migrations", "scheduler", "statestore")

#: For each layer, the parts of Spate its modules may import.
ALLOWED: dict[str, tuple[str, ...]] = {
    "statestore": ("spate.statestore",),
    "engine": ("spate.engine", "spate.statestore"),
    "scheduler": ("spate.scheduler", "spate.engine", "spate.statestore"),
}


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) for each module the source imports or names to importlib; a
    relative import as ``.`` and its dots."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield node.lineno, "." * node.level + (node.module or "")
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "spate" and node.level == 0:
            # ``from spate import engine``: the namespace package holds only the layers
            yield from ((node.lineno, f"spate.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            yield node.lineno, node.args[0].value


def _is_import_module(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(layer: str, source: str, filename: str = "<source>") -> list[str]:
    """What ``source``, a module of ``layer``, imports against the rule."""
    problems = []
    for line, module in imported_modules(ast.parse(source, filename)):
        if module.startswith("."):
            problems.append(f"{filename}:{line}: relative import {module}; write spate.…")
        elif module.split(".")[0] in FOLDERS:
            problems.append(f"{filename}:{line}: imports {module} by folder name; "
                            f"write spate.{module}")
        elif _within(module, "spate") and layer in ALLOWED and \
                not any(_within(module, allowed) for allowed in ALLOWED[layer]):
            problems.append(f"{filename}:{line}: {layer} imports {module}")
    return problems


def _modules(layer: str) -> list[Path]:
    return sorted(path for path in (ROOT / layer).rglob("*.py")
                  if "node_modules" not in path.parts)


@pytest.mark.parametrize("layer", FOLDERS)
def test_imports_flow_one_way(layer: str) -> None:
    modules = _modules(layer)
    assert modules, f"no modules under {layer}/"
    problems = [problem for path in modules
                for problem in violations(layer, path.read_text(encoding="utf-8"),
                                          str(path.relative_to(ROOT)))]
    assert not problems, "the layering rule (ARCHITECTURE.md) is broken:\n" + "\n".join(problems)


@pytest.mark.parametrize(("layer", "source"), [
    ("statestore", "from spate.engine.defaults import DEFAULT_FLUSH_INTERVAL_MS\n"),
    ("engine", "import spate.scheduler.config\n"),
    ("engine", "def f():\n    from spate.api import settings\n"),
    ("scheduler", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                  "    from spate.api.repositories.control import SqlControlStore\n"),
    ("scheduler", "import importlib\nimportlib.import_module('spate.api.worker')\n"),
    ("scheduler", "from spate import engine, api\n"),
    ("api", "from engine.planner import plan_pipeline\n"),
    ("scheduler", "from ..api import settings\n"),
])
def test_the_checker_sees_an_import_against_the_rule(layer: str, source: str) -> None:
    assert violations(layer, source)


@pytest.mark.parametrize(("layer", "source"), [
    ("statestore", "from spate.statestore.keys import encode_key\nimport msgpack\n"),
    ("engine", "from spate.statestore import open_store\nfrom spate.engine import defaults\n"),
    ("scheduler", "from spate.engine.job.spec import JobSpec\n"),
    ("api", "from spate.scheduler.store import ControlStore\nfrom spate.api import db\n"),
    ("scheduler", "from spate import engine, statestore\n"),
    ("migrations", "from spate.api import models\nimport sqlalchemy as sa\n"),
])
def test_the_checker_lets_allowed_imports_pass(layer: str, source: str) -> None:
    assert violations(layer, source) == []


#: Each connector's system client library (imported by that connector's modules alone).
CLIENT_LIBRARIES = ("psycopg", "redis", "confluent_kafka", "paho", "nats", "pika", "rstream",
                    "boto3", "websockets")


def test_a_sources_module_loads_no_other_systems_client_library() -> None:
    # Spark starts Python processes per query that import the source's module: they must
    # not pay for every connector's client (tens of MB each, per process).
    probe = ("import sys, spate.engine.connectors.generators.impulse; "
             f"print(sorted(m for m in {CLIENT_LIBRARIES!r} if m in sys.modules)); "
             "from spate.engine.connectors import CONNECTORS; "
             "print(len(CONNECTORS) > 10)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).parent.parent)
    assert result.stdout.split() == ["[]", "True"], result.stdout + result.stderr
