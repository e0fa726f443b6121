"""The updating aggregate's per-key logic equals recomputing the aggregates from
scratch at every flush, whatever the retractions, epochs and flush points."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spate.engine.operators.aggregates import make_accumulator
from spate.engine.operators.updating import KeyState, expire, flush, flush_due, merge

FUNCTIONS = ["count_star", "count", "sum", "avg", "min", "max", "count_distinct"]


def _accumulators(updating: bool) -> list[Any]:
    return [make_accumulator(f, updating) for f in FUNCTIONS]


def _partial(rows: list[tuple[int | None, int]], updating: bool) -> list[Any]:
    """What the native pre-aggregation produces for one key and epoch: rows are
    (value, sign), sign -1 for a withdrawn row."""
    present = [(v, s) for v, s in rows if v is not None]
    signed = [[v, s] for v, s in present]
    if updating:
        low = high = signed
    else:
        values = [v for v, _ in present]
        low, high = min(values, default=None), max(values, default=None)
    distinct = signed if updating else [[v, 1] for v in sorted({v for v, _ in present})]
    total = [sum(v * s for v, s in present), sum(s for _, s in present)]
    return [sum(s for _, s in rows), sum(s for _, s in rows), sum(s for _, s in present),
            total, total, low, high, distinct]


def _expected(multiset: Counter[int | None]) -> list[Any] | None:
    rows = list(multiset.elements())
    if not rows:
        return None
    values = [v for v in rows if v is not None]
    return [len(rows), len(values), sum(values) if values else None,
            sum(values) / len(values) if values else None,
            min(values, default=None), max(values, default=None), len(set(values))]


def _apply(table: list[Any] | None, retract: list[Any] | None,
           insert: list[Any] | None) -> list[Any] | None:
    """A downstream table of one key: a withdrawal must match what it holds."""
    if retract is not None:
        assert table == retract
        table = None
    if insert is not None:
        assert table is None
        table = insert
    return table


values = st.one_of(st.none(), st.integers(-5, 5))
# An epoch: rows added or withdrawn (withdrawals only of rows present), then maybe a flush.
epochs = st.lists(st.tuples(st.lists(st.tuples(values, st.booleans()), max_size=6),
                            st.booleans()), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(epochs=epochs, updating=st.booleans())
def test_flushes_equal_the_aggregates_recomputed(epochs: list[Any], updating: bool) -> None:
    accumulators = _accumulators(updating)
    state = KeyState.new(["k"], accumulators)
    multiset: Counter[int | None] = Counter()
    downstream: list[Any] | None = None
    for rows, flushing in [*epochs, ([], True)]:  # the end of input flushes
        signed = []
        for value, withdraw in rows:
            if withdraw and updating and multiset[value] > 0:
                multiset[value] -= 1
                signed.append((value, -1))
            else:
                multiset[value] += 1
                signed.append((value, 1))
        merge(state, _partial(signed, updating), 10, accumulators)
        if flushing:
            change, keep = flush(state, accumulators)
            downstream = _apply(downstream, change.retract, change.insert)
            assert downstream == _expected(+multiset)
            assert keep == (downstream is not None)
            if not keep:
                state = KeyState.new(["k"], accumulators)
            else:
                state = KeyState.from_stored(state.to_stored())  # what the store keeps


def test_created_and_removed_within_a_flush_emits_nothing() -> None:
    accumulators = _accumulators(True)
    state = KeyState.new(["k"], accumulators)
    merge(state, _partial([(3, 1)], True), 1, accumulators)
    merge(state, _partial([(3, -1)], True), 2, accumulators)
    change, keep = flush(state, accumulators)
    assert (change.retract, change.insert, keep) == (None, None, False)


def test_unchanged_output_emits_nothing_and_changes_emit_both_sides() -> None:
    accumulators = _accumulators(True)
    state = KeyState.new(["k"], accumulators)
    merge(state, _partial([(1, 1), (4, 1)], True), 1, accumulators)
    first, _ = flush(state, accumulators)
    assert first.retract is None and first.insert == [2, 2, 5, 2.5, 1, 4, 2]
    merge(state, _partial([(4, -1), (4, 1)], True), 2, accumulators)  # replaced by itself
    assert flush(state, accumulators)[0] == type(first)(None, None)
    merge(state, _partial([(1, -1)], True), 3, accumulators)  # the minimum goes
    second, keep = flush(state, accumulators)
    assert second.retract == first.insert and second.insert == [1, 1, 4, 4.0, 4, 4, 1]
    assert keep and state.seen_us == 3
    assert expire(state).retract == second.insert and expire(state).insert is None


def test_withdrawing_rows_never_seen_forgets_the_key() -> None:
    accumulators = _accumulators(True)
    state = KeyState.new(["k"], accumulators)
    merge(state, _partial([(2, -1)], True), None, accumulators)
    assert state.seen_us is None  # no event time: never expires
    change, keep = flush(state, accumulators)
    assert (change.retract, change.insert, keep) == (None, None, False)


def test_flush_due() -> None:
    assert flush_due(None, 0, 1000)
    assert not flush_due(5000, 5999, 1000)
    assert flush_due(5000, 6000, 1000)
    assert flush_due(5000, 5000, 0)
    assert flush_due(None, None, 0) and not flush_due(None, None, 1000)
