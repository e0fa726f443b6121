"""Spate's epoch-versioned key-value store for operator state.

Open a store by URL with :func:`open_store`; scope it to one tenant's
pipeline with ``store.pipeline(tenant, pipeline)``.  Backends:

* ``sqlite:///path`` — embedded, one machine (the default of ``spate run``);
* ``postgresql://user[:password]@host[:port]/db`` — remote;
* ``fdb://[cluster-file]`` — FoundationDB, remote (needs the ``foundationdb``
  client library).

Every pipeline state a store hands out sits behind the per-process local
cache (:mod:`spate.statestore.cache`).
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable

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
from spate.statestore.cache import CachedPipelineState, CacheStats, StateCache, process_cache
from spate.statestore.errors import (
    BackendUnavailableError,
    CorruptValueError,
    EmbeddedStoreNotShareableError,
    EpochNotBegunError,
    EpochUnavailableError,
    IncompleteEpochError,
    KeyGroupOutOfRangeError,
    OutOfOrderEpochError,
    StateStoreError,
    StateStoreUnreachableError,
    UnknownStoreUrlError,
)
from spate.statestore.keys import (
    DEFAULT_KEY_GROUPS,
    key_group_of,
    owner_of,
    pack_key,
    split_key_groups,
    unpack_key,
)

__all__ = [
    "DEFAULT_KEY_GROUPS", "BackendUnavailableError", "CacheStats", "CachedPipelineState",
    "CorruptValueError",
    "EmbeddedStoreNotShareableError", "EpochMetadata", "EpochNotBegunError",
    "EpochUnavailableError", "EpochWriter", "GcReport", "IncompleteEpochError",
    "KeyGroupOutOfRangeError", "OperatorInfo", "OutOfOrderEpochError", "PipelineInfo",
    "PipelineState", "StateCache", "StateStore", "StateStoreError", "StateStoreUnreachableError",
    "UnknownStoreUrlError",
    "UserKey", "key_group_of", "open_store", "owner_of", "pack_key", "process_cache",
    "ship", "split_key_groups", "task_pipeline", "unpack_key",
]


def _sqlite(url: str) -> StateStore:
    from spate.statestore.sqlite.store import SqliteStateStore

    return SqliteStateStore(url)


def _postgres(url: str) -> StateStore:
    from spate.statestore.postgres.store import PostgresStateStore

    return PostgresStateStore(url)


def _fdb(url: str) -> StateStore:
    from spate.statestore.fdb.store import FdbStateStore

    return FdbStateStore(url)


#: URL scheme -> backend.  Backends are imported on first use, so a missing
#: optional client library only matters to the URLs that need it.
BACKENDS: dict[str, Callable[[str], StateStore]] = {
    "sqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
    "fdb": _fdb,
}


def open_store(url: str, *, cache: StateCache | None = None) -> StateStore:
    """Open the store at ``url``; its pipelines read through ``cache`` (default: the process's)."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    backend = BACKENDS.get(scheme)
    if backend is None:
        raise UnknownStoreUrlError(
            f"unknown state store URL {url.split('@')[-1]!r}: use sqlite:///path/state.db, "
            f"postgresql://user@host:port/database or fdb://[cluster-file]")
    return _CachedStore(backend(url), cache if cache is not None else process_cache())


class _CachedStore(StateStore):
    """A backend store whose pipelines read through the local cache."""

    def __init__(self, inner: StateStore, cache: StateCache) -> None:
        self.inner = inner
        self.cache = cache
        self.url = inner.url

    def pipeline(self, tenant: str, pipeline: str) -> PipelineState:
        return CachedPipelineState(self.inner.pipeline(tenant, pipeline), self.cache,
                                   origin=self)

    def pipelines(self, tenant: str | None = None) -> list[tuple[str, str]]:
        return self.inner.pipelines(tenant)

    def close(self) -> None:
        self.inner.close()

    def __reduce__(self) -> tuple[object, ...]:
        # Shipped to another process, it reads through that process's cache.
        return (_with_process_cache, (self.inner,))


def _with_process_cache(inner: StateStore) -> StateStore:
    return _CachedStore(inner, process_cache())


# -- stores in Spark tasks ------------------------------------------------------------

_opened: dict[bytes, _CachedStore] = {}
_task_states: dict[tuple[bytes, str, str, str], CachedPipelineState] = {}
_opened_lock = threading.Lock()


def ship(state: PipelineState) -> bytes:
    """The store of ``state`` as bytes a Spark task turns back into it (:func:`task_pipeline`).

    The bytes hold the store's credentials: keep them out of logs and messages.
    """
    origin = getattr(state, "origin", None)
    if not isinstance(origin, _CachedStore):
        raise TypeError("only a pipeline state from open_store(...).pipeline() can be shipped")
    return pickle.dumps(origin)


def task_pipeline(shipped: bytes, tenant: str, pipeline: str, run: str) -> CachedPipelineState:
    """One pipeline's state in a Spark task's process, opened once per process.

    Tasks of every epoch reuse the connection and the process cache; ``run``
    names the pipeline's run, so a restarted run never reads what an earlier
    one cached.
    """
    with _opened_lock:
        key = (shipped, tenant, pipeline, run)
        state = _task_states.get(key)
        if state is None:
            store = _opened.get(shipped)
            if store is None:
                loaded = pickle.loads(shipped)
                if not isinstance(loaded, _CachedStore):
                    raise TypeError("task_pipeline needs a store opened by open_store")
                store = _opened[shipped] = loaded
            state = CachedPipelineState(store.inner.pipeline(tenant, pipeline), store.cache,
                                        run=run)
            _task_states[key] = state
        return state
