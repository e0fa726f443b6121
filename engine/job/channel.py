"""A job's channel: events from the job to the scheduler, stop requests back.

Two transports behind one interface, picked by URL:

- ``file:///abs/dir`` — events appended as JSON lines to ``dir/events.jsonl``,
  a stop request written to ``dir/stop``. For jobs whose driver runs on the
  scheduler's machine (the ``local`` and ``standalone`` backends, and
  ``spate serve``).
- ``redis://host:port/db?key=<prefix>`` — events in the Redis stream
  ``<prefix>:events``, a stop request in the key ``<prefix>:stop``. For
  drivers elsewhere (the ``kubernetes`` backend).

Events are JSON objects with a ``type``; see :data:`EVENT_TYPES`. A reader
keeps an opaque cursor and asks for the events after it, so reading resumes
where it left off and each event is seen once.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis

from spate.engine.job.nofollow import open_regular

#: ``status``: the job's state changed (``state``: running, stopped, finished or
#: failed; ``message``). ``epoch``: an epoch committed (see
#: :mod:`spate.engine.job.main` for its fields). ``heartbeat``: the job is alive.
#: ``error``: something failed (``message``, ``detail``). ``rows``: preview rows
#: of one epoch (``epoch``, ``rows``).
EVENT_TYPES = frozenset({"status", "epoch", "heartbeat", "error", "rows"})

#: Stop modes a channel carries; ``force`` never reaches a job (its process is killed).
STOP_MODES = ("checkpoint", "graceful", "immediate")

#: A Redis stream keeps about this many events; a reader that falls further behind loses
#: the oldest (epoch events are also summarised in the state store, so nothing is lost).
REDIS_STREAM_MAX_EVENTS = 10_000


class ChannelError(Exception):
    """The channel URL is malformed or its transport failed."""


class JobChannel(ABC):
    """Both ends of one job's channel."""

    # -- the job's end --------------------------------------------------------

    @abstractmethod
    def publish(self, event: dict[str, Any]) -> None:
        """Append ``event`` (a JSON object with a ``type``)."""

    @abstractmethod
    def stop_requested(self) -> str | None:
        """The stop mode asked for, if any."""

    # -- the scheduler's end ------------------------------------------------------

    @abstractmethod
    def read(self, cursor: str | None, limit: int = 1000
             ) -> tuple[list[dict[str, Any]], str | None]:
        """Events after ``cursor`` (None: from the start) and the cursor after them."""

    @abstractmethod
    def request_stop(self, mode: str) -> None:
        """Ask the job to stop (``mode`` in :data:`STOP_MODES`); repeating it is harmless."""

    @abstractmethod
    def delete(self) -> None:
        """Remove the channel's events and stop request."""

    def close(self) -> None:  # noqa: B027 - most transports hold nothing to release
        """Release connections."""


def open_channel(url: str, attempt: int | None = None) -> JobChannel:
    """The channel at ``url`` (``file:///dir`` or ``redis://host:port/db?key=prefix``).

    A job's end opens it with its ``attempt``, which every event it publishes
    carries, so that the scheduler can tell an attempt it killed from the one it
    started next (:func:`spate.scheduler.events.fold_events`); the scheduler's end
    opens it without.
    """
    parts = urlsplit(url)
    if parts.scheme == "file":
        if not parts.path.startswith("/"):
            raise ChannelError(f"channel URL {url!r} needs an absolute path: file:///dir")
        return FileJobChannel(Path(parts.path), attempt)
    if parts.scheme in ("redis", "rediss"):
        keys = parse_qs(parts.query).get("key")
        if not keys:
            raise ChannelError("a Redis channel URL needs ?key=<prefix>")
        return RedisJobChannel(parts._replace(query="").geturl(), keys[0], attempt)
    raise ChannelError(f"unknown channel URL scheme {parts.scheme!r}: use file:// or redis://")


