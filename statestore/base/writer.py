"""The epoch writer every backend uses: buffer one range's writes, stage them on commit."""

from __future__ import annotations

from collections.abc import Callable

from spate.statestore.base.store import EpochWriter, UserKey
from spate.statestore.errors import KeyGroupOutOfRangeError
from spate.statestore.keys import pack_key

#: ``(operator, key group, encoded user key) → value``, or None for a deletion.
StagedWrites = dict[tuple[str, int, bytes], bytes | None]
#: A backend's staging step: make the writes of one range durable for one epoch.
Stage = Callable[[int, range, StagedWrites], None]
#: A backend's extra check of an encoded key (e.g. a size limit).
CheckKey = Callable[[str, int, bytes], None]


class BufferedEpochWriter(EpochWriter):
    """Keeps the last write per key in memory; ``commit`` hands them all to the backend."""

    def __init__(self, epoch: int, key_groups: range, stage: Stage,
                 check_key: CheckKey | None = None) -> None:
        self.epoch = epoch
        self.key_groups = key_groups
        self._stage = stage
        self._check_key = check_key
        self._writes: StagedWrites = {}
        self._committed = False

    def _key(self, operator: str, key_group: int, user_key: UserKey) -> tuple[str, int, bytes]:
        if key_group not in self.key_groups:
            raise KeyGroupOutOfRangeError(
                f"key group {key_group} is outside this writer's range "
                f"{self.key_groups.start}..{self.key_groups.stop - 1}")
        packed = pack_key(user_key)
        if self._check_key is not None:
            self._check_key(operator, key_group, packed)
        return operator, key_group, packed

    def put(self, operator: str, key_group: int, user_key: UserKey, value: bytes) -> None:
        self._writes[self._key(operator, key_group, user_key)] = bytes(value)

    def delete(self, operator: str, key_group: int, user_key: UserKey) -> None:
        self._writes[self._key(operator, key_group, user_key)] = None

    def commit(self) -> None:
        if self._committed:
            return
        self._stage(self.epoch, self.key_groups, self._writes)
        self._committed = True
        self._writes = {}
