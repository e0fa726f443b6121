"""Runs an updating join (:class:`spate.engine.planner.updating_join.UpdatingJoin`) epoch by epoch.

State, per side and key group: one entry per join key, ``[last seen (µs of event
time), rows]``, the rows an Arrow IPC stream of the side's columns plus a row
id and how many rows of the other side it has matched (what outer joins need
to know when to retract a NULL-padded row).

One epoch:

1. Each side's new rows are read natively, with their join key.
2. The stored rows of every key that has new rows are read back, and both
   sides (stored and new, each flagged) become temporary views.  Spark joins
   them with the query's own ON clause, keeping pairs with a new row: the
   epoch's new matches.
3. Output: each new pair, and for outer joins a NULL-padded row for a new
   row that matched nothing, or the retraction of one when an old row
   matches for the first time.  Row keys name the pair (``<left id>|<right id>``)
   so a debezium sink can pair a retraction with its replacement.
4. The touched keys' entries are written back; a key not seen for
   ``updating_ttl`` of event time (behind the watermark) is forgotten.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.planner.plan import EVENT_TIME, RETRACT, ROW_KEY
from spate.engine.planner.updating_join import KEY, UpdatingJoin
from spate.engine.runtime.group_entries import GroupEntries
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.engine.runtime.watermarks import END_OF_TIME
from spate.statestore import EpochWriter, PipelineState

_ID, _MATCHES, _NEW, _GROUP = "__spate_id", "__spate_matches", "__spate_new", "__spate_kg"
_NEVER = 2**63


class _Side:
    """One side of the join in one epoch: its stored and new rows, as one table."""

    def __init__(self, name: str, state_name: str, columns: tuple[str, ...]) -> None:
        self.name = name
        self.state_name = state_name
        #: what a stored row holds: the side's columns, event time and key
        self.stored_columns = [*columns, EVENT_TIME, KEY]
        self.table: pa.Table | None = None

    @property
    def struct_columns(self) -> list[str]:
        """The fields of the side's struct column in the join's output."""
        return self.stored_columns[:-1]


class UpdatingJoinStep(OperatorStep):
    def __init__(self, spec: UpdatingJoin, state: PipelineState, num_key_groups: int) -> None:
        self.spec = spec
        self.state = state
        self.num_key_groups = num_key_groups
        self.sides = (_Side(spec.left, f"{spec.operator_id}/left", spec.left_columns),
                      _Side(spec.right, f"{spec.operator_id}/right", spec.right_columns))
        self.outer = (spec.join_type in ("left", "full"), spec.join_type in ("right", "full"))
        #: key group -> earliest last-seen time of its keys, as committed (absent: unknown)
        self._oldest: dict[int, int] = {}

    def run(self, epoch: EpochContext) -> StepOutput:
        spark = epoch.spark
        new = [self._new_rows(epoch, side) for side in self.sides]
        writers = {g: w for w in epoch.writers for g in w.key_groups}
        touched: dict[int, set[str]] = defaultdict(set)
        for table in new:
            for key, group in zip(table.column(KEY).to_pylist(),
                                  table.column(_GROUP).to_pylist(), strict=True):
                if key is not None:
                    touched[group].add(key)
        entries = {(side.state_name, g): GroupEntries(self.state.read_group(
            side.state_name, g, epoch=epoch.previous_epoch))
            for side in self.sides for g in touched}
        for side, table in zip(self.sides, new, strict=True):
            side.table = self._side_table(side, table, touched, entries, epoch.number)
        pairs = self._new_pairs(spark) if any(t.num_rows for t in new) else []
        output = self._output(pairs)
        self._store(touched, entries, pairs)
        self._expire(epoch, entries, writers)
        for (name, group), stored in entries.items():
            stored.flush(writers[group], name, group)
        rows_in = sum(t.num_rows for t in new)
        return StepOutput(spark.createDataFrame(output), rows=output.num_rows, rows_in=rows_in)

    # -- reading ------------------------------------------------------------------

    def _new_rows(self, epoch: EpochContext, side: _Side) -> pa.Table:
        sql = self.spec.left_sql if side is self.sides[0] else self.spec.right_sql
        group = f"CAST(pmod(xxhash64(`{KEY}`), {self.num_key_groups}) AS INT) AS `{_GROUP}`"
        return epoch.spark.sql(f"SELECT *, {group} FROM ({sql})").toArrow()

    def _side_table(self, side: _Side, new: pa.Table, touched: dict[int, set[str]],
                    entries: dict[tuple[str, int], GroupEntries], epoch: int) -> pa.Table:
        """Stored rows of the touched keys, then the epoch's new rows (ids assigned)."""
        parts = []
        for group, keys in touched.items():
            stored = entries[(side.state_name, group)]
            for key in sorted(keys):
                value = stored.get((key,))
                if value is not None:
                    rows = _from_ipc(value[1])
                    parts.append(rows.append_column(
                        _NEW, pa.array([False] * rows.num_rows, pa.bool_())))
        fresh = new.select(side.stored_columns)
        ids = pa.array([f"{epoch}.{side.name}.{i}" for i in range(fresh.num_rows)], pa.string())
        fresh = fresh.append_column(_ID, ids).append_column(
            _MATCHES, pa.array([0] * fresh.num_rows, pa.int64())).append_column(
            _NEW, pa.array([True] * fresh.num_rows, pa.bool_()))
        if not parts:
            return fresh
        return pa.concat_tables([*parts, fresh], promote_options="permissive")

    def _new_pairs(self, spark: Any) -> list[tuple[int, int]]:
        """(left row, right row) index pairs of this epoch's new matches."""
        left, right = self.sides
        assert left.table is not None and right.table is not None
        views = []
        for side in self.sides:
            view = f"__spate_{self.spec.operator_id}_{'l' if side is left else 'r'}"
            spark.createDataFrame(side.table).createOrReplaceTempView(view)
            views.append(view)
        found = spark.sql(
            f"SELECT `{left.name}`.`{_ID}` AS l, `{right.name}`.`{_ID}` AS r "
            f"FROM `{views[0]}` AS `{left.name}` JOIN `{views[1]}` AS `{right.name}` "
            f"ON {self.spec.condition_sql} "
            f"WHERE `{left.name}`.`{_NEW}` OR `{right.name}`.`{_NEW}`").toArrow()
        positions = [{v: i for i, v in enumerate(t.column(_ID).to_pylist())}
                     for t in (left.table, right.table)]
        pairs = [(positions[0][lid], positions[1][rid]) for lid, rid in
                 zip(found.column("l").to_pylist(), found.column("r").to_pylist(), strict=True)]
        return sorted(pairs)

    # -- output -------------------------------------------------------------------

    def _output(self, pairs: list[tuple[int, int]]) -> pa.Table:
        rows: list[tuple[int | None, int | None, bool]] = [(a, b, False) for a, b in pairs]
        for index, side in enumerate(self.sides):
            if not self.outer[index]:
                continue
            assert side.table is not None
            added = _counts(pairs, index, side.table.num_rows)
            for row, (before, is_new) in enumerate(zip(
                    side.table.column(_MATCHES).to_pylist(),
                    side.table.column(_NEW).to_pylist(), strict=True)):
                padded = (row, None) if index == 0 else (None, row)
                if is_new and before + added[row] == 0:
                    rows.append((*padded, False))
                elif not is_new and before == 0 and added[row] > 0:
                    rows.append((*padded, True))
        columns: dict[str, pa.Array] = {}
        ids = []
        for index, side in enumerate(self.sides):
            assert side.table is not None
            picks = [r[index] for r in rows]
            columns[side.name] = _struct(side.table, side.struct_columns, picks)
            ids.append(side.table.column(_ID).take(pa.array(picks, pa.int64())).to_pylist())
        # The later of the two sides' event times (a NULL side skipped), for an
        # aggregate planned in the joining SELECT itself.
        times = [columns[side.name].field(EVENT_TIME).cast(pa.int64()) for side in self.sides]
        columns[EVENT_TIME] = pc.max_element_wise(*times, skip_nulls=True).cast(
            pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
        columns[RETRACT] = pa.array([r[2] for r in rows], pa.bool_())
        columns[ROW_KEY] = pa.array([f"{a or ''}|{b or ''}" for a, b in zip(*ids, strict=True)],
                                    pa.string())
        return pa.table(columns)

    # -- state --------------------------------------------------------------------

    def _store(self, touched: dict[int, set[str]], entries: dict[tuple[str, int], GroupEntries],
               pairs: list[tuple[int, int]]) -> None:
        """Put each touched key's rows (stored and new, match counts updated)."""
        for index, side in enumerate(self.sides):
            table = side.table
            assert table is not None
            matches = pc.add(table.column(_MATCHES),
                             pa.array(_counts(pairs, index, table.num_rows), pa.int64()))
            table = table.set_column(table.schema.get_field_index(_MATCHES), _MATCHES, matches)
            keys = table.column(KEY).to_pylist()
            rows_of: dict[str, list[int]] = defaultdict(list)
            for row, key in enumerate(keys):
                if key is not None:
                    rows_of[key].append(row)
            times = table.column(EVENT_TIME).cast(pa.int64()).to_pylist()
            for group, group_keys in touched.items():
                stored = entries[(side.state_name, group)]
                for key in group_keys:
                    if key not in rows_of:
                        continue
                    picked = table.take(pa.array(rows_of[key])).drop_columns([_NEW])
                    seen = max((t for t in (times[r] for r in rows_of[key]) if t is not None),
                               default=0)
                    stored.put((key,), [seen, _to_ipc(picked)])
                    self._oldest[group] = min(self._oldest.get(group, _NEVER), seen)

    def _expire(self, epoch: EpochContext, entries: dict[tuple[str, int], GroupEntries],
                writers: dict[int, EpochWriter]) -> None:
        """Forget keys not seen for ``updating_ttl`` behind the watermark.

        Works on this epoch's ``entries`` (adding the groups it sweeps), so a key
        seen again in this very epoch is judged by its new last-seen time.
        """
        watermark = epoch.watermark_after()
        if watermark >= END_OF_TIME:
            return  # every source ended: nothing more can match, keep the state as is
        horizon = watermark - self.spec.ttl_us
        for group in writers:
            if self._oldest.get(group, -_NEVER) > horizon:
                continue
            oldest = _NEVER
            for side in self.sides:
                slot = (side.state_name, group)
                if slot not in entries:
                    entries[slot] = GroupEntries(self.state.read_group(
                        side.state_name, group, epoch=epoch.previous_epoch))
                stored = entries[slot]
                for key in list(stored.keys()):
                    value = stored.get(key)
                    if value is None:
                        continue
                    if value[0] <= horizon:
                        stored.delete(key)
                    else:
                        oldest = min(oldest, value[0])
            self._oldest[group] = oldest


def _counts(pairs: list[tuple[int, int]], index: int, size: int) -> list[int]:
    counts = [0] * size
    for pair in pairs:
        counts[pair[index]] += 1
    return counts


def _struct(table: pa.Table, columns: list[str], picks: list[int | None]) -> pa.Array:
    indices = pa.array(picks, pa.int64())
    fields = [table.column(c).take(indices).combine_chunks() for c in columns]
    mask = pa.array([p is None for p in picks], pa.bool_())
    if not picks:
        return pa.StructArray.from_arrays(fields, names=columns)
    return pa.StructArray.from_arrays(fields, names=columns, mask=mask)


def _to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
