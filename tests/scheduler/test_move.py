"""Moving a running pipeline to another Spark cluster, end to end: two standalone clusters
from the pyspark distribution on loopback (a master and one 1-core worker each), state
in PostgreSQL, the real scheduler over Redis and real spark-submit jobs.

The pipeline counts bids per auction in one-second TUMBLE windows of a bounded
Nexmark stream into a JSON-lines file. It starts on cluster ``a``, is moved to
``b`` after its first committed epoch, and finishes there; its output must be
what an uninterrupted run writes (the generator is deterministic, so that is
computed here from the same events), each window and auction exactly once.

The first tests check the pieces without Spark: cluster settings, where each
cluster's checkpoints go, and the master a job is submitted to.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from sqlalchemy import select

from spate.api.models import JobCheckpoint
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.base import stream_schema
from spate.engine.connectors.generators.nexmark import COLUMNS
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends.standalone import StandaloneBackend
from spate.scheduler.config import SchedulerConfig, cluster_masters, parse_clusters
from spate.scheduler.errors import ConfigurationError
from spate.statestore import open_store
from tests.engine.connectors.generators.nexmark_reference import generate
from tests.scheduler.clusters import Cluster
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import NEXMARK_BASE_TIME_MS, Harness

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("standalone")]

#: A bounded stream, paced, long enough that the move lands while the job on a still runs;
#: a few epochs are left for the job on b.
EVENT_RATE, RUNTIME_S, BATCH = 500, 20, 2500


# -- the pieces ---------------------------------------------------------------------


def test_clusters_are_named_and_the_default_is_the_one_spark_master_names() -> None:
    named = parse_clusters(" a=spark://h1:7077 , b=spark://h2:7077,")
    assert named == {"a": "spark://h1:7077", "b": "spark://h2:7077"}
    assert list(cluster_masters(None, named)) == ["a", "b"]
    assert list(cluster_masters("spark://h2:7077", named)) == ["b", "a"]
    assert cluster_masters("spark://h3:7077", named) == {
        "default": "spark://h3:7077", **named}
    assert cluster_masters(None, {}) == {"default": None}
    for bad in ("a", "a=", "=spark://h:1", "Ab=spark://h:1", "a=spark://h:1,a=spark://h:2"):
        with pytest.raises(ConfigurationError):
            parse_clusters(bad)


def test_cluster_settings_must_fit_the_backend() -> None:
    with pytest.raises(ConfigurationError, match="SPATE_CLUSTER_BACKEND=standalone"):
        SchedulerConfig(spark_clusters={"a": "spark://h:1"})
    with pytest.raises(ConfigurationError, match="spark://host:port masters"):
        SchedulerConfig(cluster_backend="standalone", spark_clusters={"a": "local[2]"})
    with pytest.raises(ConfigurationError, match="SPATE_SPARK_MASTER"):
        SchedulerConfig(cluster_backend="standalone")
    config = SchedulerConfig(cluster_backend="standalone",
                             spark_clusters={"a": "spark://h1:1", "b": "spark://h2:1"})
    assert config.default_cluster == "a" and config.cluster_master("b") == "spark://h2:1"
    assert config.cluster_master(None) == "spark://h1:1"
    with pytest.raises(ConfigurationError, match="known clusters: a, b"):
        config.cluster_master("c")


def test_each_cluster_keeps_its_own_checkpoints(tmp_path: Path) -> None:
    config = SchedulerConfig(data_dir=tmp_path, cluster_backend="standalone",
                             spark_clusters={"a": "spark://h1:1", "b": "spark://h2:1"})
    own = config.checkpoint_dir("t1", "p1")
    # The default cluster keeps the pipeline's folder (as before clusters had names).
    assert config.cluster_checkpoint_dir("t1", "p1", "a") == own
    assert config.cluster_checkpoint_dir("t1", "p1", None) == own
    other = config.cluster_checkpoint_dir("t1", "p1", "b")
    assert other == tmp_path / "checkpoints" / "t1" / "clusters" / "b" / "p1"
    assert not other.is_relative_to(own)  # a new folder there never holds a's files


def test_a_job_is_submitted_to_its_clusters_master(tmp_path: Path) -> None:
    config = SchedulerConfig(data_dir=tmp_path, cluster_backend="standalone",
                             spark_clusters={"a": "spark://h1:1", "b": "spark://h2:1"})
    spec = JobSpec(job_id="j1", tenant_id="t1", pipeline_id="p1", sql="SELECT 1",
                   state_url="postgresql://db/state", checkpoint_dir="/c", channel_url="file:///j",
                   spark_master=None)
    backend = StandaloneBackend(config)

    def master_of(command: list[str]) -> str:
        return command[command.index("--master") + 1]

    zip_path = tmp_path / "spate.zip"
    assert master_of(backend.command(spec, tmp_path / "spec.json", zip_path)) == "spark://h1:1"
    moved = JobSpec(**{**json.loads(spec.to_json()), "cluster": "b"})
    assert master_of(backend.command(moved, tmp_path / "spec.json", zip_path)) == "spark://h2:1"


# -- the move, on the two standalone clusters ------------------------------------------


def bids_by_auction_sql(out: str) -> str:
    """Bids per auction and one-second window of a bounded, paced Nexmark stream."""
    return f"""
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{EVENT_RATE}',
    runtime = '{RUNTIME_S}', max_events_per_batch = '{BATCH}',
    'nexmark.base_time_ms' = '{NEXMARK_BASE_TIME_MS}');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT w.end AS window_end, auction, n
