"""Source offsets kept in the state store, so a job resumes from its state alone.

Spark keeps its own bookkeeping of a streaming query in the checkpoint folder:
``metadata`` (the query's id), ``offsets/<batch id>`` (written before the batch
runs: a version line, a line of batch metadata, then one JSON offset per
source, in the order of the query's sources — the order in which
:func:`~spate.engine.runtime.sources.source_stream` unions them, ``-`` for a
source without an offset yet) and ``commits/<batch id>`` (written once the
batch is done).

Spate copies each batch's end offsets into the metadata of the epoch it
commits, in the same publish as the epoch's state, together with the base
that maps Spark's batch ids to epochs (``epoch = batch id + base``) and the id
of the checkpoint folder that ran it.  The checkpoint folder is thus a cache:

- a folder this store knows (its query id is the last epoch's) keeps its base,
  so a replayed batch maps to its committed epoch and is skipped;
- a missing or empty folder over existing state starts a new numbering
  (base = last committed epoch + 1) with every source at the offsets stored
  with the last epoch; batches such a folder logged but never committed are
  discarded first, as they were planned from somewhere else;
- a folder with committed batches the store does not know belongs to another
  run and is refused.

A generator source (:mod:`~spate.engine.connectors.generators.native`) logs only ticks in
Spark's offsets: its own offset for a batch is computed from the one stored with
the previous epoch and the batch's trigger time, which Spark logs with the batch
(the ``batchTimestampMs`` of its metadata line), so a replayed batch gets the
same offset again.  A folder whose batches a generator logged as a Python data
source (before generators ran as native Spark) cannot be read by its ticks: it
is cleared, and the run resumes from the offsets in the state store.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from spate.engine.runtime.errors import PipelineFailedError

log = logging.getLogger(__name__)

#: Epoch metadata: source table -> its offset at the end of the epoch.
OFFSETS_KEY = "offsets"
#: Epoch metadata: epoch = Spark batch id + this, for the checkpoint that ran it.
BATCH_BASE_KEY = "batch_base"
#: Epoch metadata: the id of the Spark checkpoint (streaming query) that ran it.
CHECKPOINT_KEY = "checkpoint_id"

_OFFSET_LOG_VERSION = "v1"
#: How Spark logs a source that has no offset yet.
_NO_OFFSET = "-"
#: The field of the offset Spark logs for a generator's ticks (``rate-micro-batch``).
TICK_FIELD = "offset"


@dataclass(frozen=True)
class StoredPosition:
    """What the last committed epoch's metadata says about sources and batch ids."""

    #: source table -> offset; None: no offsets stored (state of an older Spate)
    offsets: dict[str, Any] | None = None
    batch_base: int = 0
    checkpoint_id: str | None = None

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> StoredPosition:
        offsets = metadata.get(OFFSETS_KEY)
        return cls(None if offsets is None else dict(offsets),
                   int(metadata.get(BATCH_BASE_KEY, 0)), metadata.get(CHECKPOINT_KEY))


