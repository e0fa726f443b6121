"""The phases of the move-and-rescale benchmark, each run in a process of its own
(:mod:`tests.benchmarks.test_move_rescale`)::

    python -m tests.benchmarks.move_job PHASE MASTER STATE_URL WORK [STOPPED_AT]

* ``build``: on ``MASTER`` at parallelism 2, run the pipeline until its state in
  the store passes :data:`STATE_BYTES`, then stop after a commit; then, in the
  same process, *rescale*: resume at parallelism 3 (another split of the key
  groups, tasks with cold caches) for :data:`EPOCHS_AFTER` epochs and stop.
* ``move``: on another ``MASTER`` (a standalone cluster), resume from the
  state store alone — a new, empty checkpoint folder — for
  :data:`EPOCHS_AFTER` epochs.

Each phase prints one JSON line: when it stopped (wall clock, ms), and for a
resume the time from the previous stop to its first committed epoch and that
epoch's state reads (bytes from the store, cache misses) against the state's
size.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from spate.engine.planner import plan_pipeline
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.spark import build_spark
from spate.statestore import PipelineState, open_store
from tests.benchmarks.workloads import BASE_TIME_MS

#: The state the build phase grows to before it stops (value bytes in the store).
STATE_BYTES = 200 * 1024 * 1024
#: Epochs each resumed phase runs.
EPOCHS_AFTER = 3


def pipeline_sql(events_per_epoch: int) -> str:
    """An updating aggregate keeping, per (auction, bidder), a count and the
    longest-sorting url and extra text of its bids: about 330 bytes of state per
    key, and about 290,000 new keys per million events."""
    return f"""
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10000',
    runtime = '100000', rate_limited = 'false',
    max_events_per_batch = '{events_per_epoch}', 'nexmark.base_time_ms' = '{BASE_TIME_MS}');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out
SELECT k, count(*) AS n, max(url) AS url, max(extra) AS extra
FROM (SELECT bid.auction * 1000000 + bid.bidder AS k, bid.url AS url, bid.extra AS extra
      FROM nexmark WHERE bid IS NOT NULL)
GROUP BY k;
"""


def state_bytes(state: PipelineState) -> int:
    return sum(operator.value_bytes for operator in state.describe().operators)


def run(spark: Any, state: PipelineState, work: Path, parallelism: int, events_per_epoch: int,
        stop_after: Any) -> list[EpochReport]:
    """Run until ``stop_after(reports)`` holds after a commit; the reports."""
    reports: list[EpochReport] = []
    runner: PipelineRunner

    def on_epoch(report: EpochReport) -> None:
        reports.append(report)
        if stop_after(reports):
            runner.request_stop()

    runner = PipelineRunner(plan_pipeline(pipeline_sql(events_per_epoch)), spark, state,
                            RunOptions(parallelism=parallelism,
                                       checkpoint_dir=str(work / f"checkpoint-{time.time_ns()}"),
                                       on_epoch=on_epoch))
    runner.run()
    return reports


def resumed(reports: list[EpochReport], stopped_at_ms: int, size: int) -> dict[str, Any]:
    first = reports[0]
    return {"stop_to_first_commit_s": (first.committed_at_ms - stopped_at_ms) / 1000,
            "first_epoch_s": first.duration_s, "first_epoch_rows": first.rows_in,
            "first_epoch_remote_bytes": first.remote_bytes,
            "first_epoch_cache_misses": first.cache_misses,
            "first_epoch_cache_hits": first.cache_hits,
            "later_epochs_remote_bytes": [r.remote_bytes for r in reports[1:]],
            "state_bytes": size}


def main(argv: list[str]) -> None:
    phase, master, state_url, work = argv[:4]
    spark = build_spark(master, f"spate-move-{phase}")
    store = open_store(state_url)
    state = store.pipeline("bench", "move")
    result: dict[str, Any] = {}
    if phase == "build":
        build = run(spark, state, Path(work), 2, 200_000,
                    lambda reports: state_bytes(state) >= STATE_BYTES)
        stopped_at_ms = time.time_ns() // 10**6
        result["build"] = {"epochs": len(build), "events": sum(r.rows_in for r in build),
                           "seconds": sum(r.duration_s for r in build)}
        size = state_bytes(state)
        after = run(spark, state, Path(work), 3, 20_000,
                    lambda reports: len(reports) >= EPOCHS_AFTER)
        result["stopped_at_ms"] = time.time_ns() // 10**6
        result["rescale"] = resumed(after, stopped_at_ms, size)
    else:
        size = state_bytes(state)
        after = run(spark, state, Path(work), 2, 20_000,
                    lambda reports: len(reports) >= EPOCHS_AFTER)
        result["stopped_at_ms"] = time.time_ns() // 10**6
        result["move"] = resumed(after, int(argv[4]), size)
    store.close()
    spark.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
