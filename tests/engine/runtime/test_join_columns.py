"""The updating join's rows kept in columns against the per-key layout, over real
(embedded) state stores and without Spark: the same new rows go through both stages
of both layouts epoch by epoch (several ranges, every join kind, NULL keys, rows
without an event time, updating_ttl expiry, more epochs than a group keeps
entries, input ending); every epoch both must emit the same rows, and both must
end holding the same rows.  The columnar layout writes at most one entry per key
group, side and epoch, and a group never holds more than ENTRIES_PER_GROUP."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.engine.planner.plan import EVENT_TIME, JOIN_KEY, UpdatingJoin
from spate.engine.runtime import join
from spate.engine.runtime.tasks import KEY_GROUP, TaskEpoch, TaskStats
from spate.engine.runtime.updating_columns import ENTRIES_PER_GROUP
from spate.engine.runtime.values import from_ipc
from spate.engine.runtime.watermarks import END_OF_TIME, NO_WATERMARK
from spate.statestore import PipelineState, open_store, split_key_groups
from spate.statestore.encoding import decode

GROUPS = 6
SECOND = 1_000_000
#: a side's new row: join key (None: NULL), value, event time (s; None: none)
Row = tuple[Any, int, Any]
_TIME = pa.timestamp("us", tz="UTC")


def _spec(kind: str, ttl_s: int) -> UpdatingJoin:
    return UpdatingJoin(operator_id="q0_join", output_view="v", join_type=kind, left="l",
                        right="r", left_sql="", right_sql="", left_columns=("lv",),
                        right_columns=("rv",), condition_sql="l.k = r.k",
                        ttl_us=ttl_s * SECOND)


def _group(key: str, groups: int = GROUPS) -> int:
    return sum(key.encode()) % groups


def _new_rows(rows: list[Row], column: str, groups: int = GROUPS) -> pa.Table:
    """A side's new rows as stage 1 reads them: its columns, event time, key, key group."""
    keys = [None if k is None else f'["{k}"]' for k, _, _ in rows]
    return pa.table({
        column: pa.array([v for _, v, _ in rows], pa.int64()),
        EVENT_TIME: pa.array([None if t is None else t * SECOND for _, _, t in rows], _TIME),
        JOIN_KEY: pa.array(keys, pa.string()),
        KEY_GROUP: pa.array([None if k is None else _group(k, groups) for k in keys],
                            pa.int32())})


def _stage_one(new: pa.Table, other: pa.Table) -> pa.Table:
    """A side's new rows and the other side's new keys as probes (``run``'s union)."""
    probes = other.select([JOIN_KEY, KEY_GROUP])
    probes = probes.append_column(join._PROBE, pa.repeat(pa.scalar(True), probes.num_rows))
    rows = new.append_column(join._PROBE, pa.repeat(pa.scalar(False), new.num_rows))
    return pa.concat_tables([rows, probes], promote_options="permissive")


def _pairs(left: pa.Table, right: pa.Table) -> pa.Table:
    """What Spark's join of the two stage-1 outputs on the key gives: pairs with a new row."""
    def side(table: pa.Table, suffix: str) -> pa.Table:
        return pa.table({JOIN_KEY: table.column(JOIN_KEY), f"id{suffix}": table.column(join._ID),
                         f"new{suffix}": table.column(join._NEW),
                         f"g{suffix}": table.column(KEY_GROUP)})
    found = side(left, "l").join(side(right, "r"), keys=JOIN_KEY, use_threads=False)
    found = found.filter(pc.or_(found.column("newl"), found.column("newr")))
    return pa.table({"l": found.column("idl"), "r": found.column("idr"),
                     KEY_GROUP: found.column("gl")})


