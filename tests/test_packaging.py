"""The distribution installs one import root, ``spate``, mapping the top-level folders."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("api", "engine", "migrations", "scheduler", "statestore")


def _setuptools() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(config["tool"]["setuptools"])


def test_every_python_folder_is_listed_as_a_spate_package() -> None:
    listed = set(_setuptools()["packages"])  # type: ignore[call-overload]
    found = {"spate." + ".".join(init.parent.relative_to(ROOT).parts)
             for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")
             if "node_modules" not in init.parts}
    assert found == listed


def test_each_top_level_folder_is_mapped_under_spate() -> None:
    mapping = _setuptools()["package-dir"]
    assert mapping == {f"spate.{folder}": folder for folder in FOLDERS}


def test_the_installed_packages_are_these_folders() -> None:
    from spate import api, engine, migrations, scheduler, statestore

    for module in (api, engine, migrations, scheduler, statestore):
        folder = Path(str(module.__file__)).resolve().parent
        assert folder == ROOT / module.__name__.removeprefix("spate.")
