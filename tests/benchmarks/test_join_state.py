"""What an updating join's range tasks spend per epoch on its rows' state: each
side's rows kept in columns (an Arrow IPC entry per key group and epoch) against
the per-key layout (an entry per join key), over the same rows and the same
embedded (SQLite) store, without Spark.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_join_state.py -s``

The shape of Nexmark q3: 100,000 persons are loaded in a first epoch; then each
epoch brings 10,000 auctions, each of a seller among the persons at random, and
1,000 new persons.  Timed per epoch, one range of 128 key groups (one task per
stage, as at parallelism 1): both sides' stage 1 (reading the stored rows of the
keys the epoch touches) and stage 2 (pairs, output, state written back), the
writers' commits included.  The pairs are found with pyarrow's join, as Spark's
join would give them, outside the timing, and each stage's input is handed over as
fresh Arrow buffers, as from Spark.  The two layouts alternate epoch by
epoch; the median of 10 epochs after 2 to warm up is kept.  Written to
``results.json`` under ``join_state``; nothing is asserted.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spate.engine.runtime import join
from spate.engine.runtime.tasks import KEY_GROUP, TaskEpoch, TaskStats
from spate.engine.runtime.values import from_ipc, to_ipc
from spate.statestore import PipelineState, open_store, split_key_groups
from tests.benchmarks.workloads import save_result
from tests.engine.runtime.test_join_columns import (
    Row,
    _new_rows,
    _packed,
    _pairs,
    _spec,
    _stage_one,
)

pytestmark = [pytest.mark.benchmark]

GROUPS = 128
PERSONS = 100_000
AUCTIONS_PER_EPOCH = 10_000
NEW_PERSONS_PER_EPOCH = 1_000
WARM_EPOCHS = 2
EPOCHS = 10
SECOND = 1_000_000


class _Layout:
    """One layout's store and step, run epoch by epoch."""

    def __init__(self, path: Path, columnar: bool) -> None:
        self.store = open_store(f"sqlite:///{path}")
        self.state: PipelineState = self.store.pipeline("t", "p")
        self.step = join.UpdatingJoinStep(_spec("inner", 86_400), self.state, GROUPS)
        self.columnar = columnar
        self.ranges = split_key_groups(GROUPS, 1)

    def epoch(self, number: int, auctions: list[Row], persons: list[Row]) -> tuple[float, int]:
        """Run epoch ``number``; return the tasks' seconds and the rows emitted."""
        news = (_new_rows(auctions, "lv", GROUPS), _new_rows(persons, "rv", GROUPS))
        watermark = max(t for _, _, t in auctions + persons) * SECOND
        self.state.begin_epoch(number, self.ranges)
        task_epoch = TaskEpoch(b"", "t", "p", "run", number, number - 1 if number else None,
                               tuple((r.start, r.stop) for r in self.ranges), watermark,
                               watermark)
        key_groups = self.ranges[0]
        spent = 0.0
        read = []
        for side in self.step.sides:
            rows = _stage_one(news[side.index], news[1 - side.index])
            rows = rows.filter(pc.is_valid(rows.column(KEY_GROUP)))
            schema = join._side_schema(news[side.index].schema)
            began = time.perf_counter()
            writer = self.state.writer(number, key_groups)
            result = join._ReadSide(side, schema, self.columnar)(
                rows, self.state, writer, task_epoch, TaskStats())
            writer.commit()
            spent += time.perf_counter() - began
            read.append(_handed_over(result))
        packed = _handed_over(_packed(read[0], read[1], _pairs(read[0], read[1])))
        output = self.step._output_schema(read[0].schema, read[1].schema)
        work = join._JoinRange(self.step.spec, self.step.sides, self.step.outer, output,
                               self.columnar)
        began = time.perf_counter()
        writer = self.state.writer(number, key_groups)
        emitted = work(packed, self.state, writer, task_epoch, TaskStats())
        writer.commit()
        spent += time.perf_counter() - began
        self.state.commit_epoch(number, {})
        return spent, emitted.num_rows


def _handed_over(table: pa.Table) -> pa.Table:
    """``table`` as the next stage's task receives it: fresh Arrow buffers (from Spark's
    rows), not the slices and chunks the stage built it from (filtering a table made of
    10,000 per-key pieces costs the per-key layout about 0.8 s more an epoch)."""
    return from_ipc(to_ipc(table.combine_chunks()))


def test_join_state(tmp_path: Path) -> None:
    rng = random.Random(7)
    layouts = {"per_key": _Layout(tmp_path / "keys.db", False),
               "columns": _Layout(tmp_path / "columns.db", True)}
    persons = [(f"p{i}", i, 0) for i in range(PERSONS)]
    loaded = {name: layout.epoch(0, [], persons)[0] for name, layout in layouts.items()}
    spent: dict[str, list[float]] = {name: [] for name in layouts}
    known = PERSONS
    for number in range(1, 1 + WARM_EPOCHS + EPOCHS):
        auctions = [(f"p{rng.randrange(known)}", n, number)
                    for n in range(AUCTIONS_PER_EPOCH)]
        new = [(f"p{known + i}", i, number) for i in range(NEW_PERSONS_PER_EPOCH)]
        known += NEW_PERSONS_PER_EPOCH
        emitted = set()
        for name, layout in layouts.items():
            seconds, rows = layout.epoch(number, auctions, new)
            emitted.add(rows)
            if number > WARM_EPOCHS:
                spent[name].append(seconds)
        assert len(emitted) == 1  # both layouts emit as many rows
    for layout in layouts.values():
        layout.store.close()
    per_key = statistics.median(spent["per_key"]) * 1000
    columns = statistics.median(spent["columns"]) * 1000
    figures = {"persons": PERSONS, "auctions_per_epoch": AUCTIONS_PER_EPOCH,
               "load_ms": {name: round(s * 1000, 1) for name, s in loaded.items()},
               "per_key_ms": round(per_key, 1), "columns_ms": round(columns, 1),
               "speedup": round(per_key / columns, 2)}
    print(f"\nupdating join's range tasks per epoch: {figures}")
    save_result("join_state", figures)
