"""The state store's contract, as a backend implements it: the store and its pipeline
states, epochs and writers. A backend imports it as one name (``from spate.statestore
import base``) and writes ``base.StateStore``, ``base.EpochWriter``: what comes from the
contract reads as such. ``relational`` is the shared SQL implementation of PostgreSQL and
SQLite, imported from its module.
"""

from spate.statestore.base.store import (
    EpochMetadata,
    EpochWriter,
    GcReport,
    OperatorInfo,
    PipelineInfo,
    PipelineState,
    StateStore,
    UserKey,
)
from spate.statestore.base.writer import BufferedEpochWriter, StagedWrites

__all__ = [
    "BufferedEpochWriter",
    "EpochMetadata",
    "EpochWriter",
    "GcReport",
    "OperatorInfo",
    "PipelineInfo",
    "PipelineState",
    "StagedWrites",
    "StateStore",
    "UserKey",
]
