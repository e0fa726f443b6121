"""State-store benchmark: commit throughput and read latency per backend,
warm vs cold cache.

    python -m tests.benchmarks.statestore [--keys 20000] [--value-bytes 200] [--epochs 5]

Backends: sqlite (a temporary file), PostgreSQL at ``SPATE_TEST_POSTGRES_URL``
(default: the local server), FoundationDB when ``SPATE_FDB_CLUSTER_FILE`` is set.
Prints a Markdown table for BENCHMARKS.md.  Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass

from spate import statestore
from spate.statestore import DEFAULT_KEY_GROUPS, StateCache, key_group_of, split_key_groups

OPERATOR = "bench"


@dataclass
class Result:
    backend: str
    commit_mb_s: float
    commit_keys_s: float
    cold_group_ms: float
    warm_group_ms: float
    cold_get_ms: float
    warm_get_ms: float


def _commit_epochs(state: statestore.PipelineState, keys: int, value_bytes: int,
                   epochs: int) -> tuple[float, float]:
    """Seconds spent committing, and bytes committed."""
    chooser = random.Random(1)
    ranges = split_key_groups(DEFAULT_KEY_GROUPS, 4)
    grouped = [(key_group_of(("k", i)), ("k", i)) for i in range(keys)]
    elapsed = 0.0
    for epoch in range(epochs):
        payload = chooser.randbytes(value_bytes)
        started = time.perf_counter()
        state.begin_epoch(epoch, ranges)
        writers = [state.writer(epoch, r) for r in ranges]
        for group, key in grouped:
            writers[next(i for i, r in enumerate(ranges) if group in r)].put(
                OPERATOR, group, key, payload)
        for writer in writers:
            writer.commit()
        state.commit_epoch(epoch, {"epoch": epoch})
        elapsed += time.perf_counter() - started
    return elapsed, float(keys * value_bytes * epochs)


def _median_ms(action, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for i in range(repeat):
        started = time.perf_counter()
        action(i)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(name: str, url: str, keys: int, value_bytes: int, epochs: int) -> Result:
    pipeline = f"bench-{uuid.uuid4().hex[:8]}"
    writer_store = statestore.open_store(url, cache=StateCache())
    state = writer_store.pipeline("bench", pipeline)
    try:
        seconds, committed = _commit_epochs(state, keys, value_bytes, epochs)
        last = state.last_committed_epoch()
        groups = list(range(0, DEFAULT_KEY_GROUPS, 4))
        sample = [("k", i) for i in range(0, keys, max(1, keys // 64))]

        backend = state.inner  # type: ignore[attr-defined]  # the store behind the cache

        def cold_group(i: int) -> None:
            backend.read_group(OPERATOR, groups[i % len(groups)], epoch=last)

        def cold_get(i: int) -> None:
            key = sample[i % len(sample)]
            backend.get(OPERATOR, key_group_of(key), key, epoch=last)

        warm = statestore.open_store(url, cache=StateCache()).pipeline("bench", pipeline)
        for group in groups:
            warm.read_group(OPERATOR, group, epoch=last)

        def warm_group(i: int) -> None:
            warm.read_group(OPERATOR, groups[i % len(groups)], epoch=last)

        def warm_get(i: int) -> None:
            key = sample[i % len(sample)]
            warm.get(OPERATOR, key_group_of(key), key, epoch=last)

        return Result(name, committed / seconds / 1e6, keys * epochs / seconds,
                      _median_ms(cold_group, 50), _median_ms(warm_group, 200),
                      _median_ms(cold_get, 50), _median_ms(warm_get, 200))
    finally:
        state.drop()
        writer_store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000, help="keys written per epoch")
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    backends = {
        "sqlite": f"sqlite:///{tempfile.mkdtemp(prefix='spate-bench-')}/state.db",
        "postgresql": os.environ.get("SPATE_TEST_POSTGRES_URL",
                                     "postgresql://postgres@127.0.0.1:5432/test"),
    }
    if os.environ.get("SPATE_FDB_CLUSTER_FILE"):
        backends["fdb"] = f"fdb://{os.environ['SPATE_FDB_CLUSTER_FILE']}?prefix=spate-bench"
    print(f"{args.epochs} epochs x {args.keys} keys x {args.value_bytes} B values, "
          f"{DEFAULT_KEY_GROUPS} key groups, 4 writers per epoch; read latency = median\n")
    print("| backend | commit MB/s | commit keys/s | group read, cold (ms) | group read, warm (ms) "
          "| point get, cold (ms) | point get, warm (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, url in backends.items():
        r = measure(name, url, args.keys, args.value_bytes, args.epochs)
        print(f"| {r.backend} | {r.commit_mb_s:.1f} | {r.commit_keys_s:,.0f} | "
              f"{r.cold_group_ms:.2f} | {r.warm_group_ms:.4f} | {r.cold_get_ms:.2f} | "
              f"{r.warm_get_ms:.4f} |")


if __name__ == "__main__":
    main()
