"""TUMBLE and HOP windows over pane columns: every key and every fired window at once.

The input is a table of pane partials (what native Spark pre-aggregated per key
and slide, merged with what the operator kept from earlier epochs), sorted by
key and then pane.  Nothing here loops over rows, keys or windows in Python:

* the windows that fire are, per key, the union of the intervals of window ends
  its panes fall into (a pane in slot ``s`` is in the windows ending at slots
  ``s + 1 … s + W``, ``W = width / slide``), cut to the ends the watermark
  passed this epoch; overlapping intervals of a key merge into runs, and the
  runs expand into one row per fired window (``np.repeat``);
* each window covers the key's panes in slots ``[end - W, end)``: a binary
  search over one sorted ``(key, slot)`` composite gives the window's first and
  last pane positions;
* invertible aggregates (count, sum, avg) are differences of prefix sums over
  those positions; min and max answer range-minimum queries from a sparse
  table of ``log2(W)`` levels; variances and the (y, x) aggregates combine
  their panes' moments over blocks of 1, 2, 4, … panes, ``log2(W)`` combines
  of every window at once; a distinct count counts, per window end, the runs of
  window ends each (key, value) reaches (one sort of the panes' values);
  first_value and last_value rank their panes' ``(time, value)`` pairs in one
  sort and take the window's least or greatest rank, as min and max do; bit_xor
  is a difference of prefix xors, and bit_and and bit_or (which, like min and
  max, may count a pane twice) answer from a sparse table as min and max do;
  median, percentile_cont (also weighted) and array_agg take each window's
  values from its panes' lists (one contiguous range of their flattened
  values), and the percentiles pick their ranks after one sort of every
  window's values.

So the work per epoch is linear in panes plus fired windows, and does not
grow with width / slide, but for those bags: a window holds the values of all
its panes, so each value is taken once per window it falls in.  Aggregates this
module does not compute columnarly (:func:`supported`) run in
:mod:`spate.engine.operators.window` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.operators.aggregates import AGGREGATES


def _columnar(kind: str) -> frozenset[str]:
    """The aggregates computed here whose partials merge as ``kind`` (their ``columnar``)."""
    return frozenset(name for name, function in AGGREGATES.items() if function.columnar == kind)


#: The aggregates computed here, by how their partials merge.
COUNTS = _columnar("count")
SUMS = _columnar("sum")
EXTREMES = _columnar("extreme")
#: ... and the variances and (y, x) aggregates, whose partials are (co-)moments.
MOMENTS = _columnar("moments") | _columnar("comoments")
#: ... and count(DISTINCT x), whose pane partials are sets of values.
DISTINCTS = _columnar("distinct")
#: ... and first_value and last_value, whose pane partials are ``(time, value)`` pairs.
TIMED = _columnar("timed")
#: ... and bit_and, bit_or and bit_xor, whose pane partials are the pane's value and its
#: count of non-NULL arguments.
BITS = _columnar("bits")
#: ... and array_agg, median and percentile_cont (also weighted), whose pane partials are
#: the pane's values (a list of ``struct<v>``, NULLs kept; weighted: ``v`` is ``[x, w]``).
BAGS = _columnar("bag")
#: ... and an aggregate UDF's argument rows (``udaf_rows``), whose pane partials are the
#: pane's rows (a list of structs), which a window joins in time order.
UDAF_ROWS = _columnar("rows")
#: The aggregates whose pane partials are lists, which a window (a session) joins part
#: after part: the bags and an aggregate UDF's rows.
JOINED = BAGS | UDAF_ROWS
#: Each bitwise aggregate's NumPy operation and its identity (what a NULL partial counts as).
BITWISE: dict[str, tuple[np.ufunc, int]] = {
    "bit_and": (np.bitwise_and, -1), "bit_or": (np.bitwise_or, 0),
    "bit_xor": (np.bitwise_xor, 0)}


def supported(function: str, partial_type: pa.DataType) -> bool:
    """Whether aggregate ``function`` over partials of ``partial_type`` runs here."""
    if function in COUNTS or function in MOMENTS:  # moments: of DOUBLEs, as planned
        return True
    if function in BITS:
        return bool(pa.types.is_integer(partial_type))
    if function in BAGS:  # lists of struct<v>: any values for array_agg, else numbers
        if not (pa.types.is_list(partial_type) and pa.types.is_struct(partial_type.value_type)):
            return False
        value = partial_type.value_type.field("v").type
        if function == "percentile_cont_weighted":  # [x, weight] as doubles
            return bool(pa.types.is_list(value) and pa.types.is_floating(value.value_type))
        return function == "array_agg" or bool(
            pa.types.is_integer(value) or pa.types.is_floating(value)
            or pa.types.is_decimal(value))
    if function in UDAF_ROWS:  # lists of rows (structs of the UDF's arguments)
        return bool(pa.types.is_list(partial_type) and pa.types.is_struct(partial_type.value_type))
    if function in DISTINCTS:  # sets of values
        return bool(pa.types.is_list(partial_type) and keyable(partial_type.value_type))
    if function in TIMED:  # (time, value) pairs
        return bool(pa.types.is_struct(partial_type) and keyable(partial_type.field("v").type))
    numeric = bool(pa.types.is_integer(partial_type) or pa.types.is_floating(partial_type)
                   or pa.types.is_decimal(partial_type))
    if function in SUMS:
        return numeric
    if function in EXTREMES:
        return numeric or bool(pa.types.is_timestamp(partial_type)
                               or pa.types.is_date32(partial_type)
                               or pa.types.is_boolean(partial_type)) or by_place(partial_type)
    return False


#: Flips every bit of a negative float's pattern but its sign (see :func:`float_keys`).
_LOW_BITS = np.int64(0x7FFF_FFFF_FFFF_FFFF)


def float_keys(values: np.ndarray) -> np.ndarray:
    """float64 ``values`` as int64 keys that order and compare as Spark orders and
    compares doubles: -0.0 equals 0.0, every NaN equals every other and is greater
    than any number (Infinity included). The key is the float's bit pattern, with a
    negative float's bits but the sign flipped, so larger magnitudes sort first."""
    normal = np.where(values == 0.0, 0.0, values)  # -0.0 as 0.0
    normal = np.where(np.isnan(normal), np.nan, normal)  # one NaN
    bits = normal.astype(np.float64).view(np.int64)
    keys: np.ndarray = np.where(bits < 0, bits ^ _LOW_BITS, bits)
    return keys


