"""Bad URLs, unreachable servers, wrong credentials, damaged data, the wrong host."""

from __future__ import annotations

import pickle
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spate import statestore
from spate.statestore import (
    BackendUnavailableError,
    CorruptValueError,
    EmbeddedStoreNotShareableError,
    UnknownStoreUrlError,
)
from tests.statestore.conftest import REPO


def test_unknown_scheme_names_the_supported_ones() -> None:
    with pytest.raises(UnknownStoreUrlError, match="sqlite:///.*postgresql://.*fdb://"):
        statestore.open_store("redis://127.0.0.1/0")
    with pytest.raises(UnknownStoreUrlError):
        statestore.open_store("state.db")


def test_unreachable_postgres_fails_fast_with_advice() -> None:
    with pytest.raises(BackendUnavailableError, match="cannot reach PostgreSQL.*server is running"):
        statestore.open_store("postgresql://postgres@127.0.0.1:1/test")


def test_wrong_credentials_are_reported_without_the_password(postgres_url: str) -> None:
    host = postgres_url.split("@", 1)[1]
    url = f"postgresql://no_such_user:s3cret-pw@{host}"
    with pytest.raises(BackendUnavailableError, match="refused the credentials") as caught:
        statestore.open_store(url)
    assert "s3cret-pw" not in str(caught.value)


def test_missing_database_is_named(postgres_url: str) -> None:
    base = postgres_url.rsplit("/", 1)[0]
    with pytest.raises(BackendUnavailableError, match="does not exist"):
        statestore.open_store(f"{base}/no_such_database_here")


def test_sqlite_url_without_a_path() -> None:
    with pytest.raises(BackendUnavailableError, match="sqlite:///path"):
        statestore.open_store("sqlite:///")


def test_corrupted_stored_value_is_a_typed_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = statestore.open_store(url)
    state = store.pipeline("t", "p")
    state.begin_epoch(0, [range(0, 128)])
    state.writer(0, range(0, 128)).commit()
    state.commit_epoch(0, {"watermark": 12})
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("UPDATE spate_epochs SET metadata = X'02000000000001'")
    with pytest.raises(CorruptValueError, match="checksum"):
        state.epoch_metadata()
    store.close()


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) for a UTS namespace")
def test_embedded_store_refuses_another_host(tmp_path: Path) -> None:
    """A pickled sqlite store (as shipped to a Spark task) opened on another host fails."""
    store = statestore.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    shipped = tmp_path / "store.pickle"
    shipped.write_bytes(pickle.dumps(store))
    store.close()
    script = ("import pickle, sys\n"
              "try:\n"
              f"    pickle.loads(open({str(shipped)!r}, 'rb').read())\n"
              "except Exception as e:\n"
              "    print(type(e).__name__, e)\n")
    same_host = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                               text=True, check=True)
    assert same_host.stdout == ""
    other_host = subprocess.run(
        ["unshare", "--uts", "sh", "-c", f"hostname spate-elsewhere && {sys.executable} -c \"$0\"",
         script], cwd=REPO, capture_output=True, text=True)
    if other_host.returncode != 0 and "Operation not permitted" in other_host.stderr:
        pytest.skip("this sandbox may not create UTS namespaces")
    assert EmbeddedStoreNotShareableError.__name__ in other_host.stdout, other_host.stderr
    assert "pick a remote backend" in other_host.stdout