def _packed(left: pa.Table, right: pa.Table, pairs: pa.Table) -> pa.Table:
    """The three parts in one table, as ``join._pack`` lays them out."""
    parts = []
    structs = [pa.StructArray.from_arrays([c.combine_chunks() for c in t.columns],
                                          names=t.column_names) for t in (left, right, pairs)]
    for i, table in enumerate((left, right, pairs)):
        columns = {join._PART: pa.repeat(pa.scalar(i), table.num_rows),
                   KEY_GROUP: table.column(KEY_GROUP)}
        for j, name in enumerate((join._LEFT, join._RIGHT, join._PAIR)):
            columns[name] = structs[j] if i == j else pa.nulls(table.num_rows, structs[j].type)
        parts.append(pa.table(columns))
    return pa.concat_tables(parts)


def _held(state: PipelineState, step: join.UpdatingJoinStep, columnar: bool) -> Counter[Any]:
    """The rows the state holds at the end: side, key, id, and on an outer side its
    matches (an inner side's count is not kept up to date: nothing reads it)."""
    held: Counter[Any] = Counter()
    for side in step.sides:
        if columnar:
            tables = [join._held_rows(state.read_range(side.rows_name, range(GROUPS)),
                                      range(GROUPS), _stored(side))]
        else:
            tables = [from_ipc(decode(value)[1])
                      for _, _, value in state.scan(side.state_name, range(GROUPS))]
        for table in tables:
            for row in table.to_pylist():
                matches = row[join._MATCHES] if step.outer[side.index] else None
                held[(side.name, row[JOIN_KEY], row[join._ID], matches)] += 1
    return held


def _stored(side: join._Side) -> pa.Schema:
    value = "lv" if side.index == 0 else "rv"
    return pa.schema([pa.field(value, pa.int64()), pa.field(EVENT_TIME, _TIME),
                      pa.field(JOIN_KEY, pa.string()), pa.field(join._ID, pa.string()),
                      pa.field(join._MATCHES, pa.int64())])


def _run(spec: UpdatingJoin, columnar: bool, path: Path,
         epochs: list[tuple[list[Row], list[Row], int]], parallelism: int
         ) -> tuple[list[Counter[Any]], Counter[Any]]:
    """Each epoch's new rows through both stages of one layout; returns each epoch's
    output rows and the rows held at the end."""
    outputs: list[Counter[Any]] = []
    with open_store(f"sqlite:///{path}") as store:
        state = store.pipeline("t", "p")
        step = join.UpdatingJoinStep(spec, state, GROUPS)
        ranges = split_key_groups(GROUPS, parallelism)
        before = NO_WATERMARK
        for epoch, (lefts, rights, after) in enumerate(epochs):
            state.begin_epoch(epoch, ranges)
            task_epoch = TaskEpoch(b"", "t", "p", "run", epoch, epoch - 1 if epoch else None,
                                   tuple((r.start, r.stop) for r in ranges), before, after)
            news = (_new_rows(lefts, "lv"), _new_rows(rights, "rv"))
            emitted: Counter[Any] = Counter()
            for key_groups in ranges:  # each range as its tasks would
                def mine(table: pa.Table, groups: range = key_groups) -> pa.Table:
                    return table.filter(pc.is_in(table.column(KEY_GROUP),
                                                 value_set=pa.array(list(groups), pa.int32())))
                read = []
                for side in step.sides:
                    rows = mine(_stage_one(news[side.index], news[1 - side.index]))
                    schema = join._side_schema(news[side.index].schema)
                    writer = state.writer(epoch, key_groups)
                    read.append(join._ReadSide(side, schema, columnar)(
                        rows, state, writer, task_epoch, TaskStats()))
                    writer.commit()
                output = step._output_schema(read[0].schema, read[1].schema)
                work = join._JoinRange(spec, step.sides, step.outer, output, columnar)
                writer = state.writer(epoch, key_groups)
                table = work(_packed(read[0], read[1], _pairs(read[0], read[1])), state,
                             writer, task_epoch, TaskStats())
                writer.commit()
                emitted.update(repr(row) for row in table.to_pylist())
            outputs.append(emitted)
            state.commit_epoch(epoch, {})
            if columnar:
                for side in step.sides:
                    entries = state.read_range(side.rows_name, range(GROUPS))
                    assert all(len(e) <= ENTRIES_PER_GROUP for e in entries.values())
                    # this epoch wrote at most one entry per group
                    assert sum((epoch,) in e for e in entries.values()) <= GROUPS
            before = after
        return outputs, _held(state, step, columnar)


_ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", None]),
                           st.integers(0, 9), st.one_of(st.none(), st.integers(0, 200))),
                 max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["inner", "left", "right", "full"]),
       epochs=st.lists(st.tuples(_ROWS, _ROWS), min_size=1, max_size=ENTRIES_PER_GROUP + 4),
       parallelism=st.integers(1, 3), ttl_s=st.sampled_from([5, 40, 10_000]))
def test_columns_emit_and_keep_what_the_per_key_layout_does(
        kind: str, epochs: list[tuple[list[Row], list[Row]]], parallelism: int, ttl_s: int,
        tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(kind, ttl_s)
    timed: list[tuple[list[Row], list[Row], int]] = []
    watermark = NO_WATERMARK
    for lefts, rights in epochs:
        times = [t * SECOND for _, _, t in lefts + rights if t is not None]
        watermark = max([watermark, *times])
        timed.append((lefts, rights, watermark))
    timed.append(([], [], END_OF_TIME))
    folder = tmp_path_factory.mktemp("stores")
    per_key, keys_held = _run(spec, False, folder / "keys.db", timed, parallelism)
    in_columns, columns_held = _run(spec, True, folder / "columns.db", timed, parallelism)
    for epoch, (expected, got) in enumerate(zip(per_key, in_columns, strict=True)):
        assert got == expected, f"epoch {epoch} of {kind} {timed} {parallelism} {ttl_s}"
    assert columns_held == keys_held, f"{kind} {timed} {parallelism} {ttl_s}"


def test_a_key_updated_in_every_epoch_keeps_a_group_to_few_entries(tmp_path: Path) -> None:
    """More epochs than a group keeps entries: the group folds into one, and the key's
    rows are all there; expiry then empties the state."""
    spec = _spec("inner", 30)
    epochs: list[tuple[list[Row], list[Row], int]] = [
        ([("a", n, n)], [("a", 100 + n, n)] if n % 3 == 0 else [], n * SECOND)
        for n in range(3 * ENTRIES_PER_GROUP)]
    outputs, held = _run(spec, True, tmp_path / "columns.db", epochs, 1)
    # Every new left row meets every right row so far and vice versa: 24 left rows,
    # 8 right rows, each pair once.
    assert sum(sum(out.values()) for out in outputs) == 3 * ENTRIES_PER_GROUP * ENTRIES_PER_GROUP
    assert Counter(side for side, *_ in held) == {"l": 3 * ENTRIES_PER_GROUP,
                                                  "r": ENTRIES_PER_GROUP}
    late = [*epochs, ([("z", 0, 500)], [], 500 * SECOND)]
    _, after_expiry = _run(spec, True, tmp_path / "expired.db", late, 1)
    assert {key for _, key, *_ in after_expiry} == {'["z"]'}


def test_a_run_over_per_key_join_state_keeps_the_per_key_path(tmp_path: Path) -> None:
    spec = _spec("inner", 100)
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        state = store.pipeline("t", "p")
        assert not join.UpdatingJoinStep(spec, state, GROUPS)._keyed_state()
        ranges = split_key_groups(GROUPS, 1)
        state.begin_epoch(0, ranges)
        writer = state.writer(0, ranges[0])
        writer.put(f"{spec.operator_id}/right", 3, ('["a"]',), b"\x90")
        writer.commit()
        state.commit_epoch(0, {})
        assert join.UpdatingJoinStep(spec, state, GROUPS)._keyed_state()
