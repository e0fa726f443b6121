"""Runs an updating join (:class:`spate.engine.planner.updating_join.UpdatingJoin`) epoch by epoch.

State, per side and key group: one entry per join key, ``[last seen (µs of event
time), rows]``, the rows an Arrow IPC stream of the side's columns plus a row
id and how many rows of the other side it has matched (what outer joins need
to know when to retract a NULL-padded row); and per key group one entry
``()`` in ``<id>/timers``: the earliest last-seen time of the group's keys,
so expiry reads a group only when one of its keys may be due.

One epoch, with no row or state passing through the driver:

1. Each side's new rows are read natively, with their join key and key group.
2. Per side, one Spark task per key-group range reads back the stored rows of
   every key that has new rows (:mod:`.tasks`) and returns them with the new
   rows, each flagged and given an id.
3. Spark joins the two sides with the query's own ON clause, keeping pairs
   with a new row: the epoch's new matches.
4. One task per range takes its rows of both sides and its pairs, and emits
   each new pair and, for outer joins, a NULL-padded row for a new row that
   matched nothing, or the retraction of one when an old row matches for the
   first time.  Row keys name the pair (``<left id>|<right id>``) so a
   debezium sink can pair a retraction with its replacement.  It writes the
   touched keys back and forgets keys not seen for ``updating_ttl`` of event
   time behind the watermark.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spate.engine.planner.plan import EVENT_TIME, RETRACT, ROW_KEY, UpdatingJoin
from spate.engine.planner.plan import JOIN_KEY as KEY
from spate.engine.runtime.group_entries import GroupEntries
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.engine.runtime.tasks import (
    KEY_GROUP,
    TaskEpoch,
    TaskStats,
    arrow_schema_to_spark,
    spark_schema_to_arrow,
)
from spate.engine.runtime.values import from_ipc, to_ipc
from spate.engine.runtime.watermarks import END_OF_TIME
from spate.statestore import CachedPipelineState, EpochWriter, PipelineState
from spate.statestore.encoding import decode, encode

_ID, _MATCHES, _NEW = "__spate_id", "__spate_matches", "__spate_new"
#: stage 1's input: a row of the other side, only its key (its stored rows are read)
_PROBE = "__spate_probe"
#: stage 2's input: which part a row belongs to, and each part packed in a struct
_PART, _LEFT, _RIGHT, _PAIR = "__spate_part", "__spate_l", "__spate_r", "__spate_p"
_NEVER = 2**63


@dataclass(frozen=True)
class _Side:
    """One side of the join."""

    index: int
    name: str
    state_name: str
    #: what a stored row holds: the side's columns, event time and key
    stored_columns: tuple[str, ...]

    @property
    def struct_columns(self) -> list[str]:
        """The fields of the side's struct column in the join's output."""
        return list(self.stored_columns[:-1])


class UpdatingJoinStep(OperatorStep):
    def __init__(self, spec: UpdatingJoin, state: PipelineState, num_key_groups: int) -> None:
        del state  # tasks open the pipeline's state themselves
        self.spec = spec
        self.num_key_groups = num_key_groups
        self.sides = (
            _Side(0, spec.left, f"{spec.operator_id}/left", (*spec.left_columns, EVENT_TIME, KEY)),
            _Side(1, spec.right, f"{spec.operator_id}/right",
                  (*spec.right_columns, EVENT_TIME, KEY)))
        self.outer = (spec.join_type in ("left", "full"), spec.join_type in ("right", "full"))

    def run(self, epoch: EpochContext) -> StepOutput:
        spark = epoch.spark
        tables = []
        rows_in = 0
        group = f"CAST(pmod(xxhash64(`{KEY}`), {self.num_key_groups}) AS INT)"
        news = [spark.sql(f"SELECT {', '.join(f'`{c}`' for c in side.stored_columns)}, "
                          f"{group} AS `{KEY_GROUP}` FROM "
                          f"({self.spec.left_sql if side.index == 0 else self.spec.right_sql})")
                for side in self.sides]
        for side in self.sides:
            new = news[side.index]
            arrow = spark_schema_to_arrow(new.schema)
            schema = _side_schema(arrow)
            # the other side's new keys: their stored rows on this side may match now
            probes = news[1 - side.index].select(KEY, KEY_GROUP).withColumn(_PROBE, F.lit(True))
            rows = new.withColumn(_PROBE, F.lit(False)).unionByName(
                probes, allowMissingColumns=True)
            table, stats = epoch.run_ranges(rows, _ReadSide(side, schema),
                                            arrow_schema_to_spark(schema), None)
            rows_in += stats.rows_in
            tables.append(table)
        left, right = self.sides
        pairs = tables[0].alias(left.name).join(
            tables[1].alias(right.name), F.expr(self.spec.condition_sql)).where(
            F.col(f"`{left.name}`.`{_NEW}`") | F.col(f"`{right.name}`.`{_NEW}`")).select(
            F.col(f"`{left.name}`.`{_ID}`").alias("l"), F.col(f"`{right.name}`.`{_ID}`").alias("r"),
            F.col(f"`{left.name}`.`{KEY_GROUP}`").alias(KEY_GROUP))
        packed = _pack([tables[0], tables[1], pairs])
        output = self._output_schema(spark_schema_to_arrow(tables[0].schema),
                                     spark_schema_to_arrow(tables[1].schema))
        work = _JoinRange(self.spec, self.sides, self.outer, output)
        frame, stats = epoch.run_ranges(packed, work, arrow_schema_to_spark(output),
                                        self.spec.operator_id)
        return StepOutput(frame, rows=stats.rows_out, rows_in=rows_in)

    def _output_schema(self, left: pa.Schema, right: pa.Schema) -> pa.Schema:
        fields = []
        for side, schema in zip(self.sides, (left, right), strict=True):
            fields.append(pa.field(side.name, pa.struct(
                [schema.field(c) for c in side.struct_columns])))
        return pa.schema([*fields, pa.field(EVENT_TIME, pa.timestamp("us", tz="UTC")),
                          pa.field(RETRACT, pa.bool_()), pa.field(ROW_KEY, pa.string())])


def _side_schema(new: pa.Schema) -> pa.Schema:
    """A side's rows in one epoch: its stored columns, id, matches, new flag, key group."""
    fields = [f for f in new if f.name != KEY_GROUP]
    return pa.schema([*fields, pa.field(_ID, pa.string()), pa.field(_MATCHES, pa.int64()),
                      pa.field(_NEW, pa.bool_()), pa.field(KEY_GROUP, pa.int32())])


