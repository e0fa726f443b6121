"""The SQL reference's option tables are generated from the connectors' declarations
(``docs/tools/connectors.py``) and kept current, and every option is documented."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from spate.engine.connectors import CONNECTORS

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "tools" / "connectors.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spate_docs_connectors", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_committed_tables_are_current(generator: ModuleType) -> None:
    assert generator.stale_pages() == [], "run python docs/tools/connectors.py"


def test_every_connector_and_shared_group_has_its_table(generator: ModuleType) -> None:
    marked = [name for page in generator.PAGES
              for name in generator.markers((ROOT / page).read_text(encoding="utf-8"))]
    expected = (set(CONNECTORS) - generator.UNDOCUMENTED) | set(generator.GROUPS)
    assert sorted(marked) == sorted(expected), "each table once, under its connector's section"


@pytest.mark.parametrize("name", sorted(CONNECTORS))
def test_every_option_says_what_it_means(name: str) -> None:
    undescribed = [spec.name for spec in CONNECTORS[name].options if not spec.description]
    assert undescribed == [], f"{name}: declare these with option(…, description)"


def test_a_table_shows_what_the_declaration_says(generator: ModuleType) -> None:
    table = generator.group_table("format")
    assert "| `bad_data` | no | `fail` | sources: what an undecodable record does" in table
    assert "| `format` | yes |" in table
    lookup = generator.group_table("lookup")
    assert "| `password` | no |  | its password (a secret: stored encrypted, never shown) |" \
        in lookup