class CheckpointFolder:
    """Spark's checkpoint folder of one streaming query, read as files."""

    def __init__(self, location: str) -> None:
        self.location = location
        parsed = urlparse(location)
        if parsed.scheme not in ("", "file"):
            raise PipelineFailedError(
                f"checkpoint {location} is not a local folder: give a path (or a file: URL) "
                "that the driver can read, such as a mounted volume")
        self.path = parsed.path if parsed.scheme == "file" else location

    def query_id(self) -> str | None:
        """The id Spark gave the query that owns this folder (None: not started yet)."""
        try:
            with open(os.path.join(self.path, "metadata"), encoding="utf-8") as handle:
                query_id = json.loads(handle.readline()).get("id")
        except (OSError, ValueError):
            return None
        return str(query_id) if query_id is not None else None

    def logged_batches(self) -> list[int]:
        """Batch ids whose offsets Spark logged, ascending."""
        return _batch_ids(os.path.join(self.path, "offsets"))

    def committed_batches(self) -> list[int]:
        """Batch ids Spark marked done, ascending."""
        return _batch_ids(os.path.join(self.path, "commits"))

    def has_offset_log(self) -> bool:
        return os.path.isdir(os.path.join(self.path, "offsets"))

    def discard_offsets(self) -> None:
        """Remove the logged offsets of batches (and their checksums); nothing else."""
        folder = os.path.join(self.path, "offsets")
        for batch_id in self.logged_batches():
            for name in (str(batch_id), f".{batch_id}.crc"):
                try:
                    os.remove(os.path.join(folder, name))
                except FileNotFoundError:
                    pass

    def clear(self) -> None:
        """Remove what Spark keeps here (the query's id, offsets, commits, sources'
        metadata): the next query over the folder starts afresh."""
        for name in ("metadata", ".metadata.crc", "offsets", "commits", "sources"):
            path = os.path.join(self.path, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)

    def end_offsets(self, batch_id: int, sources: Sequence[str]) -> dict[str, Any]:
        """Per source table: its offset at the end of batch ``batch_id`` (as Spark logged it)."""
        lines = self._logged(batch_id, len(sources))
        return {name: json.loads(line) for name, line in zip(sources, lines[2:], strict=True)
                if line != _NO_OFFSET}

    def batch_timestamp_ms(self, batch_id: int, sources: int) -> int:
        """When Spark planned batch ``batch_id`` (wall clock, ms), as it logged it."""
        metadata = json.loads(self._logged(batch_id, sources)[1])
        return int(metadata["batchTimestampMs"])

    def _logged(self, batch_id: int, sources: int) -> list[str]:
        """The lines Spark logged for batch ``batch_id`` of a query over ``sources``."""
        path = os.path.join(self.path, "offsets", str(batch_id))
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError as error:
            raise PipelineFailedError(
                f"cannot read the offsets of batch {batch_id} in checkpoint {self.location}: "
                f"{error.strerror or error}") from None
        if not lines or lines[0] != _OFFSET_LOG_VERSION or len(lines) != 2 + sources:
            raise PipelineFailedError(
                f"the offsets of batch {batch_id} in checkpoint {self.location} are not in the "
                f"layout this Spate reads ({_OFFSET_LOG_VERSION}, one line per each of the "
                f"{sources} sources); was the checkpoint written by another Spark version?")
        return lines


@dataclass
class BatchEpochs:
    """This run's mapping of Spark batch ids to epochs, and the offsets each epoch stores."""

    folder: CheckpointFolder
    #: the pipeline's source tables, in the order of its stream's union
    sources: tuple[str, ...]
    base: int
    #: per source table: where it starts when Spark's checkpoint has no offset for it
    start_offsets: dict[str, Any] = field(default_factory=dict)
    #: per source table: its offset stored with the last committed epoch
    stored_offsets: dict[str, Any] = field(default_factory=dict)
    #: generator sources, whose offsets are computed, each by its function of the offset
    #: before the batch (None: the beginning) and the batch's trigger time (ms)
    computed: Mapping[str, Callable[[Any | None, int], Any]] = field(default_factory=dict)
    _query_id: str | None = None
    #: epoch -> the computed sources' end offsets (the last two epochs' only)
    _computed_ends: dict[int, dict[str, Any]] = field(default_factory=dict)

    def epoch(self, batch_id: int) -> int:
        return batch_id + self.base

    def batch_offsets(self, epoch: int) -> dict[str, tuple[Any | None, Any]]:
        """Per source with an offset: ``(start, end)`` of ``epoch``'s batch (start None:
        the source's beginning)."""
        batch = epoch - self.base
        end = self.folder.end_offsets(batch, self.sources)
        start = (self.folder.end_offsets(batch - 1, self.sources) if batch > 0
                 else self.start_offsets)
        offsets = {name: (start.get(name), offset) for name, offset in end.items()
                   if name not in self.computed}
        return offsets | self._computed_offsets(epoch)

    def _computed_offsets(self, epoch: int) -> dict[str, tuple[Any | None, Any]]:
        """``(start, end)`` of each generator in ``epoch``, which runs right after the
        last committed epoch: it starts where that one's offsets (just computed, or
        stored) say."""
        if not self.computed:
            return {}
        before = self._computed_ends.get(epoch - 1, self.stored_offsets)
        ends = self._computed_ends.get(epoch)
        if ends is None:
            now_ms = self.folder.batch_timestamp_ms(epoch - self.base, len(self.sources))
            ends = {name: advance(before.get(name), now_ms)
                    for name, advance in self.computed.items()}
            self._computed_ends = {e: v for e, v in self._computed_ends.items()
                                   if e == epoch - 1} | {epoch: ends}
        return {name: (before.get(name), end) for name, end in ends.items()}

    def metadata(self, epoch: int) -> dict[str, Any]:
        """The entries ``epoch``'s commit stores: its end offsets, the base, the checkpoint."""
        if self._query_id is None:
            # Spark writes the folder's id when the query starts, before any batch.
            self._query_id = self.folder.query_id()
        ends = {name: end for name, (_, end) in self.batch_offsets(epoch).items()}
        return {OFFSETS_KEY: ends, BATCH_BASE_KEY: self.base, CHECKPOINT_KEY: self._query_id}


