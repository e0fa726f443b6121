"""A real ``spate serve`` process for end-to-end tests: started, read, stopped."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil

from spate.engine.host.folder import RUNNING, HostFolder, job_of

REPO = Path(__file__).resolve().parents[2]
_SERVING = re.compile(r"Spate is serving at (http://\S+)")
_KEY_FILE = re.compile(r"admin key file .*: (\S+)")


class ServeProcess:
    """``spate serve --port 0`` in ``workdir`` with ``env``; its URL and admin key once up."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.log_path = workdir / "serve.log"
        self._log = self.log_path.open("wb")
        #: what it printed up to its banner (never the key: stdout is not a terminal)
        self.stdout_lines: list[str] = []
        self.key_file: Path | None = None
        #: what :meth:`stop` found still running after the server exited
        self.leftovers: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "spate.api.cli", "serve", "--port", "0"], cwd=workdir,
            env={**os.environ, "SPATE_LOG": "INFO", **env},
            stdout=subprocess.PIPE, stderr=self._log, start_new_session=True)
        self.url, self.admin_key = self._read_banner()
        self.http = httpx.Client(base_url=self.url + "/api/v1", timeout=30,
                                 headers={"Authorization": f"Bearer {self.admin_key}"})

    def _read_banner(self, timeout_s: float = 120.0) -> tuple[str, str]:
        assert self.process.stdout is not None
        url = key = None
        deadline = time.monotonic() + timeout_s
        while (url is None or key is None) and time.monotonic() < deadline:
            line = self.process.stdout.readline().decode()
            if not line:
                raise AssertionError(f"spate serve exited: {self.log()}")
            url = url or _match(_SERVING, line)
            self.stdout_lines.append(line)
            key_file = _match(_KEY_FILE, line)
            if key_file is not None:
                self.key_file = Path(key_file)
                key = self.key_file.read_text().strip()
        assert url and key, f"no banner from spate serve: {self.log()}"
        return url, key

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self, timeout_s: float = 120.0) -> int:
        """SIGTERM, then wait; the exit status. The processes the server had started (its
        tenants' applications and jobs, their JVMs and Python workers) that outlive it
        are in :attr:`leftovers` (and killed, so one test's leak does not spill over)."""
        self.http.close()
        started = _descendants(self.process.pid)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()
        _, alive = psutil.wait_procs(started, timeout=10)
        self.leftovers = [" ".join(_command(p)) for p in alive]
        for leftover in alive:
            with contextlib.suppress(psutil.Error):
                leftover.kill()
        return self.process.returncode


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def _command(process: psutil.Process) -> list[str]:
    try:
        return list(process.cmdline())[:4]
    except psutil.Error:
        return [str(process.pid)]


class ServedTenant:
    """A tenant of a running ``spate serve`` (its own admin key), for a test module that
    shares the server with others: what it creates and is billed is its own."""

    def __init__(self, serve: ServeProcess, tenant_id: str, name: str, admin_key: str) -> None:
        self.serve = serve
        self.url = serve.url
        self.workdir = serve.workdir
        self.tenant_id = tenant_id
        self.name = name
        self.admin_key = admin_key
        self.http = httpx.Client(base_url=self.url + "/api/v1", timeout=30,
                                 headers={"Authorization": f"Bearer {admin_key}"})

    def log(self) -> str:
        return self.serve.log()

    def running_queries(self) -> set[str]:
        """The jobs whose queries the tenant's application says it runs now (by the
        server's default data folder, ``.spate`` in its working folder)."""
        folder = HostFolder(self.workdir / ".spate" / "applications" / self.tenant_id)
        status = folder.read_status()
        return set() if status is None else {
            job_of(run) for run, state in status.jobs.items() if state == RUNNING}

    def close(self) -> None:
        self.http.close()


def new_tenant(serve: ServeProcess, platform_key: str, name: str) -> ServedTenant:
    """A new tenant of ``serve`` (created with the platform admin key) and its admin key."""
    created = httpx.post(f"{serve.url}/api/v1/tenants", timeout=30,
                         json={"name": f"{name}-{secrets.token_hex(3)}"},
                         headers={"Authorization": f"Bearer {platform_key}"})
    assert created.status_code == 201, created.text
    body = created.json()
    return ServedTenant(serve, body["tenant"]["id"], body["tenant"]["name"],
                        body["admin_key"]["key"])


def _match(pattern: re.Pattern[str], line: str) -> str | None:
    found = pattern.search(line)
    return found.group(1) if found else None


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 240.0,
             interval_s: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def sse_events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """(event, parsed data) of an SSE response, as they arrive; comments are skipped."""
    name, data = None, []
    for line in response.iter_lines():
        if line == "":
            if name is not None or data:
                yield name or "message", json.loads("\n".join(data))
            name, data = None, []
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
