"""A tenant's storage root: every file path resolves inside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.engine.connectors.core.boundary import UNCONFINED, Boundary, PathEscapeError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "in").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return tmp_path / "root"


def test_relative_paths_resolve_inside_the_root(root: Path) -> None:
    boundary = Boundary(storage_root=str(root))
    assert boundary.resolve_path("in/data.json") == str(root / "in" / "data.json")
    assert boundary.resolve_path("./out.json") == str(root / "out.json")
    assert boundary.resolve_path("file://in/x") == str(root / "in" / "x")


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside/x", "in/../../outside/x", "~/x",
                                  "", ".", "in/..", "/proc/self/environ", "a\x00b"])
def test_escapes_are_refused(root: Path, path: str) -> None:
    with pytest.raises(PathEscapeError, match="outside your storage"):
        Boundary(storage_root=str(root)).resolve_path(path)


def test_a_link_out_of_the_root_is_refused(root: Path) -> None:
    os.symlink(root.parent / "outside", root / "link")
    os.symlink("/etc/passwd", root / "passwd")
    boundary = Boundary(storage_root=str(root))
    for path in ("link/x", "passwd"):
        with pytest.raises(PathEscapeError):
            boundary.resolve_path(path)


def test_a_link_inside_the_root_is_followed(root: Path) -> None:
    os.symlink(root / "in", root / "alias")
    assert Boundary(storage_root=str(root)).resolve_path("alias/f") == str(root / "in" / "f")


def test_unconfined_takes_any_path(tmp_path: Path) -> None:
    assert UNCONFINED.resolve_path("/etc/hosts") == "/etc/hosts"
    assert not UNCONFINED.confined


@given(st.lists(st.sampled_from(["a", "b", "..", ".", "/", "x.json", "~"]), max_size=8))
def test_whatever_is_written_the_result_stays_inside(parts: list[str]) -> None:
    root = os.path.realpath("/tmp/spate-boundary-root")
    boundary = Boundary(storage_root=root)
    try:
        resolved = boundary.resolve_path("/".join(parts) if parts and parts[0] != "/"
                                         else "".join(parts))
    except PathEscapeError:
        return
    assert os.path.commonpath([root, resolved]) == root and resolved != root


def test_boundaries_travel_as_plain_values(root: Path) -> None:
    boundary = Boundary(storage_root=str(root))
    assert Boundary.from_dict(boundary.to_dict()) == boundary
    assert Boundary.from_dict(None) == UNCONFINED
