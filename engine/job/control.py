"""A running job's background duties: heartbeats, and stop requests applied to its runner.

Stop modes (read from the channel, or SIGTERM):

- ``checkpoint`` (and SIGTERM): the epoch in progress commits, then the
  streaming query stops.
- ``graceful``: as ``checkpoint``, but if the job has not stopped after
  :data:`GRACEFUL_TIMEOUT_S` it falls back to ``immediate``.
- ``immediate``: the epoch in progress is abandoned (never half-applied: it
  is replayed whole by the next run) and the query stops now.

A later request can only make a stop more urgent.  A request that arrives
before the runner exists is kept and applied when it is attached.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any, Protocol

from spate.engine.job.channel import ChannelError, JobChannel
from spate.engine.job.events import heartbeat_event

log = logging.getLogger(__name__)

#: How often the channel is asked for a stop request.
STOP_POLL_S = 0.5
#: How often a live job says so.
HEARTBEAT_INTERVAL_S = 5.0
#: A graceful stop waits this long for the epoch in progress to commit before
#: abandoning it: long enough for an ordinary epoch (seconds) on a loaded
#: cluster, short enough that an operator asking for a graceful stop gets one.
GRACEFUL_TIMEOUT_S = 30.0

_URGENCY = {"checkpoint": 1, "graceful": 2, "immediate": 3}


class Stoppable(Protocol):
    """What a stop needs of the runner (:class:`spate.engine.runtime.runner.PipelineRunner`)."""

    def request_stop(self) -> None: ...

    def stop_now(self) -> None: ...


class JobControl:
    """Heartbeat and stop-request threads for one job; use as a context manager."""

    def __init__(self, channel: JobChannel, graceful_timeout_s: float = GRACEFUL_TIMEOUT_S,
                 own_process: bool = True) -> None:
        """``own_process``: the job is its process's only one, so SIGTERM stops it (a
        job hosted in a tenant's application is stopped through its channel alone)."""
        self.channel = channel
        self.own_process = own_process
        self.graceful_timeout_s = graceful_timeout_s
        #: The most urgent stop mode asked for so far (None: keep running).
        self.stop_mode: str | None = None
        self._runner: Stoppable | None = None
        self._closed = threading.Event()
        self._sigterm = threading.Event()
        self._lock = threading.Lock()
        self._fallback: threading.Timer | None = None
        self._previous_sigterm: Any = signal.SIG_DFL
        self._threads = [threading.Thread(target=self._beat, name="job-heartbeat", daemon=True),
                         threading.Thread(target=self._poll, name="job-stop-poll", daemon=True)]

    def __enter__(self) -> JobControl:
        if self.own_process:
            self._previous_sigterm = signal.signal(signal.SIGTERM,
                                                   lambda *_: self._on_sigterm())
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closed.set()
        if self._fallback is not None:
            self._fallback.cancel()
        if self.own_process:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        for thread in self._threads:
            thread.join(timeout=STOP_POLL_S * 4)

    def attach(self, runner: Stoppable) -> None:
        """Apply stops to ``runner`` from now on (and any stop already asked for)."""
        with self._lock:
            self._runner = runner
            mode = self.stop_mode
        if mode is not None:
            self._apply(runner, mode)

    def request(self, mode: str) -> None:
        """Stop the job in ``mode`` unless a more urgent stop is already under way."""
        with self._lock:
            if _URGENCY.get(mode, 0) <= _URGENCY.get(self.stop_mode or "", 0):
                return
            self.stop_mode = mode
            runner = self._runner
        log.info("stop requested", extra={"mode": mode})
        if runner is not None:
            self._apply(runner, mode)

    def _apply(self, runner: Stoppable, mode: str) -> None:
        if mode == "immediate":
            runner.stop_now()
            return
        runner.request_stop()
        if mode == "graceful" and self._fallback is None:
            self._fallback = threading.Timer(self.graceful_timeout_s, self._give_up_waiting)
            self._fallback.daemon = True
            self._fallback.start()

    def _give_up_waiting(self) -> None:
        log.warning("graceful stop timed out; stopping immediately",
                    extra={"timeout_s": self.graceful_timeout_s})
        self.request("immediate")

    def _on_sigterm(self) -> None:
        # A signal handler may interrupt the main thread while it holds the lock:
        # it only sets a flag, and the polling thread turns it into a request.
        self._sigterm.set()

    def _poll(self) -> None:
        while not self._closed.wait(STOP_POLL_S):
            if self._sigterm.is_set():
                self._request_safely("checkpoint")
            try:
                mode = self.channel.stop_requested()
            except ChannelError as error:
                log.warning("cannot read stop requests: %s", error)
                continue
            if mode is not None:
                self._request_safely(mode)

    def _request_safely(self, mode: str) -> None:
        # This thread must outlive a failed stop (say, Spark already shutting down)
        # so that a later, more urgent request is still seen.
        try:
            self.request(mode)
        except Exception:
            log.exception("stop request %s failed", mode)

    def _beat(self) -> None:
        while True:
            try:
                self.channel.publish(heartbeat_event())
            except ChannelError as error:
                log.warning("cannot publish a heartbeat: %s", error)
            if self._closed.wait(HEARTBEAT_INTERVAL_S):
                return
