"""Stop requests reach the runner in the right mode; heartbeats flow while a job lives."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from spate.engine.job.channel import FileJobChannel
from spate.engine.job.control import JobControl


class RecordingRunner:
    """Stands in for PipelineRunner's two stop methods, recording the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def request_stop(self) -> None:
        self.calls.append(("request_stop", time.monotonic()))

    def stop_now(self) -> None:
        self.calls.append(("stop_now", time.monotonic()))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def _eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_graceful_stop_falls_back_to_immediate_after_its_timeout(tmp_path: Path) -> None:
    channel = FileJobChannel(tmp_path)
    runner = RecordingRunner()
    with JobControl(channel, graceful_timeout_s=0.6) as control:
        control.attach(runner)
        asked = time.monotonic()
        channel.request_stop("graceful")
        assert _eventually(lambda: runner.names == ["request_stop", "stop_now"])
    assert runner.calls[1][1] - asked >= 0.6
    assert control.stop_mode == "immediate"


def test_a_request_only_ever_makes_a_stop_more_urgent(tmp_path: Path) -> None:
    runner = RecordingRunner()
    with JobControl(FileJobChannel(tmp_path)) as control:
        control.attach(runner)
        control.request("immediate")
        control.request("checkpoint")
        control.request("graceful")
    assert runner.names == ["stop_now"]


def test_a_stop_asked_before_the_runner_exists_applies_on_attach(tmp_path: Path) -> None:
    channel = FileJobChannel(tmp_path)
    channel.request_stop("checkpoint")
    runner = RecordingRunner()
    with JobControl(channel) as control:
        assert _eventually(lambda: control.stop_mode == "checkpoint")
        control.attach(runner)
    assert runner.names == ["request_stop"]


def test_sigterm_is_a_checkpoint_stop(tmp_path: Path) -> None:
    runner = RecordingRunner()
    before = signal.getsignal(signal.SIGTERM)
    with JobControl(FileJobChannel(tmp_path)) as control:
        control.attach(runner)
        os.kill(os.getpid(), signal.SIGTERM)
        assert _eventually(lambda: runner.names == ["request_stop"])
        assert control.stop_mode == "checkpoint"
    assert signal.getsignal(signal.SIGTERM) == before


def test_heartbeats_are_published_while_the_job_lives(tmp_path: Path) -> None:
    channel = FileJobChannel(tmp_path)
    with JobControl(channel):
        assert _eventually(lambda: bool(channel.read(None)[0]))
    events, _ = channel.read(None)
    assert {e["type"] for e in events} == {"heartbeat"}