def floats_of_keys(keys: np.ndarray) -> np.ndarray:
    """What :func:`float_keys` made, back as float64 (-0.0 as 0.0, one NaN)."""
    bits = np.where(keys < 0, keys ^ _LOW_BITS, keys).astype(np.int64)
    floats: np.ndarray = bits.view(np.float64)
    return floats


def by_place(kind: pa.DataType) -> bool:
    """Text and bytes: values Arrow orders as Spark does (by their bytes), whose least
    and greatest the columns find by each value's place in a sort
    (:func:`ranked_extremes`)."""
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def ranked_extremes(column: pa.Array | pa.ChunkedArray,
                    extremes: Callable[[np.ndarray], np.ndarray], largest: bool) -> pa.Array:
    """The least (or greatest) values of ``column``, any type Arrow sorts: ``extremes``
    takes each value's place in a sort of the column (NULL below every value for a
    maximum, above for a minimum) and gives the winning places (of segments, of
    windows' panes); a winner that is NULL had no value to pick."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    order = pc.array_sort_indices(values, null_placement="at_start" if largest else "at_end") \
        .to_numpy()
    places = np.empty(len(order), np.int64)
    places[order] = np.arange(len(order), dtype=np.int64)
    return values.take(pa.array(order[extremes(places)]))


def keyable(kind: pa.DataType) -> bool:
    """Values the columns tell apart and order as Spark's SQL compares them: those Arrow
    hashes and sorts alike (decimals by value, text and bytes by their bytes), and
    floats through their :func:`float_keys` (Spark equates NaN and -0.0 and orders
    them its own way)."""
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or by_place(kind) or pa.types.is_decimal128(kind)
                or pa.types.is_boolean(kind) or pa.types.is_timestamp(kind)
                or pa.types.is_date32(kind))


@dataclass(frozen=True)
class FiredWindows:
    """The windows one epoch fires: per window, its key's row in the pane table, its
    end slot, and the positions ``[first, stop)`` of the panes it covers."""

    key_rows: np.ndarray
    end_slots: np.ndarray
    first: np.ndarray
    stop: np.ndarray

    def __len__(self) -> int:
        return len(self.end_slots)


def key_ids(table: pa.Table, key_columns: list[str]) -> np.ndarray:
    """Per row of ``table`` (sorted by its keys), the number of its key: 0, 1, 2, …

    NULL keys equal each other, as in GROUP BY.
    """
    rows = table.num_rows
    changed = np.zeros(rows, dtype=bool)
    if rows:
        changed[0] = True
    for name in key_columns:
        column = table.column(name)
        before, after = column.slice(0, rows - 1), column.slice(1)
        same = pc.fill_null(pc.equal(after, before), False)
        both_null = pc.and_(pc.is_null(after), pc.is_null(before))
        differs = pc.invert(pc.or_(same, both_null))
        changed[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    return np.cumsum(changed, dtype=np.int64) - 1


def fired_windows(keys: np.ndarray, slots: np.ndarray, panes_per_window: int,
                  first_end: int, last_end: int) -> FiredWindows:
    """The windows with an end slot in ``[first_end, last_end]`` that hold a pane.

    ``keys`` and ``slots`` (pane start / slide) are sorted by key, then slot, with
    one row per (key, slot).  Windows come out in end order, keys ascending within
    an end.
    """
    width = panes_per_window
    empty = np.zeros(0, dtype=np.int64)
    if len(slots) == 0 or first_end > last_end:
        return FiredWindows(empty, empty, empty, empty)
    lows = np.maximum(slots + 1, first_end)
    highs = np.minimum(slots + width, last_end)
    usable = np.flatnonzero(lows <= highs)
    if len(usable) == 0:
        return FiredWindows(empty, empty, empty, empty)
    run_keys, lows, highs = keys[usable], lows[usable], highs[usable]
    # Lows and highs only grow along a key's panes: the intervals of a key merge
    # into a run wherever one starts at most one slot after the previous ended.
    starts = np.ones(len(usable), dtype=bool)
    starts[1:] = (run_keys[1:] != run_keys[:-1]) | (lows[1:] > highs[:-1] + 1)
    first_of_run = np.flatnonzero(starts)
    last_of_run = np.append(first_of_run[1:] - 1, len(usable) - 1)
    run_lows, run_highs = lows[first_of_run], highs[last_of_run]
    lengths = run_highs - run_lows + 1
    total = int(lengths.sum())
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    end_slots = np.repeat(run_lows, lengths) + offsets
    window_keys = np.repeat(run_keys[first_of_run], lengths)

    # Slots as ranks among the panes' distinct slots keep their order against any
    # bound, so ``key * (distinct + 1) + rank`` orders (key, slot) in one int64.
    distinct = np.unique(slots)
    span = len(distinct) + 1
    composite = keys * span + np.searchsorted(distinct, slots)
    key_base = window_keys * span
    first = np.searchsorted(composite, key_base + np.searchsorted(distinct, end_slots - width))
    stop = np.searchsorted(composite, key_base + np.searchsorted(distinct, end_slots))
    order = np.lexsort((window_keys, end_slots))
    key_rows = np.searchsorted(keys, window_keys[order])
    return FiredWindows(key_rows, end_slots[order], first[order], stop[order])


def window_sums(values: np.ndarray, fired: FiredWindows) -> np.ndarray:
    """Per fired window, the sum of ``values`` over its panes (differences of prefix
    sums; floating-point sums accumulate in extended precision)."""
    if values.dtype.kind == "f":
        running = np.concatenate([[0], np.cumsum(values, dtype=np.longdouble)])
        sums: np.ndarray = (running[fired.stop] - running[fired.first]).astype(np.float64)
        return sums
    # Integers wrap in int64 but their differences do not, while a window's sum fits.
    running = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    totals: np.ndarray = running[fired.stop] - running[fired.first]
    return totals


def window_extremes(values: np.ndarray, fired: FiredWindows, largest: bool) -> np.ndarray:
    """Per fired window, the least (or greatest) of ``values`` over its panes: a
    sparse table of minima over 1, 2, 4, … panes answers each window with two
    look-ups.  NaN is greater than any number, as in Spark: it wins a max and loses
    a min."""
    return _idempotent_ranges(values, fired, np.maximum if largest else np.fmin)


def window_bits(values: np.ndarray, fired: FiredWindows, function: str) -> np.ndarray:
    """Per fired window, bit_and, bit_or or bit_xor (``function``) of int64 ``values``
    (NULL partials as the operation's identity, :data:`BITWISE`) over its panes."""
    operation, _ = BITWISE[function]
    if function == "bit_xor":  # its own inverse: prefix xors difference as sums do
        running = np.concatenate([np.zeros(1, np.int64), np.bitwise_xor.accumulate(values)])
        xors: np.ndarray = running[fired.stop] ^ running[fired.first]
        return xors
    return _idempotent_ranges(values, fired, operation)


def window_positions(offsets: np.ndarray, fired: FiredWindows) -> tuple[np.ndarray, np.ndarray]:
    """Where each fired window's values are among its panes' flattened lists (``offsets``:
    each pane's first value, then the end): the positions, window after window, and
    each window's first place in them (then the end).  A window's panes are
    consecutive, so its values are one range."""
    starts, stops = offsets[fired.first], offsets[fired.stop]
    lengths = stops - starts
    bounds = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])
    positions = np.arange(bounds[-1], dtype=np.int64) - np.repeat(bounds[:-1] - starts, lengths)
    return positions, bounds


