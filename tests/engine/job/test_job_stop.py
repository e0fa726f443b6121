"""Stopping an unbounded job (checkpoint, immediate) and resuming it: epochs continue where
they stopped and the output stays exactly-once.  The last run speaks over Redis."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from spate.engine.job.channel import open_channel
from spate.engine.job.spec import JobSpec
from tests.engine.job.support import JobProcess, epochs, make_spec, operator, start_job

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

REDIS_URL = "redis://127.0.0.1:6379/0"

# 100 rows a second with no end: every counter once to `counters`, and per parity a
# one-second TUMBLE count to `per_second` (a full window holds 50 rows of each parity).
UNBOUNDED_SQL = """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '100');
CREATE TABLE counters WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counters.jsonl',
                            format = 'json', type = 'sink');
CREATE TABLE per_second WITH (connector = 'single_file', path = '{{ OUT_DIR }}/per_second.jsonl',
                              format = 'json', type = 'sink');
INSERT INTO counters SELECT counter FROM impulse;
INSERT INTO per_second
SELECT parity, w.start AS window_start, n
FROM (SELECT counter % 2 AS parity, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n
      FROM impulse GROUP BY 1, 2);
"""


@pytest.fixture
def redis_key() -> Iterator[str]:
    key = f"spate-test-job-{uuid.uuid4().hex}"
    yield key
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(f"{key}:events", f"{key}:stop")
    client.close()


def _has_epochs(count: int) -> Any:
    return lambda events: len(epochs(events)) >= count


def _run_and_stop(job: JobProcess, mode: str, epochs_first: int) -> list[int]:
    """Let ``job`` commit ``epochs_first`` epochs, stop it in ``mode``; its epoch numbers."""
    job.wait_for(_has_epochs(epochs_first))
    open_channel(job.spec.channel_url).request_stop(mode)
    asked = time.monotonic()
    assert job.finish() == 0, job.log()[-3000:]
    stop_s = time.monotonic() - asked
    assert job.statuses() == ["running", "stopped"], job.events
    assert job.events[-1]["type"] == "status"
    numbers = [e["epoch"] for e in epochs(job.events)]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    if mode == "immediate":
        assert stop_s < 60, f"an immediate stop took {stop_s:.0f} s"
    return numbers


def _counters_written(job: JobProcess) -> int:
    return sum(operator(e, "sink:counters")["rows_in"] for e in epochs(job.events))


def test_stop_and_resume_continue_the_epochs_exactly_once(tmp_path: Path,
                                                          redis_key: str) -> None:
    out = tmp_path / "out"
    spec = make_spec(tmp_path, UNBOUNDED_SQL, variables={"OUT_DIR": str(out)})

    first = start_job(spec, tmp_path / "run-1")
    first_epochs = _run_and_stop(first, "checkpoint", epochs_first=2)
    # The last committed epoch's output is there: every counter it reported, in order.
    written = [json.loads(line)["counter"] for line in (out / "counters.jsonl").open()]
    assert written and sorted(written) == list(range(_counters_written(first)))

    second = start_job(_with_channel(spec, f"file://{tmp_path / 'channel-2'}"),
                       tmp_path / "run-2")
    second_epochs = _run_and_stop(second, "immediate", epochs_first=2)
    assert second_epochs[0] == first_epochs[-1] + 1

    third = start_job(_with_channel(spec, f"{REDIS_URL}?key={redis_key}"), tmp_path / "run-3")
    third_epochs = _run_and_stop(third, "checkpoint", epochs_first=2)
    # An epoch abandoned by the immediate stop is replayed whole under its own number.
    assert third_epochs[0] == second_epochs[-1] + 1

    written = [json.loads(line)["counter"] for line in (out / "counters.jsonl").open()]
    total = sum(_counters_written(job) for job in (first, second, third))
    assert sorted(written) == list(range(total)), "a counter was lost or written twice"
    _check_windows(out / "per_second.jsonl")


def _check_windows(path: Path) -> None:
    windows = [json.loads(line) for line in path.open()]
    keys = Counter((w["parity"], w["window_start"]) for w in windows)
    assert windows and max(keys.values()) == 1, "a window was written twice"
    for parity in (0, 1):
        counts = [w["n"] for w in sorted(windows, key=lambda w: w["window_start"])
                  if w["parity"] == parity]
        # The first window starts mid-second.  The second may be off by one too: the
        # impulse source dates the rows of epoch 0 from a second call to its
        # initialOffset, so the very first row can land one window late.  Every later
        # window is full, once.
        assert len(counts) > 3 and counts[2:] == [50] * (len(counts) - 2), counts


def _with_channel(spec: JobSpec, channel_url: str) -> JobSpec:
    """The same job (same state and checkpoint) reporting on another channel."""
    return dataclasses.replace(spec, job_id=f"job-{channel_url[-8:]}", channel_url=channel_url)