def _pack(frames: list[DataFrame]) -> DataFrame:
    """The three parts of a range's input as one frame: part number, key group, struct."""
    names = (_LEFT, _RIGHT, _PAIR)
    types = [frame.select(F.struct(*frame.columns).alias("s")).schema["s"].dataType
             for frame in frames]
    packed = []
    for i, frame in enumerate(frames):
        columns = [F.lit(i).alias(_PART), F.col(KEY_GROUP)]
        for j, kind in enumerate(types):
            value = F.struct(*(F.col(f"`{c}`") for c in frame.columns)) if i == j \
                else F.lit(None).cast(kind)
            columns.append(value.alias(names[j]))
        packed.append(frame.select(*columns))
    return packed[0].unionByName(packed[1]).unionByName(packed[2])


@dataclass(frozen=True)
class _ReadSide:
    """Stage 1 in a task: the stored rows of the keys with new rows, then the new rows."""

    side: _Side
    schema: pa.Schema

    def __call__(self, rows: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        new = rows.filter(pc.invert(rows.column(_PROBE))).drop_columns([_PROBE])
        stats.rows_in = new.num_rows
        touched: dict[int, set[str]] = defaultdict(set)
        for key, group in zip(rows.column(KEY).to_pylist(), rows.column(KEY_GROUP).to_pylist(),
                              strict=True):
            if key is not None:
                touched[group].add(key)
        stored_columns = [f.name for f in self.schema if f.name not in (_NEW, KEY_GROUP)]
        parts = []
        for group in sorted(touched):
            stored = GroupEntries.keyed(state, self.side.state_name, group,
                                        epoch.previous_epoch, [(k,) for k in touched[group]])
            for key in sorted(touched[group]):
                value = stored.get((key,))
                if value is not None:
                    rows = from_ipc(value[1]).select(stored_columns)
                    parts.append(rows.append_column(_NEW, pa.array([False] * rows.num_rows))
                                 .append_column(KEY_GROUP,
                                                pa.array([group] * rows.num_rows, pa.int32())))
        task = epoch.ranges.index((writer.key_groups.start, writer.key_groups.stop))
        count = new.num_rows
        ids = pa.array([f"{epoch.number}.{self.side.name}.{task}.{i}" for i in range(count)],
                       pa.string())
        fresh = new.drop_columns([KEY_GROUP]).append_column(_ID, ids) \
            .append_column(_MATCHES, pa.array([0] * count, pa.int64())) \
            .append_column(_NEW, pa.array([True] * count, pa.bool_())) \
            .append_column(KEY_GROUP, new.column(KEY_GROUP).cast(pa.int32()))
        return pa.concat_tables([*parts, fresh], promote_options="permissive").cast(self.schema)


@dataclass(frozen=True)
class _JoinRange:
    """Stage 2 in a task: output rows, state written back, keys expired."""

    spec: UpdatingJoin
    sides: tuple[_Side, _Side]
    outer: tuple[bool, bool]
    output_schema: pa.Schema

    def __call__(self, packed: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        part = packed.column(_PART)
        tables = [packed.filter(pc.equal(part, i)).column(name).combine_chunks().flatten()
                  for i, name in enumerate((_LEFT, _RIGHT, _PAIR))]
        left, right, found = (
            pa.Table.from_arrays(arrays, names=[f.name for f in packed.schema.field(name).type])
            for arrays, name in zip(tables, (_LEFT, _RIGHT, _PAIR), strict=True))
        sides = (left, right)
        positions = [{v: i for i, v in enumerate(t.column(_ID).to_pylist())} for t in sides]
        pairs = sorted((positions[0][lid], positions[1][rid]) for lid, rid in
                       zip(found.column("l").to_pylist(), found.column("r").to_pylist(),
                           strict=True))
        output = self._output(sides, pairs)
        entries: dict[tuple[str, int], GroupEntries] = {}
        timers = state.read_range(self.timers_name, writer.key_groups,
                                  epoch=epoch.previous_epoch)
        oldest = {g: decode(v[()]) if () in v else _NEVER for g, v in timers.items()}
        new_oldest = dict(oldest)
        self._store(sides, pairs, state, epoch, entries, new_oldest)
        self._expire(epoch, state, writer, entries, new_oldest)
        for (name, group), stored in entries.items():
            stored.flush(writer, name, group)
        for group in writer.key_groups:
            if new_oldest[group] != oldest[group]:
                if new_oldest[group] == _NEVER:
                    writer.delete(self.timers_name, group, ())
                else:
                    writer.put(self.timers_name, group, (), encode(new_oldest[group]))
        return output

    @property
    def timers_name(self) -> str:
        return f"{self.spec.operator_id}/timers"

    # -- output -------------------------------------------------------------------

    def _output(self, sides: tuple[pa.Table, pa.Table], pairs: list[tuple[int, int]]
                ) -> pa.Table:
        rows: list[tuple[int | None, int | None, bool]] = [(a, b, False) for a, b in pairs]
        for index, table in enumerate(sides):
            if not self.outer[index]:
                continue
            added = _counts(pairs, index, table.num_rows)
            for row, (before, is_new) in enumerate(zip(
                    table.column(_MATCHES).to_pylist(), table.column(_NEW).to_pylist(),
                    strict=True)):
                padded = (row, None) if index == 0 else (None, row)
                if is_new and before + added[row] == 0:
                    rows.append((*padded, False))
                elif not is_new and before == 0 and added[row] > 0:
                    rows.append((*padded, True))
        columns: dict[str, pa.Array] = {}
        ids = []
        for index, side in enumerate(self.sides):
            picks = [r[index] for r in rows]
            columns[side.name] = _struct(sides[index], side.struct_columns, picks)
            ids.append(sides[index].column(_ID).take(pa.array(picks, pa.int64())).to_pylist())
        # The later of the two sides' event times (a NULL side skipped), for an
        # aggregate planned in the joining SELECT itself.
        times = [columns[side.name].field(EVENT_TIME).cast(pa.int64()) for side in self.sides]
        columns[EVENT_TIME] = pc.max_element_wise(*times, skip_nulls=True).cast(
            pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
        columns[RETRACT] = pa.array([r[2] for r in rows], pa.bool_())
        columns[ROW_KEY] = pa.array([f"{a or ''}|{b or ''}" for a, b in zip(*ids, strict=True)],
                                    pa.string())
        return pa.table(columns).cast(self.output_schema)

    # -- state --------------------------------------------------------------------

    def _store(self, sides: tuple[pa.Table, pa.Table], pairs: list[tuple[int, int]],
               state: PipelineState, epoch: TaskEpoch,
               entries: dict[tuple[str, int], GroupEntries], oldest: dict[int, int]) -> None:
        """Put each touched key's rows (stored and new, match counts updated)."""
        for index, side in enumerate(self.sides):
            table = sides[index]
            if not pc.any(table.column(_NEW)).as_py():
                continue
            matches = pc.add(table.column(_MATCHES),
                             pa.array(_counts(pairs, index, table.num_rows), pa.int64()))
            table = table.set_column(table.schema.get_field_index(_MATCHES), _MATCHES, matches)
            rows_of: dict[tuple[int, str], list[int]] = defaultdict(list)
            for row, (key, group) in enumerate(zip(table.column(KEY).to_pylist(),
                                                   table.column(KEY_GROUP).to_pylist(),
                                                   strict=True)):
                if key is not None:
                    rows_of[(group, key)].append(row)
            times = table.column(EVENT_TIME).cast(pa.int64()).to_pylist()
            kept = table.drop_columns([_NEW, KEY_GROUP])
            for (group, key), picked_rows in sorted(rows_of.items()):
                slot = (side.state_name, group)
                if slot not in entries:  # only written: nothing to read before
                    entries[slot] = GroupEntries.keyed(
                        state, side.state_name, group, epoch.previous_epoch)
                seen = max((t for t in (times[r] for r in picked_rows) if t is not None),
                           default=0)
                entries[slot].put((key,), [seen, to_ipc(kept.take(pa.array(picked_rows)))])
                oldest[group] = min(oldest[group], seen)

    def _expire(self, epoch: TaskEpoch, state: PipelineState, writer: EpochWriter,
                entries: dict[tuple[str, int], GroupEntries], oldest: dict[int, int]) -> None:
        """Forget keys not seen for ``updating_ttl`` behind the watermark.

        Works on this epoch's ``entries`` (adding the groups it sweeps), so a key
        seen again in this very epoch is judged by its new last-seen time.
        """
        watermark = epoch.watermark_after
        if watermark >= END_OF_TIME:
            return  # every source ended: nothing more can match, keep the state as is
        horizon = watermark - self.spec.ttl_us
        for group in writer.key_groups:
            if oldest[group] > horizon:
                continue
            earliest = _NEVER
            for side in self.sides:
                slot = (side.state_name, group)
                if slot not in entries:
                    entries[slot] = GroupEntries.whole(
                        state, side.state_name, group, epoch.previous_epoch)
                stored = entries[slot]
                for key in list(stored.keys()):
                    value = stored.get(key)
                    if value is None:
                        continue
                    if value[0] <= horizon:
                        stored.delete(key)
                    else:
                        earliest = min(earliest, value[0])
            oldest[group] = earliest


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

