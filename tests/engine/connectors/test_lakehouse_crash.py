"""A ``spate run`` job writing one Delta and one Iceberg table, killed with SIGKILL
mid-stream and restarted at another parallelism: each table ends with every
record exactly once (the epochs the engine had not committed are replayed, and
those the table already had are recognised in it and skipped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from spate.statestore import open_store
from tests.conftest import ThrowawayPostgres
from tests.engine.connectors.lakehouse_support import catalog_name, catalog_uri

pytestmark = pytest.mark.spark

#: 5,000 events over 5 s, at most 1,000 per epoch: 3 auctions in every 50 events.
EVENTS, PER_EPOCH, RUNTIME_S = 5_000, 1_000, 5
AUCTIONS = list(range(1000, 1000 + EVENTS * 3 // 50))

PIPELINE = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{rate}', runtime = '{runtime}',
    rate_limited = 'true', max_events_per_batch = '{per_epoch}',
    'nexmark.base_time_ms' = '1700000000000');
CREATE TABLE lake_delta (id BIGINT, seller BIGINT, initial_bid BIGINT, date_time TIMESTAMP)
    WITH (connector = 'delta', path = '{delta}');
CREATE TABLE lake_iceberg (id BIGINT, seller BIGINT, initial_bid BIGINT, date_time TIMESTAMP)
    WITH (connector = 'iceberg', 'catalog.uri' = '{uri}', 'catalog.name' = '{catalog}',
          'catalog.warehouse' = '{warehouse}', namespace = 'crash', table_name = 'auctions');
INSERT INTO lake_delta SELECT auction.id, auction.seller, auction.initial_bid,
    auction.datetime FROM nexmark WHERE auction IS NOT NULL;
INSERT INTO lake_iceberg SELECT auction.id, auction.seller, auction.initial_bid,
    auction.datetime FROM nexmark WHERE auction IS NOT NULL;
"""


def _spate_run(workdir: Path, parallelism: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SPATE_LOG="WARNING")
    return subprocess.Popen(
        [sys.executable, "-m", "spate.api.cli", "run", str(workdir / "pipeline.sql"),
         "--parallelism", str(parallelism), "--state", f"sqlite:///{workdir / 'state.db'}",
         "--checkpoint", str(workdir / "checkpoint"), "--epoch-max-delay-ms", "250"],
        cwd=Path(__file__).resolve().parents[3], env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _committed(workdir: Path) -> tuple[int | None, bool]:
    if not (workdir / "state.db").exists():
        return None, False
    with open_store(f"sqlite:///{workdir / 'state.db'}") as store:
        state = store.pipeline("default", "pipeline")
        last = state.last_committed_epoch()
        return last, bool(last is not None and state.epoch_metadata().get("finished"))


def test_a_kill_mid_stream_and_a_restart_leave_each_record_once(
        tmp_path: Path, throwaway_postgres: ThrowawayPostgres) -> None:
    uri, catalog = catalog_uri(throwaway_postgres.create()), catalog_name()
    delta, warehouse = tmp_path / "delta", tmp_path / "warehouse"
    (tmp_path / "pipeline.sql").write_text(PIPELINE.format(
        rate=EVENTS // RUNTIME_S, runtime=RUNTIME_S, per_epoch=PER_EPOCH, delta=delta,
        uri=uri, catalog=catalog, warehouse=warehouse))

    first = _spate_run(tmp_path, parallelism=1)
    deadline = time.monotonic() + 180
    while _committed(tmp_path)[0] is None and first.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # an epoch or two in, none near the end
    if first.poll() is None:
        os.killpg(first.pid, signal.SIGKILL)
    _, first_err = first.communicate(timeout=60)
    killed_at, finished_at_kill = _committed(tmp_path)

    second = _spate_run(tmp_path, parallelism=2)
    _, second_err = second.communicate(timeout=240)
    stderr = (first_err + second_err).decode(errors="replace")[-3000:]
    assert second.returncode == 0, stderr
    assert killed_at is not None and not finished_at_kill, \
        f"the kill did not land mid-stream: {stderr}"
    assert _committed(tmp_path)[1]

    in_delta = Counter(DeltaTable(str(delta)).to_pyarrow_table().column("id").to_pylist())
    iceberg_catalog = SqlCatalog(catalog, uri=uri, warehouse=f"file://{warehouse}")
    try:
        table = iceberg_catalog.load_table(("crash", "auctions"))
        in_iceberg = Counter(table.scan().to_arrow().column("id").to_pylist())
    finally:
        iceberg_catalog.engine.dispose()
    for name, counts in (("delta", in_delta), ("iceberg", in_iceberg)):
        repeated = sorted(i for i, n in counts.items() if n > 1)
        assert not repeated, f"{name} holds {len(repeated)} records twice, e.g. {repeated[:5]}"
        assert sorted(counts) == AUCTIONS, f"{name}: {len(counts)} of {len(AUCTIONS)} records"
