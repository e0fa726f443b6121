"""Start turns: at most N jobs of an application start at once; a turn comes back when
its job says so, or after the longest wait, and only once."""

from __future__ import annotations

import threading
import time

from spate.engine.job.turns import StartTurns


def _taken_within(turns: StartTurns, seconds: float) -> bool:
    got = threading.Event()
    threading.Thread(target=lambda: (turns.take(), got.set()), daemon=True).start()
    return got.wait(seconds)


def test_a_third_job_waits_until_one_of_two_is_done() -> None:
    turns = StartTurns(at_once=2, max_wait_s=60)
    first, _second = turns.take(), turns.take()
    waiter = threading.Event()
    threading.Thread(target=lambda: (turns.take(), waiter.set()), daemon=True).start()
    assert not waiter.wait(0.3)
    first.done()
    assert waiter.wait(5)


def test_a_turn_given_back_twice_frees_one_slot() -> None:
    turns = StartTurns(at_once=1, max_wait_s=60)
    turn = turns.take()
    turn.done()
    turn.done()  # the job's first epoch, then its end: still one slot
    turns.take()
    assert not _taken_within(turns, 0.3)


def test_a_slow_job_holds_its_turn_at_most_the_longest_wait() -> None:
    turns = StartTurns(at_once=1, max_wait_s=0.5)
    turns.take()  # never given back by its job
    started = time.monotonic()
    assert _taken_within(turns, 5)
    assert time.monotonic() - started >= 0.4
