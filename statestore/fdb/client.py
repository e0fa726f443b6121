"""The FoundationDB client under the state store: bindings, retried transactions, paged reads.

The official bindings load the C client (libfdb_c) when an API version is
selected; :func:`load_bindings` does that on the first open, so importing
:mod:`spate.statestore` never needs the library, and a host without it gets a
:class:`BackendUnavailableError` saying what to install.  API version 730 is
pinned.

Transactions are bounded in time (FoundationDB lets one live 5 s; the timeout
here also covers retries, so an unreachable cluster fails instead of hanging)
and reads in size: :meth:`FdbClient.stream` reads ranges in pages of about
:data:`PAGE_BYTES`, each page its own transaction.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import version
from typing import Any, TypeVar

from spate.statestore.errors import (
    BackendUnavailableError,
    StateStoreError,
    StateStoreUnreachableError,
)
from spate.statestore.fdb.layout import KeyRange

API_VERSION = 730
#: Older API versions reset a transaction's timeout and retry limit on every retry.
OLDEST_API_VERSION = 610
#: Opening fails after this long rather than hang on an unreachable cluster.
CONNECT_TIMEOUT_MS = 5_000
#: Any one transaction, retries included.
TIMEOUT_MS = 30_000
RETRY_LIMIT = 50
#: Bytes read by one page (one transaction) of a range read.
PAGE_BYTES = 4_000_000
#: Range reads started together in one page.
WINDOW_RANGES = 64

_NOT_COMMITTED = 1020
_TRANSACTION_TIMED_OUT = 1031
_TRANSACTION_TOO_LARGE = 2101

T = TypeVar("T")
Rows = list[tuple[bytes, bytes]]
_bindings_lock = threading.Lock()


def load_bindings() -> Any:
    """The ``fdb`` module with an API version selected (this loads libfdb_c)."""
    with _bindings_lock:
        try:
            import fdb
        except ImportError as error:
            raise BackendUnavailableError(install_hint(str(error))) from error
        if fdb.is_api_version_selected():
            # Selected by other code of this process; selecting again would raise.
            selected = int(fdb.get_api_version())
            if selected < OLDEST_API_VERSION:
                raise BackendUnavailableError(
                    f"this process selected FoundationDB API version {selected}; the state "
                    f"store needs {OLDEST_API_VERSION} or newer: select {API_VERSION}")
            return fdb
        try:
            fdb.api_version(API_VERSION)
        except Exception as error:  # the bindings raise a bare Exception without libfdb_c
            why = f"{error}; the foundationdb Python package is {version('foundationdb')}"
            raise BackendUnavailableError(install_hint(why)) from error
        return fdb


def install_hint(why: str) -> str:
    return (f"the FoundationDB client cannot be used ({why}): install the FoundationDB client "
            f"library (the foundationdb-clients 7.3 package, which provides libfdb_c) matching "
            f"your cluster's version, "
            f"with the foundationdb Python package of the same release, on every host that "
            f"opens fdb:// stores; or use another backend (postgresql://user@host/db or "
            f"sqlite:///path)")


def describe(error: Any) -> str:
    text = error.description
    if isinstance(text, bytes):  # the bindings hand back the C string undecoded
        text = text.decode("utf-8", "replace")
    return f"{text} (FoundationDB error {error.code})"


class FdbClient:
    """One cluster's database handle, with retried transactions and paged reads."""

    def __init__(self, cluster_file: str | None, bindings: Any = None) -> None:
        self.cluster_file = cluster_file
        if cluster_file is not None and not os.path.isfile(cluster_file):
            raise BackendUnavailableError(
                f"the FoundationDB cluster file {cluster_file} does not exist: give the path "
                f"of your cluster's fdb.cluster (fdb:///etc/foundationdb/fdb.cluster) or "
                f"fdb:// for the default one")
        self.fdb = bindings if bindings is not None else load_bindings()
        try:
            self.db = self.fdb.open(cluster_file)
        except self.fdb.FDBError as error:
            raise BackendUnavailableError(
                f"cannot open the FoundationDB cluster {self._cluster()}: {describe(error)}; "
                f"check the cluster file") from error
        # An unreachable cluster fails here, within the timeout, rather than at first use.
        self.run(lambda tr: tr.get_read_version().wait(), timeout_ms=CONNECT_TIMEOUT_MS)

    def _cluster(self) -> str:
        return f"of {self.cluster_file}" if self.cluster_file else "of the default cluster file"

    def run(self, work: Callable[..., T], *args: Any, timeout_ms: int = TIMEOUT_MS) -> T:
        """``work(tr, *args)`` in one transaction, committed, and retried on the errors
        FoundationDB calls retryable (so ``work`` must touch nothing but ``tr``)."""
        tr = self.db.create_transaction()
        # From API 610 on, both options survive on_error, so they bound all the retries.
        tr.options.set_timeout(timeout_ms)
        tr.options.set_retry_limit(RETRY_LIMIT)
        while True:
            try:
                result = work(tr, *args)
                tr.commit().wait()
                return result
            except self.fdb.FDBError as error:
                try:
                    tr.on_error(error).wait()
                except self.fdb.FDBError as final:
                    raise self._failure(final, timeout_ms) from final

    def _failure(self, error: Any, timeout_ms: int) -> StateStoreError:
        if error.code == _TRANSACTION_TIMED_OUT:
            return StateStoreUnreachableError(
                f"the FoundationDB cluster {self._cluster()} did not answer within "
                f"{timeout_ms / 1000:g} s: check that it is running (fdbcli --exec status) "
                f"and that the cluster file is current")
        if error.code == _TRANSACTION_TOO_LARGE:
            return StateStoreError(f"a state-store transaction grew past FoundationDB's 10 MB "
                                   f"limit ({describe(error)}): please report this Spate bug")
        if error.code == _NOT_COMMITTED:
            return BackendUnavailableError(
                f"FoundationDB refused a state-store transaction {RETRY_LIMIT} times for "
                f"conflicts: too many processes are changing the same pipeline at once")
        return BackendUnavailableError(f"FoundationDB failed: {describe(error)}; check the "
                                       f"cluster (fdbcli --exec status)")

    def stream(self, ranges: Sequence[KeyRange],
               check: Callable[[Any], None] | None = None) -> Iterator[tuple[bytes, bytes]]:
        """The rows of ``ranges``, in order, read in pages of about :data:`PAGE_BYTES`,
        each page its own transaction; ``check(tr)`` runs in each (it may raise)."""
        position: tuple[int, bytes] | None = (0, ranges[0][0]) if ranges else None
        while position is not None:
            rows, position = self.run(self._page, ranges, position, check)
            yield from rows

    def _page(self, tr: Any, ranges: Sequence[KeyRange], position: tuple[int, bytes],
              check: Callable[[Any], None] | None) -> tuple[Rows, tuple[int, bytes] | None]:
        index, cursor = position
        stop = min(index + WINDOW_RANGES, len(ranges))
        # Start the window's reads together; each result is awaited only when iterated.
        mode = self.fdb.StreamingMode.want_all
        reads = [tr.get_range(cursor if i == index else ranges[i][0], ranges[i][1],
                              streaming_mode=mode) for i in range(index, stop)]
        if check is not None:
            check(tr)
        rows: Rows = []
        size = 0
        for i, read in zip(range(index, stop), reads, strict=True):
            for item in read:
                key, value = bytes(item.key), bytes(item.value)
                rows.append((key, value))
                size += len(key) + len(value)
                if size >= PAGE_BYTES:
                    return rows, (i, key + b"\x00")  # resume just after this key
        return rows, ((stop, ranges[stop][0]) if stop < len(ranges) else None)
