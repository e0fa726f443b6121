"""The queries of a tenant's warm application open its new embedded store at once."""

from __future__ import annotations

import threading
from pathlib import Path

from spate.statestore.sqlite.store import SqliteStateStore


def test_many_threads_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    # Racing to switch a fresh file to WAL made SQLite answer "database is locked" at
    # once (no busy wait) to one of them, failing a job as it started.
    errors: list[Exception] = []
    for attempt in range(40):
        url = f"sqlite:///{tmp_path / f'tenant{attempt}' / 'state.db'}"
        barrier = threading.Barrier(12)

        def open_store(url: str = url, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                SqliteStateStore(url).close()
            except Exception as error:  # noqa: BLE001 - collected and asserted below
                errors.append(error)

        threads = [threading.Thread(target=open_store) for _ in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors[0]
