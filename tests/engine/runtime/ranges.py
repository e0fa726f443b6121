"""A range operator's work over epochs, as Spark's tasks would run it, without Spark.

Each epoch's partials go to every key-group range in turn (a range's rows only,
one writer each, as one task per range), over a real embedded store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from spate.engine.runtime.tasks import RangeWork, TaskEpoch, TaskStats
from spate.engine.runtime.watermarks import NO_WATERMARK
from spate.statestore import open_store, split_key_groups


def through_ranges(work: RangeWork, path: Path, partials: list[pa.Table],
                   watermarks: list[int], groups: int, parallelism: int
                   ) -> Iterator[tuple[pa.Table, TaskStats]]:
    """Epoch ``i``'s ``partials[i]`` (``__kg``: each row's key group) through ``work`` on
    each of ``parallelism`` ranges of ``groups`` key groups, the watermark moving to
    ``watermarks[i]``; yields each range's output and stats. State is in the SQLite
    store at ``path``."""
    with open_store(f"sqlite:///{path}") as store:
        state = store.pipeline("t", "p")
        ranges = split_key_groups(groups, parallelism)
        before = NO_WATERMARK
        for epoch, (table, after) in enumerate(zip(partials, watermarks, strict=True)):
            state.begin_epoch(epoch, ranges)
            task_epoch = TaskEpoch(b"", "t", "p", "run", epoch, epoch - 1 if epoch else None,
                                   tuple((r.start, r.stop) for r in ranges), before, after)
            for key_groups in ranges:
                mine = [g in key_groups for g in table.column("__kg").to_pylist()]
                stats = TaskStats()
                writer = state.writer(epoch, key_groups)
                output = work(table.filter(pa.array(mine, pa.bool_())), state, writer,
                              task_epoch, stats)
                writer.commit()
                yield output, stats
            state.commit_epoch(epoch, {})
            before = after


def entries_left(path: Path, names: list[str], groups: int) -> int:
    """How many entries the store at ``path`` holds under operator ``names``."""
    with open_store(f"sqlite:///{path}") as store:
        state = store.pipeline("t", "p")
        return sum(1 for name in names for _ in state.scan(name, range(groups)))
