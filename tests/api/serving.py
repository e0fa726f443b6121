"""A real ``spate serve`` process for end-to-end tests: started, read, stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
_SERVING = re.compile(r"Spate is serving at (http://\S+)")
_KEY = re.compile(r"admin key .*: (spate_\S+)")


class ServeProcess:
    """``spate serve --port 0`` in ``workdir`` with ``env``; its URL and admin key once up."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.log_path = workdir / "serve.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--port", "0"], cwd=workdir,
            env={**os.environ, "PYTHONPATH": str(REPO), "SPATE_LOG": "INFO", **env},
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
            key = key or _match(_KEY, line)
        assert url and key, f"no banner from spate serve: {self.log()}"
        return url, key

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self, timeout_s: float = 120.0) -> int:
        """SIGTERM, then wait; the exit status."""
        self.http.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()
        return self.process.returncode


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