FROM (SELECT TUMBLE(INTERVAL '1' SECOND) AS w, bid.auction AS auction, count(*) AS n
      FROM nexmark WHERE bid IS NOT NULL GROUP BY w, auction);
"""


def uninterrupted_output() -> Counter[tuple[int, int, int]]:
    """(window end in µs, auction, count) rows of an uninterrupted run, each once: the same
    generator's events, counted here."""
    schema = arrow_schema(stream_schema(COLUMNS))
    types = (schema.field(0).type, schema.field(1).type, schema.field(2).type)
    ids = np.arange(EVENT_RATE * RUNTIME_S, dtype=np.int64)
    events = generate(ids, NEXMARK_BASE_TIME_MS * 1_000_000, 1e9 / EVENT_RATE, types)
    is_bid = events.bid.is_valid().to_numpy(zero_copy_only=False)
    auctions = pc.struct_field(events.bid, "auction").to_numpy(zero_copy_only=False)[is_bid]
    ts_us = events.timestamps.cast("int64").to_numpy()[is_bid]
    window_end_us = (ts_us // 1_000_000 + 1) * 1_000_000
    counts = Counter(zip(window_end_us.tolist(), auctions.astype(np.int64).tolist(),
                         strict=True))
    return Counter((end, auction, n) for (end, auction), n in counts.items())


def output_rows(path: Path) -> Counter[tuple[int, int, int]]:
    rows: Counter[tuple[int, int, int]] = Counter()
    for line in path.read_text().splitlines():
        row = json.loads(line)
        end = row["window_end"]
        end_us = (int(datetime.fromisoformat(end.replace("Z", "+00:00")).timestamp() * 1e6)
                  if isinstance(end, str) else int(end))
        rows[(end_us, int(row["auction"]), int(row["n"]))] += 1
    return rows


def rows_read(harness: Harness, job_id: str) -> int:
    with harness.database.sessions() as session:
        return sum(session.scalars(select(JobCheckpoint.rows_in).where(
            JobCheckpoint.job_id == job_id)))


@pytest.mark.spark
def test_a_running_pipeline_moves_to_another_cluster_exactly_once(
        standalone_clusters: dict[str, Cluster], tmp_path: Path, redis_url: str, redis_prefix: str,
        control_url: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The drivers (spark-submit, on this machine) and the executors meet on loopback.
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    a, b = standalone_clusters["a"], standalone_clusters["b"]
    with running_scheduler(tmp_path / "data", redis_url, redis_prefix, control_url,
                           cluster_backend="standalone",
                           spark_clusters={"a": a.master_url, "b": b.master_url},
                           state_url=postgres_url) as harness:
        pipeline_id = harness.add_pipeline(bids_by_auction_sql("bids.jsonl"))
        out = harness.output(pipeline_id, "bids.jsonl")
        first = harness.wait_for("a committed epoch on cluster a", lambda: next(
            (j for j in harness.jobs(pipeline_id) if j.last_epoch is not None), None), 300)
        tenant_id = first.tenant_id
        try:
            assert first.cluster == "a" and first.handle is not None
            assert first.handle["master"] == a.master_url
            config = harness.scheduler.config
            # Cluster b has a checkpoint of this pipeline left from an earlier stay there:
            # a copy of a's, already behind. The job on b must not resume from it.
            stale = config.cluster_checkpoint_dir(tenant_id, pipeline_id, "b")
            try:
                shutil.copytree(config.checkpoint_dir(tenant_id, pipeline_id), stale)
            except shutil.Error:
                pass  # a file Spark renamed meanwhile: the copy is stale either way
            (stale / "left-from-earlier").touch()

            # The move, as the API records it.
            harness.change_pipeline(pipeline_id, cluster="b")
            second = harness.wait_for_job(pipeline_id, ("finished", "failed"), index=1,
                                          timeout_s=300)
            first = harness.job(first.id)
            assert first.state == "stopped" and first.stop_mode == "checkpoint", \
                harness.describe()
            assert ("stopping", "stopping (checkpoint)") in harness.history(first.id)
            assert second.state == "finished", second.failure_message
            assert harness.history(second.id)[0] == ("created", "move from cluster a to b")

            # The job after the move ran on b, as an application of b's master only.
            assert second.cluster == "b" and second.handle is not None
            assert second.handle["master"] == b.master_url
            assert f"spate-{second.id}" in b.app_names()
            assert f"spate-{second.id}" not in a.app_names()
            assert f"spate-{first.id}" in a.app_names()
            # It resumed after a's last epoch, read the rest of the input itself, and kept
            # its Spark checkpoint in b's own folder.
            epochs = harness.checkpoints(second.id)
            assert epochs and epochs[0] > (first.last_epoch or -1)
            assert rows_read(harness, second.id) > 0
            assert (stale / "offsets").is_dir() and not (stale / "left-from-earlier").exists()

            # Exactly once: every (window, auction) count of an uninterrupted run, once.
            assert output_rows(out) == uninterrupted_output()
            # A finished pipeline on the cluster it was moved to stays finished.
            harness.scheduler.reconcile_pipeline(pipeline_id)
            assert len(harness.jobs(pipeline_id)) == 2
        finally:
            with open_store(harness.scheduler.workspace.tenants.state_url(tenant_id)) as store:
                store.pipeline(tenant_id, pipeline_id).drop()
