"""Golden pipelines: ``golden/<case>/pipeline.sql`` runs over the case's input
files, and every ``golden/<case>/expected/<name>`` must equal the sink file
``<name>`` it wrote (as a multiset of lines: windows closing in one epoch may
be written in any order).  ``golden/<case>/counters.json``, when present, holds
counters the run must end with.

Each case runs at parallelism 1, stopped by ``request_stop()`` once half of
its epochs have committed, then resumed from the same Spark checkpoint and
state store at parallelism 3 until done, and must end with the expected
output.  Its epochs are known from its input: a single_file source reads
``max_lines_per_batch`` lines per epoch.  The stop must land midway: both
runs read input, and the first did not finish.  Sinks are exactly-once across
the restart, and since state is split by key group the resume is a rescale.
(An uninterrupted run would add nothing the expected files do not check: the
stop changes no epoch boundary, so the output is the same either way.)

A case must therefore span several epochs: give its single_file sources a
small ``max_lines_per_batch``.  Epoch boundaries do not move with the stop:
a batch is a line range fixed by that option, Spark replays a batch planned
before the stop with the offsets it logged, and the watermark is committed
with each epoch, so cases whose late rows depend on epoch boundaries keep
their expectations.

A case whose SQL has an ``-- update-flush-interval-ms: N`` line runs its updating
aggregates with that flush interval (0: every epoch, so their output depends
only on the epoch boundaries).

A case whose SQL has an ``-- unbounded`` line reads a source that never ends;
each run that should end is stopped once the expected output is written (the
interrupted run is stopped after its epochs, as above).

Expected files are computed independently of Spate: by DuckDB batch SQL over
the input for cases where no row is late, by hand (the reasoning is in each
case's header comment) where lateness depends on epoch boundaries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from spate.engine.defaults import DEFAULT_FLUSH_INTERVAL_MS
from spate.engine.runtime.reports import EpochReport
from tests.engine.harness import read_lines, run_pipeline

GOLDEN = Path(__file__).parent / "golden"
#: A single_file source's input file and its lines per epoch, in a case's SQL.
_SOURCE_BATCHES = re.compile(
    r"path = '\{\{ GOLDEN_DIR \}\}/([\w.]+)'[^;]*?max_lines_per_batch = '(\d+)'", re.S)
CASES = sorted(p for p in GOLDEN.iterdir() if (p / "pipeline.sql").exists())

pytestmark = pytest.mark.spark


class GoldenCase:
    """One case directory: its SQL, expected files and counters."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.name = directory.name
        self.sql = (directory / "pipeline.sql").read_text()
        self.expected = sorted((directory / "expected").iterdir())
        assert self.expected, f"{self.name} has no expected output"
        self.unbounded = any(line.startswith("-- unbounded") for line in self.sql.splitlines())
        intervals = [line.split(":", 1)[1] for line in self.sql.splitlines()
                     if line.startswith("-- update-flush-interval-ms:")]
        self.flush_interval_ms = int(intervals[0]) if intervals else DEFAULT_FLUSH_INTERVAL_MS

    def epochs(self) -> int:
        """The epochs its sources' input takes: per single_file source, its lines over
        its ``max_lines_per_batch``; the longest source decides."""
        found = 0
        for name, batch in _SOURCE_BATCHES.findall(self.sql):
            lines = len(read_lines(self.directory / name))
            found = max(found, -(-lines // int(batch)))
        return found

    def stop_condition(self, out_dir: Path) -> Callable[[], bool] | None:
        """For an unbounded case: whether every expected file is fully written."""
        if not self.unbounded:
            return None
        return lambda: all(len(read_lines(out_dir / f.name)) >= len(read_lines(f))
                           for f in self.expected)

    def check(self, out_dir: Path, counters: dict[str, int], run: str) -> None:
        for expected in self.expected:
            assert read_lines(out_dir / expected.name) == read_lines(expected), \
                f"{expected.name} after the {run}"
        counters_file = self.directory / "counters.json"
        if counters_file.exists():
            wanted = json.loads(counters_file.read_text())
            assert {k: counters.get(k, 0) for k in wanted} == wanted, f"counters after the {run}"


@pytest.mark.parametrize("directory", CASES, ids=[c.name for c in CASES])
def test_golden(directory: Path, spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                monkeypatch: pytest.MonkeyPatch) -> None:
    case = GoldenCase(directory)
    monkeypatch.setenv("GOLDEN_DIR", str(directory))

    epochs = case.epochs()
    assert epochs >= 2, (f"{case.name} runs in {epochs} epoch(s): give its sources a smaller "
                         "max_lines_per_batch so it can be stopped midway")
    workdir = tmp_path / "run"
    monkeypatch.setenv("OUT_DIR", str(workdir))
    before: list[EpochReport] = []
    run_pipeline(spark, case.sql, workdir, parallelism=1, reports=before,
                 stop_after_epochs=epochs // 2, update_flush_interval_ms=case.flush_interval_ms)
    assert len(before) >= epochs // 2
    assert not before[-1].finished, "the run to stop finished before the stop"
    assert sum(r.rows_in for r in before) > 0, "the stopped run read no input"
    after: list[EpochReport] = []
    counters = run_pipeline(spark, case.sql, workdir, parallelism=3, reports=after,
                            stop_when=case.stop_condition(workdir),
                            update_flush_interval_ms=case.flush_interval_ms)
    assert after and after[0].epoch > before[-1].epoch, "the resumed run replayed a commit"
    assert sum(r.rows_in for r in after) > 0, "nothing was left to read after the stop"
    case.check(workdir, counters, "run stopped at parallelism 1 and resumed at parallelism 3")
