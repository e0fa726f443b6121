"""Runs ``python -m spate.engine.job.main`` as a subprocess and follows its channel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spate.engine.job.channel import JobChannel, open_channel
from spate.engine.job.spec import JobSpec

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Generous: each job starts its own Spark on a shared, loaded machine.
JOB_TIMEOUT_S = 240.0


def make_spec(workdir: Path, sql: str, **overrides: Any) -> JobSpec:
    """A spec with its state, checkpoint and file channel under ``workdir``."""
    values: dict[str, Any] = {
        "job_id": "job-1", "tenant_id": "tenant-a", "pipeline_id": "pipeline-a", "sql": sql,
        "state_url": f"sqlite:///{workdir / 'state.db'}",
        "checkpoint_dir": str(workdir / "checkpoint"),
        "channel_url": f"file://{workdir / 'channel'}",
    }
    values.update(overrides)
    return JobSpec(**values)


@dataclass
class JobProcess:
    """One job subprocess and the events read from its channel so far."""

    spec: JobSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    channel: JobChannel
    events: list[dict[str, Any]] = field(default_factory=list)
    _cursor: str | None = None

    def poll_events(self) -> list[dict[str, Any]]:
        new, self._cursor = self.channel.read(self._cursor)
        self.events.extend(new)
        return new

    def wait_for(self, condition: Callable[[list[dict[str, Any]]], bool],
                 timeout_s: float = JOB_TIMEOUT_S) -> None:
        """Read events until ``condition(events)`` holds; fail if the job ends first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.poll_events()
            if condition(self.events):
                return
            if self.process.poll() is not None:
                self.poll_events()
                if condition(self.events):
                    return
                raise AssertionError(f"the job ended (exit {self.process.returncode}) first:\n"
                                     f"{self.log()[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"condition not reached in {timeout_s} s:\n{self.log()[-3000:]}")

    def finish(self, timeout_s: float = JOB_TIMEOUT_S) -> int:
        """Wait for the process to exit; read the remaining events; return its exit code."""
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the job did not exit:\n{self.log()[-3000:]}") from None
        self.poll_events()
        self.channel.close()
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def statuses(self) -> list[str]:
        return [e["state"] for e in self.of_type("status")]


def start_job(spec: JobSpec, workdir: Path, name: str = "job",
              env: dict[str, str] | None = None) -> JobProcess:
    """Write ``spec`` to ``workdir/<name>.json`` and start the job process on it."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / f"{name}.json"
    spec_path.write_text(json.dumps(asdict(spec)))
    log_path = workdir / f"{name}.log"
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPATE_LOG="INFO", **(env or {}))
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "spate.engine.job.main", str(spec_path)],
                                   cwd=REPO_ROOT, env=environment, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return JobProcess(spec, process, log_path, open_channel(spec.channel_url))


def epochs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "epoch"]


def operator(event: dict[str, Any], name: str) -> dict[str, Any]:
    """The figures of operator ``name`` in an epoch event."""
    found = [o for o in event["operators"] if o["operator"] == name]
    assert len(found) == 1, event["operators"]
    return found[0]
