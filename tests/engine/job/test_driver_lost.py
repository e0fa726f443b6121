"""A hosted job tells its application's death from its own failure
(:func:`spate.engine.spark.driver_lost`): a call into the JVM that fails on its
connection while the JVM exits is the application's death, even when the JVM takes
seconds to exit after it stopped answering; any other error is the job's.

The driver here is a real process standing in for the JVM: ``driver_lost`` only asks
the gateway's process whether it still runs.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from py4j.protocol import Py4JNetworkError

from spate.engine.spark import driver_lost


def _session(seconds: float) -> tuple[SimpleNamespace, subprocess.Popen[bytes]]:
    """A session whose driver process exits after ``seconds``."""
    process = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    gateway = SimpleNamespace(proc=process)
    return SimpleNamespace(sparkContext=SimpleNamespace(_gateway=gateway)), process


def _refused() -> Py4JNetworkError:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise Py4JNetworkError("An error occurred while trying to connect") from cause
    except Py4JNetworkError as error:
        return error


def test_a_refused_connection_while_the_driver_exits_is_the_applications_death() -> None:
    session, process = _session(1.5)
    try:
        assert driver_lost(session, _refused(), wait_s=20)
    finally:
        process.kill()


def test_a_refused_connection_to_a_driver_that_lives_on_is_the_jobs_failure() -> None:
    session, process = _session(60)
    try:
        assert not driver_lost(session, _refused(), wait_s=0.5)
        assert process.poll() is None
    finally:
        process.kill()


@pytest.mark.parametrize("error", [ValueError("bad record"), RuntimeError("a UDF raised")])
def test_another_error_is_the_jobs_without_waiting(error: Exception) -> None:
    session, process = _session(60)
    try:
        assert not driver_lost(session, error, wait_s=60)  # returns at once: no wait
    finally:
        process.kill()


def test_any_error_once_the_driver_is_gone_is_the_applications_death() -> None:
    session, process = _session(0)
    process.wait()
    assert driver_lost(session, ValueError("whatever the job saw"), wait_s=0)
