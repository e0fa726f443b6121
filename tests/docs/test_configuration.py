"""docs/configuration.md is generated from the code and kept current, and every
``SPATE_*`` variable the code reads is documented there."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from spate.api.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "tools" / "configuration.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spate_docs_configuration", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_current(generator: ModuleType) -> None:
    committed = (ROOT / generator.DOCS_PATH).read_text(encoding="utf-8")
    assert committed == generator.markdown(), (
        f"{generator.DOCS_PATH} is stale: run "
        f"python docs/tools/configuration.py > {generator.DOCS_PATH}")


def test_every_variable_the_code_reads_is_documented(generator: ModuleType) -> None:
    assert generator.undocumented_variables() == set(), (
        "document each in api/settings.py or OTHER_VARIABLES in docs/tools/configuration.py")


def test_the_source_scan_sees_variables_read_outside_the_settings(generator: ModuleType) -> None:
    found = generator.variables_in_source()
    assert {"SPATE_STATE_CACHE_BYTES", "SPATE_LOG", "SPATE_API_KEY", "SPATE_DATABASE_URL"} <= found


def test_the_page_names_every_setting_with_its_default(generator: ModuleType) -> None:
    page = generator.markdown()
    for name, field in Settings.model_fields.items():
        row = next((line for line in page.splitlines()
                    if line.startswith(f"| `SPATE_{name.upper()}` |")), None)
        assert row is not None, f"SPATE_{name.upper()} is missing"
        if field.default not in (None, ""):
            assert f"`{field.default}`" in row, f"{name}: default {field.default!r} not shown"


def test_a_setting_without_a_description_stops_the_generator(
        generator: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generator, "MEANINGS", {})
    with pytest.raises(ValueError, match="has no description"):
        generator.markdown()
