"""A zip of Spate's engine and state store, shipped to Spark executors with ``--py-files``.

Executors run the engine's Python (pane merges, sources, sinks) and the state
store's, so they need both packages. Shipping them as one zip per content
version means a cluster's workers need only a Python with Spate's
*dependencies* (pyspark, pyarrow, pandas, msgpack, psycopg, …) at the path
``spark.pyspark.python`` names, not Spate itself.

``spate`` is a namespace package (it has no folder of its own), and
``zipimport`` finds a namespace package only through the zip's directory
entries, so the zip holds one for every folder as well as the files.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from spate import engine, statestore

#: Files of a package that belong in the zip.
_SUFFIXES = (".py", ".json", ".sql", ".properties")

#: Part of the zip's name: a change to how the zip is laid out (not to the
#: files in it) must not reuse a zip built the old way.
_LAYOUT = b"spate zip layout 2: directory entries"


def package_zip(directory: Path) -> Path:
    """The zip of ``engine`` and ``statestore`` in ``directory``, built once per content."""
    files = sorted(_package_files())
    digest = hashlib.sha256(_LAYOUT)
    for archive_name, path in files:
        digest.update(archive_name.encode())
        digest.update(path.read_bytes())
    target = directory / f"spate-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder in _folders(name for name, _ in files):
            archive.mkdir(folder)
        for archive_name, path in files:
            archive.write(path, archive_name)
    temporary.replace(target)  # atomic, so two workers building at once both end well
    return target


def _package_files() -> list[tuple[str, Path]]:
    files = []
    for package in (engine, statestore):
        root = Path(str(package.__file__)).resolve().parent
        for path in root.rglob("*"):
            if path.is_file() and path.suffix in _SUFFIXES and "__pycache__" not in path.parts:
                # Inside the zip the packages keep their import names (spate/engine/…).
                files.append((f"spate/{path.relative_to(root.parent)}", path))
    return files


def _folders(archive_names: Iterable[str]) -> list[str]:
    """Every folder above the archive's files (``spate``, ``spate/engine``, …), parents first."""
    folders = {str(parent) for name in archive_names
               for parent in PurePosixPath(name).parents if parent != PurePosixPath(".")}
    return sorted(folders)
