"""The executor zip alone makes the engine and the state store importable: a
worker with Spate's dependencies but not Spate imports ``spate.…`` from it."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from spate.scheduler.backends.packaging import package_zip

#: Imported from the zip by a fresh interpreter; each needs the namespace package
#: ``spate`` and one of the two subpackages the zip holds.
_MODULES = ("spate.engine.defaults", "spate.statestore.keys")

_IMPORT_FROM_ZIP = """
import json, sys
sys.path[:] = json.loads(sys.argv[1])
import importlib, spate
modules = [importlib.import_module(name) for name in json.loads(sys.argv[2])]
print(json.dumps({"spate": list(spate.__path__), "files": [m.__file__ for m in modules]}))
"""


def _paths_without_spate(zip_path: Path) -> list[str]:
    """The zip, the standard library and site-packages, with no ``.pth`` file run.

    The editable install finds ``spate`` through a ``.pth`` hook; ``python -S``
    skips it, so only the zip can provide ``spate``.
    """
    paths = sysconfig.get_paths()
    stdlib = [p for p in sys.path if p.endswith(".zip") or p.endswith("lib-dynload")]
    ordered = [str(zip_path), paths["stdlib"], paths["platstdlib"], *stdlib,
               paths["purelib"], paths["platlib"]]
    return list(dict.fromkeys(ordered))


def test_the_zip_holds_a_directory_entry_for_every_folder(tmp_path: Path) -> None:
    names = zipfile.ZipFile(package_zip(tmp_path)).namelist()
    folders = {name.rsplit("/", 1)[0] + "/" for name in names if not name.endswith("/")}
    folders |= {"spate/"}
    assert folders <= {name for name in names if name.endswith("/")}


def test_a_fresh_interpreter_imports_spate_from_the_zip_alone(tmp_path: Path) -> None:
    zip_path = package_zip(tmp_path / "artifacts")
    result = subprocess.run(
        [sys.executable, "-S", "-c", _IMPORT_FROM_ZIP,
         json.dumps(_paths_without_spate(zip_path)), json.dumps(_MODULES)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    # The zip comes first on the path, so it holds the first portion of the namespace
    # package (a non-editable install's site-packages/spate may add another after it).
    assert imported["spate"][0] == f"{zip_path}/spate"
    assert all(file.startswith(f"{zip_path}/spate/") for file in imported["files"])


def test_the_zip_is_built_once_per_content(tmp_path: Path) -> None:
    first = package_zip(tmp_path)
    modified = first.stat().st_mtime_ns
    assert package_zip(tmp_path) == first
    assert first.stat().st_mtime_ns == modified
    assert [path.name for path in tmp_path.iterdir()] == [first.name]