def resume(folder: CheckpointFolder, sources: Sequence[str], last_committed: int | None,
           stored: StoredPosition, pipeline: str, store_url: str,
           generators: Collection[str] = ()) -> BatchEpochs:
    """Where this run starts, from the state store and whatever the checkpoint folder holds.

    ``generators``: the sources that stream ticks (their offsets are computed).
    Raises :class:`PipelineFailedError` when the folder and the store describe
    different runs.
    """
    names = tuple(sources)
    committed = folder.committed_batches()
    if last_committed is None:
        if committed:
            raise PipelineFailedError(
                f"checkpoint {folder.location} belongs to a run whose state is not in the "
                f"state store ({store_url}): resume with the same --state, or delete the "
                "checkpoint to start afresh")
        return BatchEpochs(folder, names, 0)
    if stored.offsets is None:
        return _resume_without_offsets(folder, names, last_committed, pipeline)
    if (stored.checkpoint_id is not None and folder.logged_batches()
            and stored.checkpoint_id == folder.query_id()):
        latest = committed[-1] if committed else None
        if latest is not None and latest + stored.batch_base > last_committed:
            raise PipelineFailedError(
                f"checkpoint {folder.location} is ahead of the state store ({store_url}), "
                f"whose last epoch of pipeline '{pipeline}' is {last_committed}: the store "
                "was reset or restored; delete the checkpoint folder (or give an empty one) "
                "to resume from the state")
        if not _logs_python_generators(folder, names, generators):
            return BatchEpochs(folder, names, stored.batch_base,
                               stored_offsets=dict(stored.offsets))
        log.info("the checkpoint holds generator offsets of Python data sources, which the "
                 "generators' ticks cannot read: resuming from the offsets in the state store",
                 extra={"epoch": last_committed, "checkpoint": folder.location})
        folder.clear()
        return BatchEpochs(folder, names, last_committed + 1, dict(stored.offsets),
                           dict(stored.offsets))
    if committed:
        raise PipelineFailedError(
            f"checkpoint {folder.location} belongs to another run of pipeline '{pipeline}' "
            f"than the state store ({store_url}), which holds it up to epoch "
            f"{last_committed}: delete that checkpoint folder (or give an empty one) and the "
            "pipeline resumes from its state")
    if folder.logged_batches():
        log.info("discarding batches the checkpoint logged but never ran to a commit",
                 extra={"checkpoint": folder.location, "epoch": last_committed})
        folder.discard_offsets()
    log.info("resuming from the offsets in the state store",
             extra={"epoch": last_committed, "checkpoint": folder.location})
    return BatchEpochs(folder, names, last_committed + 1, dict(stored.offsets),
                       dict(stored.offsets))


def _resume_without_offsets(folder: CheckpointFolder, sources: tuple[str, ...],
                            last_committed: int, pipeline: str) -> BatchEpochs:
    """State written before offsets were stored: only its own checkpoint can resume it."""
    if not folder.has_offset_log():
        raise PipelineFailedError(
            f"the state store holds epoch {last_committed} of pipeline '{pipeline}' without "
            f"source offsets (an older Spate wrote it) and checkpoint {folder.location} has "
            "none: resume once with that run's --checkpoint, or drop the pipeline's state to "
            "start afresh")
    return BatchEpochs(folder, sources, 0)  # that run numbered epochs by batch id


def _logs_python_generators(folder: CheckpointFolder, sources: tuple[str, ...],
                            generators: Collection[str]) -> bool:
    """Whether the folder's last batch logged a generator's offset as its Python data
    source did (before generators ran as native Spark) rather than a tick."""
    logged = folder.logged_batches()
    if not generators or not logged:
        return False
    offsets = folder.end_offsets(logged[-1], sources)
    return any(TICK_FIELD not in offsets.get(name, {TICK_FIELD: 0}) for name in generators)


def _batch_ids(folder: str) -> list[int]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(name) for name in names if name.isdigit())
