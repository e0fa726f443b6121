"""A ``spate run`` job writing one Delta and one Iceberg table, killed with SIGKILL
mid-stream and restarted at another parallelism: each table ends with every
record exactly once (the epochs the engine had not committed are replayed, and
those the table already had are recognised in it and skipped)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from tests.conftest import ThrowawayPostgres
from tests.engine.connectors.crash_support import committed, spate_run
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


def test_a_kill_mid_stream_and_a_restart_leave_each_record_once(
        tmp_path: Path, throwaway_postgres: ThrowawayPostgres) -> None:
    uri, catalog = catalog_uri(throwaway_postgres.create()), catalog_name()
    delta, warehouse = tmp_path / "delta", tmp_path / "warehouse"
    (tmp_path / "pipeline.sql").write_text(PIPELINE.format(
        rate=EVENTS // RUNTIME_S, runtime=RUNTIME_S, per_epoch=PER_EPOCH, delta=delta,
        uri=uri, catalog=catalog, warehouse=warehouse))

    first = spate_run(tmp_path, parallelism=1)
    deadline = time.monotonic() + 180
    while committed(tmp_path)[0] is None and first.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # an epoch or two in, none near the end
    if first.poll() is None:
        os.killpg(first.pid, signal.SIGKILL)
    _, first_err = first.communicate(timeout=60)
    killed_at, finished_at_kill = committed(tmp_path)

    second = spate_run(tmp_path, parallelism=2)
    _, second_err = second.communicate(timeout=240)
    stderr = (first_err + second_err).decode(errors="replace")[-3000:]
    assert second.returncode == 0, stderr
    assert killed_at is not None and not finished_at_kill, \
        f"the kill did not land mid-stream: {stderr}"
    assert committed(tmp_path)[1]

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
