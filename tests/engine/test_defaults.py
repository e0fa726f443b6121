"""Each default shared across layers is written once, in ``engine/defaults.py``: no
other module assigns a constant of the same name, and no other module spells a
shared default's text (such as the state store URL) again."""

from __future__ import annotations

import ast
from pathlib import Path

from spate.engine import defaults

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS_FILE = Path(defaults.__file__).resolve()
SOURCES = sorted(path for folder in ("api", "engine", "migrations", "scheduler", "statestore")
                 for path in (ROOT / folder).rglob("*.py")
                 if "node_modules" not in path.parts and path.resolve() != DEFAULTS_FILE)
SHARED = {name: value for name, value in vars(defaults).items() if name.startswith("DEFAULT_")}


def restated(source: str) -> list[str]:
    """Where ``source`` defines a shared default again: by its name or its text."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id in SHARED and \
                    isinstance(getattr(node, "value", None), ast.Constant):
                found.append(f"line {node.lineno}: {target.id} = …")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value in {v for v in SHARED.values() if isinstance(v, str)}:
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_the_shared_defaults_are_these() -> None:
    assert {"DEFAULT_FLUSH_INTERVAL_MS", "DEFAULT_IDLE_MICROS", "DEFAULT_STATE_URL"} <= set(SHARED)


def test_no_module_restates_a_shared_default() -> None:
    assert len(SOURCES) > 100
    found = [f"{path.relative_to(ROOT)} {where}" for path in SOURCES
             for where in restated(path.read_text(encoding="utf-8"))]
    assert not found, "defined again outside engine/defaults.py:\n" + "\n".join(found)


def test_the_checker_sees_a_default_restated() -> None:
    assert restated("DEFAULT_IDLE_MICROS = 300_000_000\n")
    assert restated('state_url: str = Field(default="sqlite:///.spate/state.db")\n')
    assert restated('class C:\n    state_url: str = "sqlite:///.spate/state.db"\n')
    assert not restated("from spate.engine.defaults import DEFAULT_IDLE_MICROS as "
                        "DEFAULT_IDLE_MICROS\nidle = DEFAULT_IDLE_MICROS\n")
