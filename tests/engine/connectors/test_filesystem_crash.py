"""The filesystem connector through ``spate run``: SQL in, kill -9 mid-stream, restart
at another parallelism, every record exactly once in the sinks' files.

One job reads json files as they appear in a local folder (a continuous source, two
files an epoch) and writes what it keeps as parquet on S3 (a real moto server) and
as json lines in a local folder. The job is killed with SIGKILL once it committed an
epoch, more files arrive while it is down, and it is restarted at parallelism 2
until both sinks hold every record.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spate.engine.connectors.object_store import PENDING_DIR
from tests.engine.connectors.crash_support import last_committed, spate_run
from tests.engine.connectors.s3_support import S3Server, serve_s3

pytestmark = pytest.mark.spark

FILES_BEFORE, FILES_AFTER, PER_FILE = 6, 2, 50
TOTAL = (FILES_BEFORE + FILES_AFTER) * PER_FILE
KEPT = [i for i in range(TOTAL) if i % 7 != 3]


def _write_input(folder: Path, index: int) -> None:
    ids = range(index * PER_FILE, (index + 1) * PER_FILE)
    data = "".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in ids)
    staging = folder / f".in-{index:03d}.json"  # hidden while written, then renamed
    staging.write_text(data)
    os.replace(staging, folder / f"in-{index:03d}.json")


@dataclass
class CrashRun:
    s3_ids: list[int]
    s3_keys: list[str]
    s3_uploads: list[str]
    local_ids: list[int]
    local_names: list[str]
    killed_at: int | None
    complete_at_kill: bool
    stderr: str


def _s3_ids(s3: S3Server, bucket: str) -> list[int]:
    ids: list[int] = []
    for key in s3.keys(bucket, "out/"):
        ids.extend(pq.read_table(io.BytesIO(s3.get(bucket, key))).column("id").to_pylist())
    return ids


def _local_ids(folder: Path) -> list[int]:
    ids: list[int] = []
    for path in sorted(folder.rglob("*.json")):
        if PENDING_DIR not in path.parts:
            ids.extend(json.loads(line)["id"] for line in path.read_text().splitlines())
    return ids


@pytest.fixture(scope="module")
def crash_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrashRun]:
    workdir = tmp_path_factory.mktemp("filesystem-crash")
    inbox, local_out = workdir / "in", workdir / "out"
    inbox.mkdir()
    for server in serve_s3():
        bucket = server.create_bucket()
        s3 = server.options(f"s3://{bucket}/out")
        with_s3 = ", ".join(f"'{k}' = '{v}'" for k, v in s3.items())
        (workdir / "pipeline.sql").write_text(
            f"CREATE TABLE src (id BIGINT NOT NULL, name TEXT) WITH (connector = 'filesystem', "
            f"type = 'source', format = 'json', path = '{inbox}', source.mode = 'continuous', "
            f"source.poll_interval = '100ms', source.max_files_per_batch = '2');\n"
            f"CREATE TABLE to_s3 WITH (connector = 'filesystem', type = 'sink', "
            f"format = 'parquet', {with_s3});\n"
            f"CREATE TABLE to_local WITH (connector = 'filesystem', type = 'sink', "
            f"format = 'json', path = '{local_out}', rolling_policy.max_records = '40');\n"
            "INSERT INTO to_s3 SELECT id, name FROM src WHERE id % 7 <> 3;\n"
            "INSERT INTO to_local SELECT id FROM src WHERE id % 7 <> 3;\n")
        for index in range(FILES_BEFORE):
            _write_input(inbox, index)

        def complete(server: S3Server = server, bucket: str = bucket) -> bool:
            return set(_s3_ids(server, bucket)) >= set(KEPT) and \
                set(_local_ids(local_out)) >= set(KEPT)

        first = spate_run(workdir, parallelism=1)
        deadline = time.monotonic() + 180
        while last_committed(workdir) is None and first.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        killed_at = last_committed(workdir)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        _, first_err = first.communicate(timeout=60)
        complete_at_kill = set(_s3_ids(server, bucket)) >= set(KEPT[:FILES_BEFORE * PER_FILE])

        for index in range(FILES_BEFORE, FILES_BEFORE + FILES_AFTER):
            _write_input(inbox, index)
        second = spate_run(workdir, parallelism=2)
        deadline = time.monotonic() + 180
        while not complete() and second.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # a duplicate would show up in the next epochs
        if second.poll() is None:
            second.send_signal(signal.SIGTERM)
        _, second_err = second.communicate(timeout=120)
        yield CrashRun(
            s3_ids=_s3_ids(server, bucket), s3_keys=server.keys(bucket),
            s3_uploads=server.uploads(bucket), local_ids=_local_ids(local_out),
            local_names=sorted(str(p.relative_to(local_out)) for p in local_out.rglob("*")
                               if p.is_file()),
            killed_at=killed_at, complete_at_kill=complete_at_kill,
            stderr=(first_err + second_err).decode(errors="replace")[-4000:])


def test_the_kill_landed_mid_stream(crash_run: CrashRun) -> None:
    assert crash_run.killed_at is not None, crash_run.stderr
    assert not crash_run.complete_at_kill, "the job finished before the kill"


@pytest.mark.parametrize("sink", ["s3", "local"])
def test_every_record_exactly_once_after_kill_and_restart(crash_run: CrashRun,
                                                          sink: str) -> None:
    ids = crash_run.s3_ids if sink == "s3" else crash_run.local_ids
    counts = Counter(ids)
    missing = sorted(set(KEPT) - set(counts))
    assert not missing, f"{sink} lost {len(missing)} records: {crash_run.stderr}"
    assert set(counts) == set(KEPT)
    repeated = {i: n for i, n in counts.items() if n > 1}
    assert not repeated, f"{sink} wrote {len(repeated)} records twice"


def test_no_pending_file_is_visible_under_final_names(crash_run: CrashRun) -> None:
    assert all(k.startswith("out/part-") and k.endswith(".parquet") for k in crash_run.s3_keys)
    assert all(n.startswith("part-") and n.endswith(".json") or n.startswith(PENDING_DIR)
               for n in crash_run.local_names)
