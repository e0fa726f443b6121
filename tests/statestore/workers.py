"""Subprocess workers for the state-store conformance suite.

Run as ``python -m tests.statestore.workers COMMAND URL TENANT PIPELINE ...`` from
the repository root.  Each command is a real client process of the store, so
the suite can kill one mid-epoch or run several against one store at once.
"""

from __future__ import annotations

import sys
import time

from spate import statestore
from spate.statestore import DEFAULT_KEY_GROUPS, PipelineState, StateCache, split_key_groups

OPERATOR = "counts"


def value_for(key_group: int, epoch: int, tag: str = "") -> bytes:
    """The value every worker writes for a group in an epoch (checkable by the suite)."""
    return f"{tag}g{key_group}e{epoch}".encode()


def write_range(state: PipelineState, epoch: int, groups: range, tag: str = "") -> None:
    """One writer: a key per group of the range, then commit."""
    writer = state.writer(epoch, groups)
    for group in groups:
        writer.put(OPERATOR, group, ("key", group), value_for(group, epoch, tag))
    writer.commit()


def run_epochs(state: PipelineState, first: int, count: int, parallelism: int) -> None:
    """Begin, write (every range) and publish ``count`` epochs."""
    ranges = split_key_groups(DEFAULT_KEY_GROUPS, parallelism)
    for epoch in range(first, first + count):
        state.begin_epoch(epoch, ranges)
        for groups in ranges:
            write_range(state, epoch, groups)
        state.commit_epoch(epoch, {"epoch": epoch})


def main(argv: list[str]) -> None:
    command, url, tenant, pipeline, *args = argv
    store = statestore.open_store(url, cache=StateCache())
    state = store.pipeline(tenant, pipeline)
    if command == "stage-then-wait":
        # Stage a whole epoch, say so, and wait to be killed before publishing it.
        epoch = int(args[0])
        ranges = split_key_groups(DEFAULT_KEY_GROUPS, 2)
        state.begin_epoch(epoch, ranges)
        for groups in ranges:
            write_range(state, epoch, groups, tag="crashed-")
        print("staged", flush=True)
        time.sleep(600)
    elif command == "write-range":
        epoch, start, stop = (int(a) for a in args)
        write_range(state, epoch, range(start, stop))
    elif command == "run-epochs":
        first, count, parallelism = (int(a) for a in args)
        run_epochs(state, first, count, parallelism)
    else:
        raise SystemExit(f"unknown command {command}")
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
