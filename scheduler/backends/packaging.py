"""A zip of Spate's engine and state store, shipped to Spark executors with ``--py-files``.

Executors run the engine's Python (pane merges, sources, sinks) and the state
store's, so they need both packages. Shipping them as one zip per content
version means a cluster's workers need only a Python with Spate's
*dependencies* (pyspark, pyarrow, pandas, msgpack, psycopg, …) at the path
``spark.pyspark.python`` names, not Spate itself.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

from spate import engine, statestore

#: Files of a package that belong in the zip.
_SUFFIXES = (".py", ".json", ".sql", ".properties")


def package_zip(directory: Path) -> Path:
    """The zip of ``engine`` and ``statestore`` in ``directory``, built once per content."""
    files = sorted(_package_files())
    digest = hashlib.sha256()
    for archive_name, path in files:
        digest.update(archive_name.encode())
        digest.update(path.read_bytes())
    target = directory / f"spate-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
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
