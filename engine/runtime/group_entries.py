"""One key group of one state operator, as a step sees it for one epoch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from spate.statestore import EpochWriter, UserKey
from spate.statestore.encoding import decode, encode


class GroupEntries:
    """One key group of one state operator for one epoch: committed values plus writes."""

    def __init__(self, committed: Mapping[UserKey, bytes]) -> None:
        self.committed = committed
        self.changed: dict[UserKey, Any] = {}
        self._decoded: dict[UserKey, Any] = {}

    def get(self, key: UserKey) -> Any:
        """The value (decoded once per epoch); a caller that changes it must ``put`` it."""
        if key in self.changed:
            return self.changed[key]
        if key not in self._decoded:
            raw = self.committed.get(key)
            self._decoded[key] = None if raw is None else decode(raw)
        return self._decoded[key]

    def put(self, key: UserKey, value: Any) -> None:
        self.changed[key] = value

    def delete(self, key: UserKey) -> None:
        self.changed[key] = None

    def keys(self) -> Iterator[UserKey]:
        yield from self.committed
        yield from (k for k in self.changed if k not in self.committed)

    def flush(self, writer: EpochWriter, operator: str, group: int) -> None:
        for key, value in self.changed.items():
            if value is not None:
                writer.put(operator, group, key, encode(value))
            elif key in self.committed:
                writer.delete(operator, group, key)