def window_percentiles(numbers: np.ndarray, valid: np.ndarray, positions: np.ndarray,
                       bounds: np.ndarray, fraction: float,
                       weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per window (its values' ``positions`` in ``numbers``, window by window from
    ``bounds``), percentile_cont(``fraction``) of its non-NULL (``valid``) values, each
    counting ``weights`` times (once without; a fractional weight as that much of a
    position; a value of no positive weight as NULL); and where a window has none.

    The result is linear between the values at the two positions around
    ``fraction * (W - 1)``, ``W`` the window's total weight; a position's value is
    found among the running sums of the window's sorted values' weights.  One sort of
    every window's values (NaN last: the greatest, as in Spark)."""
    windows = len(bounds) - 1
    owners = np.repeat(np.arange(windows, dtype=np.int64), np.diff(bounds))
    kept = valid[positions]
    if weights is not None:
        kept[kept] = weights[positions[kept]] > 0
    taken, owners = positions[kept], owners[kept]
    order = _by_window_and_value(numbers, taken, owners, windows)
    values, owners = numbers[taken[order]], owners[order]
    owned = np.ones(len(values), np.int64) if weights is None else weights[taken[order]]
    counts = np.bincount(owners, minlength=windows)
    firsts = np.cumsum(counts) - counts
    missing = counts == 0
    if len(values) == 0:
        return np.zeros(windows, np.float64), missing
    ends = np.cumsum(owned)  # each value's last position + 1, over all windows
    sums = np.concatenate([np.zeros(1), ends])
    base = sums[firsts]
    position = np.maximum(0.0, fraction * (sums[firsts + counts] - base - 1))
    below = np.floor(position)
    last = np.minimum(firsts + np.maximum(counts - 1, 0), len(values) - 1)  # none: any

    def value_at(index: np.ndarray) -> np.ndarray:
        found = np.searchsorted(ends, base + index, side="right")
        chosen: np.ndarray = values[np.clip(found, np.minimum(firsts, last), last)]
        return chosen

    low, high = value_at(below), value_at(below + 1)
    with np.errstate(invalid="ignore"):  # NaN and infinities interpolate to NaN, as in Python
        result: np.ndarray = low.astype(np.float64) + (high - low).astype(np.float64) \
            * (position - below)
    return result, missing


def _by_window_and_value(numbers: np.ndarray, taken: np.ndarray, owners: np.ndarray,
                         windows: int) -> np.ndarray:
    """The order of entries (``numbers[taken]``, of windows ``owners``, ascending) by
    window, then value: each as its window and the rank of its value packed in one
    int64 where they fit (a value sits in many windows: ranks are found once)."""
    distinct, rank_of = np.unique(numbers, return_inverse=True)
    span = max(len(distinct), 1)
    if windows * span < 2**62:
        order: np.ndarray = np.argsort(owners * span + rank_of.reshape(-1)[taken],
                                       kind="stable")
        return order
    return np.lexsort((numbers[taken], owners))


def _idempotent_ranges(values: np.ndarray, fired: FiredWindows, pick: np.ufunc) -> np.ndarray:
    """Per fired window, ``pick`` (associative, and idempotent: a pane taken twice
    changes nothing) over its panes' ``values``: a sparse table of ``pick`` over 1,
    2, 4, … panes answers each window with two overlapping look-ups."""
    lengths = fired.stop - fired.first
    if len(lengths) == 0:
        return values[:0]
    levels = [values]
    deepest = int(lengths.max()).bit_length() - 1
    for level in range(1, deepest + 1):
        half = 1 << (level - 1)
        previous = levels[-1]
        levels.append(pick(previous[:-half], previous[half:]))
    level_of = np.floor(np.log2(np.maximum(lengths, 1))).astype(np.int64)
    result = np.empty(len(lengths), dtype=values.dtype)
    for level in np.unique(level_of):
        chosen = level_of == level
        table = levels[int(level)]
        result[chosen] = pick(table[fired.first[chosen]],
                              table[fired.stop[chosen] - (1 << int(level))])
    return result


Columns = list[np.ndarray]


def window_merges(partials: Columns, fired: FiredWindows,
                  combine: Callable[[Columns, Columns], Columns]) -> Columns:
    """Per fired window, its panes' ``partials`` (parallel columns, one row per pane)
    combined in pane order by an associative ``combine``.  A table of the partials of
    1, 2, 4, … consecutive panes gives each window the blocks of its length's binary
    digits, largest first: ``log2(width / slide)`` vector combines for every window
    together."""
    lengths = fired.stop - fired.first
    if len(lengths) == 0:
        return [column[:0] for column in partials]
    levels = [partials]
    deepest = int(lengths.max()).bit_length() - 1
    for level in range(1, deepest + 1):
        half = 1 << (level - 1)
        previous = levels[-1]
        # blocks that straddle two keys are computed too, and never taken
        with np.errstate(all="ignore"):
            levels.append(combine([c[:-half] for c in previous], [c[half:] for c in previous]))
    merged = [np.zeros(len(lengths), column.dtype) for column in partials]
    started = np.zeros(len(lengths), bool)
    position = fired.first.copy()
    for level in range(deepest, -1, -1):
        size = 1 << level
        taking = (lengths & size) != 0
        if not taking.any():
            continue
        block = [column[position[taking]] for column in levels[level]]
        combined = combine([column[taking] for column in merged], block)
        first = ~started[taking]
        for column, new, own in zip(merged, combined, block, strict=True):
            column[taking] = np.where(first, own, new)  # a window's first block as it is
        started |= taking
        position[taking] += size
    return merged


def value_ids(lists: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """The non-NULL values of a list column, flat: each one's row, a number per distinct
    value (equal values, equal numbers) and the values themselves."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    flat = pc.list_flatten(lists)
    rows = pc.list_parent_indices(lists).to_numpy()
    present = flat.is_valid()
    flat = flat.filter(present)
    rows = rows[present.to_numpy(zero_copy_only=False)]
    # Floats equal as Spark equates them (-0.0 and 0.0, every NaN): by their keys.
    hashed = (pa.array(float_keys(flat.cast(pa.float64()).to_numpy(zero_copy_only=False)))
              if pa.types.is_floating(flat.type) else flat)
    ids = pc.dictionary_encode(hashed).indices.to_numpy().astype(np.int64)
    return rows, ids, flat


def window_distinct(keys: np.ndarray, slots: np.ndarray, sets: pa.ChunkedArray,
                    panes_per_window: int, fired: FiredWindows) -> np.ndarray:
    """Per fired window, how many distinct values the sets of its panes hold.

    A (key, value) in a pane at slot ``s`` is in the windows ending at slots
    ``s + 1 … s + W``; along the slots of its panes these intervals merge into
    runs.  Each run adds 1 from its first end on and takes it away after its
    last, so a window's count is the running sum of its key's run bounds up to
    its end.
    """
    counts = np.zeros(len(fired), dtype=np.int64)
    rows, ids, _ = value_ids(sets)
    if len(fired) == 0 or len(rows) == 0:
        return counts
    width = panes_per_window
    owners, at = keys[rows], slots[rows]
    order = _sorted_by(owners, ids, at)
    owners, ids, at = owners[order], ids[order], at[order]
    begins = np.ones(len(at), dtype=bool)
    begins[1:] = (owners[1:] != owners[:-1]) | (ids[1:] != ids[:-1]) | (at[1:] > at[:-1] + width)
    firsts = np.flatnonzero(begins)
    lasts = np.append(firsts[1:] - 1, len(at) - 1)
    bound_owners = np.concatenate([owners[firsts], owners[firsts]])
    bounds = np.concatenate([at[firsts] + 1, at[lasts] + width + 1])
    steps = np.concatenate([np.ones(len(firsts), np.int64), -np.ones(len(firsts), np.int64)])
    window_owners, ends = keys[fired.key_rows], fired.end_slots
    ordered, wanted = _pairs(bound_owners, bounds, window_owners, ends)
    order = np.argsort(ordered, kind="stable")
    ordered, running = ordered[order], np.cumsum(steps[order])
    # a key's bounds sum to 0, so the running sum restarts with each key
    reached = np.searchsorted(ordered, wanted, side="right")
    counts = np.where(reached > 0, running[np.maximum(reached - 1, 0)], 0)
    return counts


def _pairs(majors: np.ndarray, minors: np.ndarray, more_majors: np.ndarray,
           more_minors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of (major, minor) integer pairs as int64s that order as the pairs do: the
    minors offset from their least value, or where that does not fit, their ranks among
    the minors that occur (as :func:`fired_windows` does)."""
    low = min(int(minors.min()), int(more_minors.min()))
    scale = max(int(minors.max()), int(more_minors.max())) - low + 1
    top = max(int(majors.max()), int(more_majors.max())) + 1
    if top * scale < 2**62:
        return majors * scale + (minors - low), more_majors * scale + (more_minors - low)
    distinct = np.unique(np.concatenate([minors, more_minors]))
    span = len(distinct)
    return (majors * span + np.searchsorted(distinct, minors),
            more_majors * span + np.searchsorted(distinct, more_minors))


def _sorted_by(*columns: np.ndarray) -> np.ndarray:
    """The order that sorts rows by ``columns`` (integers; the first most significant):
    one argsort of the columns packed into an int64 where they fit, else a lexsort."""
    packed = columns[-1] - int(columns[-1].min())
    scale = int(packed.max()) + 1
    for column in reversed(columns[:-1]):
        low = int(column.min())
        spread = int(column.max()) - low + 1
        if spread * scale >= 2**62:
            return np.lexsort(tuple(reversed(columns)))
        packed = (column - low) * scale + packed
        scale *= spread
    order: np.ndarray = np.argsort(packed, kind="stable")
    return order


def pair_keys(pairs: pa.StructArray) -> tuple[pa.Table, np.ndarray]:
    """A ``struct<t, v>`` column's pairs as sort keys (``t``, ``v``; float values as their
    :func:`float_keys`, as Spark orders and equates doubles), and the order of the pairs
    in first_value's and last_value's order: time, then value, NULLs first (stable)."""
    times, values = pairs.flatten()
    if pa.types.is_floating(values.type):
        floats = values.fill_null(0.0).to_numpy(zero_copy_only=False)
        values = pa.array(float_keys(floats), mask=values.is_null().to_numpy(
            zero_copy_only=False))
    table = pa.table({"t": times, "v": values})
    order = pc.sort_indices(table, sort_keys=[("t", "ascending", "at_start"),
                                              ("v", "ascending", "at_start")]).to_numpy()
    return table, order


def pair_ranks(pairs: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a ``struct<t, v>`` column, the rank of its pair in the order of
    first_value and last_value (:func:`pair_keys`), and whether it has one."""
    _, order = pair_keys(pairs.combine_chunks())
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order), dtype=np.int64)
    return ranks, pairs.is_valid().to_numpy(zero_copy_only=False)


def ranked(ranks: np.ndarray, valid: np.ndarray, latest: bool) -> np.ndarray:
    """``ranks`` with the rows without a pair where the earliest (``latest``: latest)
    pick never takes them."""
    worst = -1 if latest else len(ranks)
    picked: np.ndarray = np.where(valid, ranks, worst)
    return picked


def window_timed(pairs: pa.ChunkedArray, fired: FiredWindows, latest: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per fired window, the row of its earliest (``latest``: latest) pane pair, and
    whether it has one."""
    ranks, valid = pair_ranks(pairs)
    picked = window_extremes(ranked(ranks, valid, latest), fired, latest)
    present = (picked >= 0) & (picked < len(ranks))
    rows = np.zeros(len(ranks), dtype=np.int64)
    rows[ranks] = np.arange(len(ranks))
    return rows[np.clip(picked, 0, max(len(ranks) - 1, 0))], present
