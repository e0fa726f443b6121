"""Runs an updating join (:class:`spate.engine.planner.updating_join.UpdatingJoin`) epoch by epoch.

State, per side (``<id>/left_rows``, ``<id>/right_rows``) and key group: the
rows of the side's keys as Arrow IPC tables — the side's columns, the join key,
a row id and how many rows of the other side the row has matched (what outer
joins need to know when to retract a NULL-padded row; kept up to date on outer
sides only).  An epoch that changes
keys of a group writes one entry ``(epoch,)`` holding every row of just those
keys; a key's rows are those of the latest entry that holds it.  An epoch that
changes a group already holding :data:`ENTRIES_PER_GROUP` entries, or sweeps
it for expiry, writes the group whole as one entry and deletes the others, so
writes stay proportional to the keys an epoch touches and reads to the group's
rows.  Per key group one entry ``()`` in ``<id>/timers``: the earliest
last-seen time (µs of event time) of the group's keys, so expiry sweeps a group
only when one of its keys may be due.

State written by an earlier version, one entry per join key (``<id>/left``,
``<id>/right``: ``[last seen, rows]``), keeps that layout: a run that finds it
reads and writes it key by key.

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

Both stages work on whole Arrow and NumPy columns of a range: the Python
statements they run are per key group (one IPC entry read or written), not
per key or row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
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
from spate.engine.runtime.updating_columns import ENTRIES_PER_GROUP
from spate.engine.runtime.values import from_ipc, to_ipc
from spate.engine.runtime.watermarks import END_OF_TIME
from spate.statestore import CachedPipelineState, EpochWriter, PipelineState, UserKey
from spate.statestore.encoding import decode, encode

_ID, _MATCHES, _NEW = "__spate_id", "__spate_matches", "__spate_new"
#: stage 1's input: a row of the other side, only its key (its stored rows are read)
_PROBE = "__spate_probe"
#: stage 2's input: which part a row belongs to, and each part packed in a struct
_PART, _LEFT, _RIGHT, _PAIR = "__spate_part", "__spate_l", "__spate_r", "__spate_p"
_NEVER = 2**63
#: a row without an event time, while its key's latest time is found
_NO_TIME = -(2**63)


@dataclass(frozen=True)
class _Side:
    """One side of the join."""

    index: int
    name: str
    #: the side's rows, one entry per key (the layout of an earlier version)
    state_name: str
    #: the side's rows, in columns (one IPC table per group and epoch that changed it)
    rows_name: str
    #: what a stored row holds: the side's columns, event time and key
    stored_columns: tuple[str, ...]

    @classmethod
    def of(cls, spec: UpdatingJoin, index: int, name: str, columns: tuple[str, ...]) -> _Side:
        part = f"{spec.operator_id}/{('left', 'right')[index]}"
        return cls(index, name, part, f"{part}_rows", (*columns, EVENT_TIME, KEY))

    @property
    def struct_columns(self) -> list[str]:
        """The fields of the side's struct column in the join's output."""
        return list(self.stored_columns[:-1])


class UpdatingJoinStep(OperatorStep):
    def __init__(self, spec: UpdatingJoin, state: PipelineState, num_key_groups: int) -> None:
        self.spec = spec
        self.state = state
        self.num_key_groups = num_key_groups
        self.sides = (_Side.of(spec, 0, spec.left, spec.left_columns),
                      _Side.of(spec, 1, spec.right, spec.right_columns))
        self.outer = (spec.join_type in ("left", "full"), spec.join_type in ("right", "full"))
        #: whether the rows are kept in columns (decided once a run: state an earlier
        #: version kept key by key stays so)
        self._columnar: bool | None = None

    def _keyed_state(self) -> bool:
        """Whether the join holds rows in the per-key layout of an earlier version."""
        groups = range(self.num_key_groups)
        return any(next(iter(self.state.scan(side.state_name, groups)), None) is not None
                   for side in self.sides)

    def run(self, epoch: EpochContext) -> StepOutput:
        spark = epoch.spark
        if self._columnar is None:
            self._columnar = not self._keyed_state()
        tables = []
        reads = []
        group = f"CAST(pmod(xxhash64(`{KEY}`), {self.num_key_groups}) AS INT)"
        news = [spark.sql(f"SELECT {', '.join(f'`{c}`' for c in side.stored_columns)}, "
                          f"{group} AS `{KEY_GROUP}` FROM "
                          f"({self.spec.left_sql if side.index == 0 else self.spec.right_sql})")
                for side in self.sides]
        for side in self.sides:
            new = news[side.index]
            schema = _side_schema(spark_schema_to_arrow(new.schema))
            # the other side's new keys: their stored rows on this side may match now
            probes = news[1 - side.index].select(KEY, KEY_GROUP).withColumn(_PROBE, F.lit(True))
            rows = new.withColumn(_PROBE, F.lit(False)).unionByName(
                probes, allowMissingColumns=True)
            table, stats = epoch.run_ranges(rows, _ReadSide(side, schema, self._columnar),
                                            arrow_schema_to_spark(schema), None)
            reads.append(stats)
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
        work = _JoinRange(self.spec, self.sides, self.outer, output, self._columnar)
        frame, _ = epoch.run_ranges(packed, work, arrow_schema_to_spark(output),
                                    self.spec.operator_id)
        return StepOutput(frame, inputs=tuple(reads))

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
    #: the side's rows are kept in columns (else key by key: an earlier version's state)
    columnar: bool = True

    def __call__(self, rows: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        new = rows.filter(pc.invert(rows.column(_PROBE))).drop_columns([_PROBE])
        stats.rows_in = new.num_rows
        stored_schema = _stored_schema(self.schema)
        if self.columnar:
            wanted = rows.column(KEY).filter(pc.is_valid(rows.column(KEY))).combine_chunks()
            groups = np.unique(rows.column(KEY_GROUP).filter(
                pc.is_valid(rows.column(KEY))).to_numpy())
            held = _held_rows(state.read_range(self.side.rows_name, writer.key_groups,
                                               epoch=epoch.previous_epoch),
                              groups.tolist(), stored_schema) if len(wanted) else None
            parts = [] if held is None else [
                _with_new(held.filter(pc.is_in(held.column(KEY), value_set=wanted)), False)]
        else:
            parts = self._keyed(rows, state, epoch, stored_schema)
        task = epoch.ranges.index((writer.key_groups.start, writer.key_groups.stop))
        count = new.num_rows
        numbers = pa.array(np.arange(count, dtype=np.int64)).cast(pa.string())
        ids = pc.binary_join_element_wise(
            f"{epoch.number}.{self.side.name}.{task}.", numbers, "")
        fresh = new.drop_columns([KEY_GROUP]).append_column(_ID, ids) \
            .append_column(_MATCHES, _filled(count, 0, pa.int64())) \
            .append_column(KEY_GROUP, new.column(KEY_GROUP).cast(pa.int32()))
        return pa.concat_tables([*parts, _with_new(fresh, True)],
                                promote_options="permissive").cast(self.schema)

    def _keyed(self, rows: pa.Table, state: CachedPipelineState, epoch: TaskEpoch,
               stored_schema: pa.Schema) -> list[pa.Table]:
        """The stored rows of the keys in ``rows``, from one state entry per key."""
        parts = []
        for group, keys in _keys_by_group(rows):
            stored = GroupEntries.keyed(state, self.side.state_name, group,
                                        epoch.previous_epoch, [(k,) for k in keys])
            for key in keys:
                value = stored.get((key,))
                if value is not None:
                    table = from_ipc(value[1]).select(stored_schema.names)
                    parts.append(_with_new(table.append_column(
                        KEY_GROUP, _filled(table.num_rows, group, pa.int32())), False))
        return parts


def _stored_schema(side_schema: pa.Schema) -> pa.Schema:
    """What state keeps of a side's row (:func:`_side_schema` less the epoch's flags)."""
    return pa.schema([f for f in side_schema if f.name not in (_NEW, KEY_GROUP)])


def _with_new(table: pa.Table, new: bool) -> pa.Table:
    """``table`` (stored columns, then its key group) with the new-row flag before the group."""
    at = table.schema.get_field_index(KEY_GROUP)
    return table.add_column(at, _NEW, _filled(table.num_rows, new))


def _held_rows(entries: Mapping[int, Mapping[UserKey, bytes]], groups: Iterable[int],
               schema: pa.Schema) -> pa.Table:
    """The rows ``groups`` hold (``schema``'s columns and the key group): of each key,
    those of the latest entry holding it."""
    tables, ranks = [], []
    for group in groups:
        # Newest first, so that a key's first row is in its latest entry.
        for newer, at in enumerate(sorted(entries[group], reverse=True)):
            table = from_ipc(entries[group][at]).select(schema.names)
            tables.append(table.append_column(
                KEY_GROUP, _filled(table.num_rows, group, pa.int32())))
            ranks.append(np.full(table.num_rows, newer, np.int64))
    if not tables:
        return pa.table({**{f.name: pa.array([], f.type) for f in schema},
                         KEY_GROUP: pa.array([], pa.int32())})
    table = pa.concat_tables(tables, promote_options="permissive")
    rank = np.concatenate(ranks)
    if rank.any():  # some group holds more than one entry: keep each key's latest
        keys = table.column(KEY)
        first = pc.index_in(keys, value_set=keys.combine_chunks()).to_numpy()
        table = table.filter(pa.array(rank[first] == rank))
    return table


def _unpack(packed: pa.Table, part: int, name: str) -> pa.Table:
    """Part ``part`` of a packed table (:func:`_pack`): its struct column ``name``'s fields."""
    rows = packed.filter(pc.equal(packed.column(_PART), part)).column(name).combine_chunks()
    return pa.Table.from_arrays(rows.flatten(), names=[f.name for f in rows.type])


@dataclass(frozen=True)
class _JoinRange:
    """Stage 2 in a task: output rows, state written back, keys expired."""

    spec: UpdatingJoin
    sides: tuple[_Side, _Side]
    outer: tuple[bool, bool]
    output_schema: pa.Schema
    #: the sides' rows are kept in columns (else key by key: an earlier version's state)
    columnar: bool = True

    def __call__(self, packed: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        left, right, found = (_unpack(packed, i, name)
                              for i, name in enumerate((_LEFT, _RIGHT, _PAIR)))
        sides = (left, right)
        pairs = _pairs(found, sides)
        output = self._output(sides, pairs)
        timers = state.read_range(self.timers_name, writer.key_groups,
                                  epoch=epoch.previous_epoch)
        oldest = {g: decode(v[()]) if () in v else _NEVER for g, v in timers.items()}
        if self.columnar:
            new_oldest = self._keep(sides, pairs, state, writer, epoch, oldest)
        else:
            new_oldest = dict(oldest)
            entries: dict[tuple[str, int], GroupEntries] = {}
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

    def _output(self, sides: tuple[pa.Table, pa.Table], pairs: np.ndarray) -> pa.Table:
        """The new pairs (in order), then per outer side in row order a NULL-padded row
        for each new row that matched nothing and the retraction of one for each stored
        row matching for the first time."""
        picks = [[pairs[:, 0]], [pairs[:, 1]]]
        retract = [np.zeros(len(pairs), dtype=bool)]
        for index, table in enumerate(sides):
            if not self.outer[index]:
                continue
            before = table.column(_MATCHES).to_numpy()
            is_new = table.column(_NEW).to_numpy(zero_copy_only=False)
            added = np.bincount(pairs[:, index], minlength=table.num_rows)
            padded = is_new & (before + added == 0)
            withdrawn = ~is_new & (before == 0) & (added > 0)
            rows = np.flatnonzero(padded | withdrawn)
            picks[index].append(rows)
            picks[1 - index].append(np.full(len(rows), -1, dtype=np.int64))
            retract.append(withdrawn[rows])
        columns: dict[str, pa.Array] = {}
        ids = []
        for index, side in enumerate(self.sides):
            chosen = np.concatenate(picks[index]).astype(np.int64)
            indices = pa.array(chosen, pa.int64(), mask=chosen < 0)
            columns[side.name] = _struct(sides[index], side.struct_columns, indices)
            ids.append(pc.fill_null(sides[index].column(_ID).take(indices), ""))
        # The later of the two sides' event times (a NULL side skipped), for an
        # aggregate planned in the joining SELECT itself.
        times = [columns[side.name].field(EVENT_TIME).cast(pa.int64()) for side in self.sides]
        columns[EVENT_TIME] = pc.max_element_wise(*times, skip_nulls=True).cast(
            pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
        columns[RETRACT] = pa.array(np.concatenate(retract), pa.bool_())
        columns[ROW_KEY] = pc.binary_join_element_wise(*ids, "|")
        return pa.table(columns).cast(self.output_schema)

    # -- state --------------------------------------------------------------------

    def _keep(self, sides: tuple[pa.Table, pa.Table], pairs: np.ndarray,
              state: CachedPipelineState, writer: EpochWriter, epoch: TaskEpoch,
              oldest: Mapping[int, int]) -> dict[int, int]:
        """Stage the rows of each key the epoch changed, in columns, sweep the groups
        due for expiry, and return each group's earliest last-seen time after."""
        watermark = epoch.watermark_after
        horizon = watermark - self.spec.ttl_us
        changed = [self._changed_rows(sides[index], pairs[:, index], index)
                   for index in range(len(self.sides))]
        # A key written this epoch is judged by its new last-seen time.
        seen = dict(oldest)
        for rows in changed:
            _earliest(rows, seen)
        # Once every source ended nothing more can match: the state is kept as it is.
        due = {g for g in writer.key_groups if watermark < END_OF_TIME and seen[g] <= horizon}
        after = {g: _NEVER if g in due else seen[g] for g in writer.key_groups}
        at = (epoch.number,)
        for side, rows in zip(self.sides, changed, strict=True):
            changed_groups = set(np.unique(rows.column(KEY_GROUP).to_numpy()).tolist())
            entries = state.read_range(side.rows_name, writer.key_groups,
                                       epoch=epoch.previous_epoch)
            # A group swept for expiry, or crowded with entries, is written whole.
            whole = sorted(g for g in writer.key_groups if (
                g in due and (entries[g] or g in changed_groups))
                or (g in changed_groups and len(entries[g]) >= ENTRIES_PER_GROUP))
            in_whole = pc.is_in(rows.column(KEY_GROUP), value_set=pa.array(whole, pa.int32()))
            if whole:
                held = _held_rows(entries, whole, _stored_schema(rows.schema))
                held = held.filter(pc.invert(pc.is_in(
                    held.column(KEY), value_set=rows.column(KEY).combine_chunks())))
                rewritten = _drop_expired(pa.concat_tables([held, rows.filter(in_whole)]),
                                          due, horizon)
                for group in whole:
                    for key in entries[group]:
                        writer.delete(side.rows_name, group, tuple(key))
                for group, part in _by_group(rewritten):
                    writer.put(side.rows_name, group, at, to_ipc(part))
                _earliest(rewritten, after)
            for group, part in _by_group(rows.filter(pc.invert(in_whole))):
                writer.put(side.rows_name, group, at, to_ipc(part))
        return after

    def _changed_rows(self, table: pa.Table, matched: np.ndarray, index: int) -> pa.Table:
        """Every row, match counts updated, of the keys this epoch changed on one side: a
        key with a new row, and on an outer side also one whose stored row matched (its
        count decides whether its NULL-padded row was retracted already).  Stored columns
        and the key group."""
        added = np.bincount(matched, minlength=table.num_rows)
        matches = pc.add(table.column(_MATCHES), pa.array(added, pa.int64()))
        table = table.set_column(table.schema.get_field_index(_MATCHES), _MATCHES, matches)
        touched = table.column(_NEW).to_numpy(zero_copy_only=False).copy()
        if self.outer[index]:
            touched |= added > 0
        keyed = pc.is_valid(table.column(KEY))
        changed_keys = table.column(KEY).filter(pc.and_(keyed, pa.array(touched)))
        rows = pc.and_(keyed, pc.is_in(table.column(KEY), value_set=changed_keys.combine_chunks()))
        return table.filter(rows).drop_columns([_NEW])

    def _store(self, sides: tuple[pa.Table, pa.Table], pairs: np.ndarray,
               state: PipelineState, epoch: TaskEpoch,
               entries: dict[tuple[str, int], GroupEntries], oldest: dict[int, int]) -> None:
        """Put each touched key's rows (stored and new, match counts updated)."""
        for index, side in enumerate(self.sides):
            table = sides[index]
            added = np.bincount(pairs[:, index], minlength=table.num_rows)
            # A side is written back when it has new rows, and an outer side also when a
            # stored row matched: its count decides whether its NULL-padded row was
            # retracted already.
            if not pc.any(table.column(_NEW)).as_py() and not (self.outer[index]
                                                               and added.any()):
                continue
            matches = pc.add(table.column(_MATCHES), pa.array(added, pa.int64()))
            table = table.set_column(table.schema.get_field_index(_MATCHES), _MATCHES, matches)
            # the rows of each (group, key) in row order: one sort, then slices
            rows = pc.indices_nonzero(pc.is_valid(table.column(KEY))).to_numpy()
            keyed = pa.table({"g": table.column(KEY_GROUP).take(rows),
                              "k": table.column(KEY).take(rows), "r": rows})
            order = pc.sort_indices(keyed, [("g", "ascending"), ("k", "ascending"),
                                            ("r", "ascending")])
            keyed = keyed.take(order)
            groups = keyed.column("g").to_numpy()
            picked = keyed.column("r").to_numpy()
            times = table.column(EVENT_TIME).cast(pa.int64()).fill_null(_NO_TIME).to_numpy()
            starts = _segment_starts(groups, keyed.column("k"))
            latest = np.maximum.reduceat(times[picked], starts) if len(starts) else starts
            keys = keyed.column("k").take(starts).to_pylist()  # one Python string per key
            kept = table.drop_columns([_NEW, KEY_GROUP])
            ends = [*starts[1:].tolist(), len(picked)]
            for start, end, last, key in zip(starts.tolist(), ends, latest.tolist(), keys,
                                             strict=True):
                group = int(groups[start])
                slot = (side.state_name, group)
                if slot not in entries:  # only written: nothing to read before
                    entries[slot] = GroupEntries.keyed(
                        state, side.state_name, group, epoch.previous_epoch)
                seen = 0 if last == _NO_TIME else last
                entries[slot].put((key,), [seen, to_ipc(kept.take(picked[start:end]))])
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


def _last_seen(rows: pa.Table) -> pa.Table:
    """Each key of ``rows`` (stored columns and key group), its group and its last-seen
    time: its rows' latest event time, 0 when none has one."""
    times = pc.fill_null(rows.column(EVENT_TIME).cast(pa.int64()), _NO_TIME)
    latest = pa.table({KEY: rows.column(KEY), KEY_GROUP: rows.column(KEY_GROUP),
                       "t": times}).group_by([KEY, KEY_GROUP], use_threads=False) \
        .aggregate([("t", "max")])
    seen = latest.column("t_max")
    return latest.set_column(2, "seen", pc.if_else(pc.equal(seen, _NO_TIME), 0, seen))


def _drop_expired(rows: pa.Table, due: set[int], horizon: int) -> pa.Table:
    """``rows`` less those of keys, in the ``due`` groups, last seen at or before
    ``horizon``."""
    if not due or not rows.num_rows:
        return rows
    seen = _last_seen(rows)
    expired = pc.and_(pc.is_in(seen.column(KEY_GROUP), value_set=pa.array(sorted(due), pa.int32())),
                      pc.less_equal(seen.column("seen"), horizon))
    gone = seen.column(KEY).filter(expired)
    if not len(gone):
        return rows
    return rows.filter(pc.invert(pc.is_in(rows.column(KEY), value_set=gone.combine_chunks())))


def _earliest(rows: pa.Table, after: dict[int, int]) -> None:
    """Lower ``after`` (group -> earliest last-seen time) by the keys of ``rows``."""
    if not rows.num_rows:
        return
    per_group = _last_seen(rows).group_by(KEY_GROUP, use_threads=False).aggregate(
        [("seen", "min")])
    for group, seen in zip(per_group.column(KEY_GROUP).to_pylist(),
                           per_group.column("seen_min").to_pylist(), strict=True):
        after[group] = min(after[group], seen)


def _by_group(rows: pa.Table) -> list[tuple[int, pa.Table]]:
    """``rows`` (stored columns and key group) split by key group, without the group."""
    if not rows.num_rows:
        return []
    groups = rows.column(KEY_GROUP).to_numpy()
    order = np.argsort(groups, kind="stable")
    rows = rows.take(pa.array(order)).drop_columns([KEY_GROUP])
    groups = groups[order]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    ends = [*starts[1:].tolist(), len(groups)]
    return [(int(groups[start]), rows.slice(start, end - start))
            for start, end in zip(starts.tolist(), ends, strict=True)]


def _keys_by_group(rows: pa.Table) -> list[tuple[int, list[str]]]:
    """The distinct non-NULL keys of ``rows`` per key group, both in order."""
    pairs = rows.select([KEY_GROUP, KEY]).filter(pc.is_valid(rows.column(KEY)))
    distinct = pairs.group_by([KEY_GROUP, KEY], use_threads=False).aggregate([]).sort_by(
        [(KEY_GROUP, "ascending"), (KEY, "ascending")])
    groups = distinct.column(KEY_GROUP).to_pylist()
    keys = distinct.column(KEY).to_pylist()
    found: list[tuple[int, list[str]]] = []
    for group, key in zip(groups, keys, strict=True):
        if not found or found[-1][0] != group:
            found.append((group, []))
        found[-1][1].append(key)
    return found


def _pairs(found: pa.Table, sides: tuple[pa.Table, pa.Table]) -> np.ndarray:
    """The matched pairs as rows of the two sides, ``(left, right)``, sorted."""
    left = pc.index_in(found.column("l"),
                       value_set=sides[0].column(_ID).combine_chunks()).to_numpy()
    right = pc.index_in(found.column("r"),
                        value_set=sides[1].column(_ID).combine_chunks()).to_numpy()
    pairs = np.stack([left.astype(np.int64), right.astype(np.int64)], axis=1) \
        if len(left) else np.zeros((0, 2), dtype=np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def _segment_starts(groups: np.ndarray, keys: pa.ChunkedArray) -> np.ndarray:
    """Where each run of equal ``(group, key)`` starts in rows sorted by them."""
    if not len(groups):
        return np.zeros(0, dtype=np.int64)
    keys_array = keys.combine_chunks()
    changed = np.ones(len(groups), dtype=bool)
    changed[1:] = (groups[1:] != groups[:-1]) | ~pc.equal(
        keys_array.slice(1), keys_array.slice(0, len(keys_array) - 1)).to_numpy(
        zero_copy_only=False)
    return np.flatnonzero(changed)


def _filled(count: int, value: object, kind: pa.DataType | None = None) -> pa.Array:
    """``count`` copies of ``value``."""
    return pa.repeat(pa.scalar(value, kind), count)


def _struct(table: pa.Table, columns: list[str], indices: pa.Array) -> pa.Array:
    """The rows ``indices`` picks (NULL: a NULL struct) of ``columns``."""
    fields = [table.column(c).take(indices).combine_chunks() for c in columns]
    if not len(indices):
        return pa.StructArray.from_arrays(fields, names=columns)
    return pa.StructArray.from_arrays(fields, names=columns, mask=indices.is_null())
