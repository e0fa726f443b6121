"""The ``single_file`` sink: exactly-once appends to one local file.

Each epoch's records are encoded by Spark, collected to the driver and appended;
the marker is the file length after the epoch. Reopening at a marker truncates
the file back to it, so an epoch replayed after a crash overwrites whatever the
crashed attempt had appended: no line is lost or duplicated.
"""

from __future__ import annotations

import logging
import os
from typing import IO, Any

from pyspark.sql import DataFrame

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import FormatSpec, encoded_lines
from spate.engine.connectors.single_file.source import PATH

log = logging.getLogger(__name__)


class SingleFileSink(core.Sink):
    """Appends newline-delimited records to ``path``; marker ``{"bytes": length}``."""

    def __init__(self, path: str, spec: FormatSpec, table: str,
                 shown_path: str | None = None) -> None:
        self.path = path
        #: the file as the SQL named it: what errors show (not the server's layout)
        self.shown_path = shown_path or path
        self.spec = spec
        self.table = table
        self._file: IO[bytes] | None = None

    def open(self, marker: Any | None) -> None:
        length = 0 if marker is None else int(marker["bytes"])
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        handle = open(self.path, "ab")  # stays open across epochs
        size = handle.seek(0, os.SEEK_END)
        if size < length:
            handle.close()
            raise core.ConnectorError(
                f"single_file sink '{self.table}': {self.shown_path} holds {size} bytes but "
                f"{length} were committed; it was changed outside Spate. Restore the file "
                "or start the pipeline afresh", option=PATH.name)
        handle.truncate(length)
        self._file = handle
        log.info("single_file sink opened", extra={"path": self.path, "bytes": length})

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, int]:
        if self._file is None:
            raise core.ConnectorError(f"single_file sink '{self.table}' written before open()")
        data = encoded_lines(df, self.spec)
        self.epoch_bytes = len(data)
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())
        # The file's size, not tell(): truncate() in open() leaves the position past the
        # end when a crashed attempt had appended, and an epoch with nothing to write
        # would report that stale position.
        length = os.fstat(self._file.fileno()).st_size
        log.debug("epoch written", extra={"path": self.path, "epoch": epoch, "bytes": length})
        return {"bytes": length}

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
