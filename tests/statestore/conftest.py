"""Backends for the state-store suite: every backend present on this machine.

SQLite always; PostgreSQL at ``SPATE_TEST_POSTGRES_URL`` (a real server — CI
starts one); FoundationDB when ``SPATE_FDB_CLUSTER_FILE`` names a cluster file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spate import statestore
from spate.statestore import PipelineState, StateCache, StateStore

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ["sqlite", "postgresql", "fdb"]
TENANT = "conformance"


def fdb_url() -> str | None:
    cluster_file = os.environ.get("SPATE_FDB_CLUSTER_FILE")
    if not cluster_file:
        return None
    return f"fdb://{cluster_file}?prefix=spate-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    if request.param == "postgresql":
        return postgres_url
    url = fdb_url()
    if url is None:
        pytest.skip("SPATE_FDB_CLUSTER_FILE is not set: no FoundationDB cluster to test against")
    return url


OpenPipeline = Callable[..., PipelineState]


@pytest.fixture
def open_pipeline(store_url: str) -> Iterator[OpenPipeline]:
    """Factory: ``open_pipeline(name=None, cache=None)`` opens a pipeline of a fresh store
    connection; every pipeline it opened is dropped afterwards."""
    stores: list[StateStore] = []
    names: list[str] = []

    def open_(name: str | None = None, cache: StateCache | None = None) -> PipelineState:
        store = statestore.open_store(store_url, cache=cache or StateCache())
        stores.append(store)
        name = name or f"p-{uuid.uuid4().hex[:10]}"
        names.append(name)
        return store.pipeline(TENANT, name)

    yield open_
    if stores:
        for name in set(names):
            stores[0].pipeline(TENANT, name).drop()
    for store in stores:
        store.close()


def worker(url: str, pipeline: str, command: str, *args: object) -> subprocess.Popen[str]:
    """Start ``tests.statestore.workers COMMAND`` as its own process."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.statestore.workers", command, url, TENANT, pipeline,
         *map(str, args)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str]) -> None:
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
