"""One key group of one state operator, as a step sees it for one epoch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from spate.statestore import EpochWriter, PipelineState, UserKey
from spate.statestore.encoding import decode, encode


class GroupEntries:
    """One key group of one state operator for one epoch: committed values plus writes.

    Built on the whole group (:meth:`whole`) when the step walks every key, or
    on point reads (:meth:`keyed`) when it touches only some: then only the
    keys it asks for are read from the store (prefetched in one batch where
    the step knows them), and walking :meth:`keys` reads the rest.
    """

    def __init__(self, committed: Mapping[UserKey, bytes]) -> None:
        self.committed = committed
        self.changed: dict[UserKey, Any] = {}
        self._decoded: dict[UserKey, Any] = {}

    @classmethod
    def whole(cls, state: PipelineState, operator: str, group: int,
              epoch: int | None) -> GroupEntries:
        """The group read whole as of ``epoch`` (None: the last committed)."""
        return cls(state.read_group(operator, group, epoch=epoch))

    @classmethod
    def keyed(cls, state: PipelineState, operator: str, group: int, epoch: int | None,
              prefetch: Iterable[UserKey] = ()) -> GroupEntries:
        """The group read key by key, ``prefetch`` first in one batch."""
        reader = _PointReads(state, operator, group, epoch)
        reader.fetch(prefetch)
        return cls(reader)

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


class _PointReads(Mapping[UserKey, bytes]):
    """A key group's committed values, read from the store only as keys are asked for."""

    def __init__(self, state: PipelineState, operator: str, group: int,
                 epoch: int | None) -> None:
        self.state = state
        self.operator = operator
        self.group = group
        self.epoch = epoch
        self._known: dict[UserKey, bytes | None] = {}
        self._whole: Mapping[UserKey, bytes] | None = None

    def fetch(self, keys: Iterable[UserKey]) -> None:
        """Read the values of ``keys`` not yet known, in one batch."""
        wanted = [k for k in dict.fromkeys(tuple(k) for k in keys) if k not in self._known]
        if wanted and self._whole is None:
            values = self.state.get_many(self.operator, self.group, wanted, epoch=self.epoch)
            self._known.update(zip(wanted, values, strict=True))

    def _read_whole(self) -> Mapping[UserKey, bytes]:
        if self._whole is None:
            self._whole = self.state.read_group(self.operator, self.group, epoch=self.epoch)
        return self._whole

    def __getitem__(self, key: UserKey) -> bytes:
        if self._whole is not None:
            return self._whole[key]
        if key not in self._known:
            self.fetch([key])
        value = self._known[key]
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[UserKey]:
        return iter(self._read_whole())

    def __len__(self) -> int:
        return len(self._read_whole())
