"""The driver JVM's class archive: where it lives, when a driver maps it, and that an
archive in place is always whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.engine import jvm_archive
from tests.jvm import ARCHIVE_DIR, build_archive


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    return tmp_path


def test_a_driver_maps_the_archive_only_once_it_is_in_place(folder: Path) -> None:
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == folder
    assert jvm_archive.driver_options() == ""
    path.write_bytes(b"stand-in")
    assert f"-XX:SharedArchiveFile={path}" in jvm_archive.driver_options()


def test_an_archive_the_operator_names_takes_precedence(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = jvm_archive.archive_path()
    assert path is not None
    path.write_bytes(b"stand-in")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/elsewhere.jsa")
    assert jvm_archive.driver_options() == ""


def test_archives_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, "off")
    assert jvm_archive.archive_path() is None
    assert jvm_archive.driver_options() == ""
    assert jvm_archive.create() is None


def test_an_archive_belongs_to_one_jdk(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = jvm_archive.archive_path()
    other = folder / "other-jdk"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(other))
    theirs = jvm_archive.archive_path()
    assert ours is not None and theirs is not None and ours != theirs


def test_a_failed_making_leaves_no_archive(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(output: Path) -> None:
        output.write_bytes(b"half an archive")  # the JVM died while writing it
        raise RuntimeError("the JVM exited with code 137 while writing its class archive")

    monkeypatch.setattr(jvm_archive, "_training_run", killed)
    with pytest.raises(RuntimeError, match="code 137"):
        jvm_archive.create()
    assert list(folder.iterdir()) == []


@pytest.mark.e2e
def test_the_suites_archive_was_made_by_spate_and_is_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite's drivers map it (tests/jvm.py): made by the training run of
    # spate.engine.jvm_archive, moved into place whole.
    path = build_archive()
    assert path is not None and path.parent == ARCHIVE_DIR
    assert path.stat().st_size > 10 << 20  # Spark's classes, not a stub
    assert not list(ARCHIVE_DIR.glob("*.partial"))
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(ARCHIVE_DIR))
    assert jvm_archive.archive_path() == path
