"""Messages a push source received, numbered into batches until their epoch commits.

A push source (mqtt, sse, websocket) receives on a background thread of the
driver's reader process, while Spark plans batches as offset ranges. The offset
is a count of messages: :meth:`NumberedBuffer.admit` numbers waiting messages
``after + 1 ..`` into the next batch, :meth:`~NumberedBuffer.batch` hands a
batch's messages to ``read``, and :meth:`~NumberedBuffer.release_through` lets
go of those whose epoch committed (the source acknowledges them to its system,
or forgets them). Messages of a batch Spark planned but never logged wait again
for the next one, so numbering follows what Spark's offset log says.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

#: How long a batch replayed from Spark's checkpoint (after a restart) waits for
#: its system to deliver the batch's messages again.
REPLAY_WAIT_S = 10.0

M = TypeVar("M")


def _nothing_wrong() -> None:
    return None


class NumberedBuffer(Generic[M]):
    """Received messages: waiting for a batch, then admitted (numbered) until released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: received, not yet in a batch
        self._waiting: deque[M] = deque()
        #: in a batch, not yet released: (its number, message)
        self._admitted: deque[tuple[int, M]] = deque()

    def __len__(self) -> int:
        """Messages held, waiting or admitted."""
        return len(self._waiting) + len(self._admitted)

    def put(self, message: M) -> None:
        with self._lock:
            self._waiting.append(message)

    def admit(self, after: int, most: int | None) -> list[M]:
        """Number the waiting messages from ``after + 1`` (at most ``most``) into a
        batch and return them. Messages of batches Spark never logged (numbered beyond
        ``after``) wait again first."""
        with self._lock:
            while self._admitted and self._admitted[-1][0] > after:
                self._waiting.appendleft(self._admitted.pop()[1])
            count = len(self._waiting) if most is None else min(most, len(self._waiting))
            admitted = [self._waiting.popleft() for _ in range(count)]
            self._admitted.extend(enumerate(admitted, start=after + 1))
        return admitted

    def batch(self, first: int, last: int, *, redelivered: bool = True,
              check: Callable[[], None] = _nothing_wrong) -> list[M]:
        """The messages numbered ``first + 1 .. last``.

        A batch replayed from Spark's checkpoint after a restart is not numbered here:
        when the system delivers its messages again (``redelivered``), it is made of
        the first ``last - first`` of them (waiting up to :data:`REPLAY_WAIT_S`;
        ``check`` raises if the source failed meanwhile); otherwise it is lost (empty).
        """
        with self._lock:
            numbered = bool(self._admitted) and self._admitted[-1][0] > first
        if not numbered:
            if not redelivered:
                return []
            deadline = time.monotonic() + REPLAY_WAIT_S
            while len(self._waiting) < last - first and time.monotonic() < deadline:
                check()
                time.sleep(0.05)
            self.admit(first, last - first)
        with self._lock:
            return [m for number, m in self._admitted if first < number <= last]

    def release_through(self, number: int) -> list[M]:
        """Let go of the messages numbered up to ``number`` (their epochs committed)
        and return them, oldest first."""
        released = []
        with self._lock:
            while self._admitted and self._admitted[0][0] <= number:
                released.append(self._admitted.popleft()[1])
        return released