def _check_event(event: dict[str, Any], attempt: int | None) -> str:
    if event.get("type") not in EVENT_TYPES:
        raise ChannelError(f"unknown event type {event.get('type')!r}")
    stamp: dict[str, Any] = {"at_ms": time.time_ns() // 10**6}
    if attempt is not None:
        stamp["attempt"] = attempt
    return json.dumps({**stamp, **event}, separators=(",", ":"), default=str)


def _check_mode(mode: str) -> str:
    if mode not in STOP_MODES:
        raise ChannelError(f"unknown stop mode {mode!r}; use one of {', '.join(STOP_MODES)}")
    return mode


class FileJobChannel(JobChannel):
    """Events as JSON lines in ``dir/events.jsonl``; the cursor is a byte offset."""

    def __init__(self, directory: Path, attempt: int | None = None) -> None:
        self.directory = directory
        self.attempt = attempt
        self.events_path = directory / "events.jsonl"
        self.stop_path = directory / "stop"

    def publish(self, event: dict[str, Any]) -> None:
        line = _check_event(event, self.attempt) + "\n"
        self.directory.mkdir(parents=True, exist_ok=True)
        # One write of a whole line with O_APPEND: a reader never sees half of it
        # unless the writer dies mid-write, and then the partial line is never read.
        fd = os.open(self.events_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def stop_requested(self) -> str | None:
        try:
            mode = self.stop_path.read_text().strip()
        except FileNotFoundError:
            return None
        return mode or None

    def read(self, cursor: str | None, limit: int = 1000
             ) -> tuple[list[dict[str, Any]], str | None]:
        offset = int(cursor) if cursor else 0
        events: list[dict[str, Any]] = []
        try:
            # Read by the scheduler and the API, in a folder the job's user writes.
            descriptor = open_regular(self.events_path, os.O_RDONLY)
        except FileNotFoundError:
            return [], cursor
        except OSError as error:
            raise ChannelError(f"cannot read the job's events: {error.strerror}") from None
        with os.fdopen(descriptor, "rb") as file:
            file.seek(offset)
            while len(events) < limit:
                line = file.readline()
                if not line.endswith(b"\n"):  # nothing more, or a line still being written
                    break
                offset += len(line)
                events.append(json.loads(line))
        return events, str(offset)

    def request_stop(self, mode: str) -> None:
        text = _check_mode(mode).encode()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # A new file under a name the job cannot guess (mkstemp: O_EXCL, O_NOFOLLOW),
            # so nothing the job's user planted in its folder is written through.
            fd, temporary = tempfile.mkstemp(prefix=".stop-", dir=self.directory)
            try:
                # Readable by the job whoever writes it (a sandboxed job runs as another
                # user); the job's folder itself is the job's own and closed to others.
                os.fchmod(fd, 0o644)
                os.write(fd, text)
            finally:
                os.close(fd)
            # Atomic, and a link named 'stop' is replaced, not followed.
            os.replace(temporary, self.stop_path)
        except OSError as error:
            raise ChannelError(f"cannot ask the job to stop: {error.strerror}") from None

    def delete(self) -> None:
        for path in (self.events_path, self.stop_path):
            path.unlink(missing_ok=True)


class RedisJobChannel(JobChannel):
    """Events in the stream ``<key>:events``; the cursor is a stream entry id."""

    def __init__(self, redis_url: str, key: str, attempt: int | None = None) -> None:
        self.attempt = attempt
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=10)
        self._events = f"{key}:events"
        self._stop = f"{key}:stop"

    def publish(self, event: dict[str, Any]) -> None:
        self._call(self._redis.xadd, self._events, {"event": _check_event(event, self.attempt)},
                   maxlen=REDIS_STREAM_MAX_EVENTS, approximate=True)

    def stop_requested(self) -> str | None:
        mode = self._call(self._redis.get, self._stop)
        return mode.decode() if mode else None

    def read(self, cursor: str | None, limit: int = 1000
             ) -> tuple[list[dict[str, Any]], str | None]:
        start = f"({cursor}" if cursor else "-"
        entries = self._call(self._redis.xrange, self._events, start, "+", count=limit)
        events = [json.loads(fields[b"event"]) for _, fields in entries]
        return events, (entries[-1][0].decode() if entries else cursor)

    def request_stop(self, mode: str) -> None:
        self._call(self._redis.set, self._stop, _check_mode(mode))

    def delete(self) -> None:
        self._call(self._redis.delete, self._events, self._stop)

    def close(self) -> None:
        self._redis.close()

    @staticmethod
    def _call(method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except redis.RedisError as error:
            raise ChannelError(f"job channel in Redis failed: {error}") from None
