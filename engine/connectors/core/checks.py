"""Cheap, real checks of connection settings, for the ``/test`` endpoints.

They connect to what a tenant configured, so they run where the tenant's
jobs run: in a process of the tenant's compute unit (its sandbox and its
network), started by :mod:`spate.scheduler.checks` with ``python -m
spate.engine.connectors.core.checks``, which reads one request as JSON on stdin
and writes the result as JSON on stdout. The API only relays the answer.

What a check can do depends on the connector: ``single_file`` looks at its
path, resolved inside the tenant's storage root (a source's file must be
readable, a sink's folder writable; a path outside the root is refused
before anything is looked at, so a check tells nothing about the rest of the
server); a network connector connects to its system through the tenant's
egress policy (``Connector.reach``); the generated sources and the
stdout/blackhole sinks have nothing outside the process to reach, so their
check is the validation itself. A
check never raises and never returns a secret: every secret value is
scrubbed from its message (:meth:`CheckResult.scrubbed`, by the caller, which
knows which option values are secrets).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from spate.engine import connectors
from spate.engine.connectors.core.base import Connector, ConnectorError
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str

    def scrubbed(self, secrets: Mapping[str, str], marker: str = "********") -> CheckResult:
        """The result with every secret value in its message replaced by ``marker``."""
        message = self.message
        for value in sorted(secrets.values(), key=len, reverse=True):
            if value:
                message = message.replace(value, marker)
        return CheckResult(self.ok, message)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message}


def check_options(connector: str, options: Mapping[str, str], role: str | None,
                  boundary: Boundary = UNCONFINED) -> CheckResult:
    """Reach what ``options`` point at, for a table of ``role`` (None: a profile, role
    unknown), within the tenant's ``boundary``."""
    check = _CHECKS.get(connector) or partial(_reach, connectors.CONNECTORS[connector])
    try:
        return check(options, role, boundary)
    except OSError as error:  # an unexpected filesystem answer is a failed check, not a 500
        logger.info("connection check failed", extra={"connector": connector})
        return CheckResult(False, f"check failed: {error.strerror or type(error).__name__}")
    except Exception as error:  # noqa: BLE001 - a client library's own error: a failed check
        # Named by type only: a library's message may carry an address it was sent to.
        logger.info("connection check failed", extra={"connector": connector})
        return CheckResult(False, f"check failed: could not connect ({type(error).__name__}); "
                                  "check the connection settings")


def _reach(connector: Connector, options: Mapping[str, str], role: str | None,
           boundary: Boundary) -> CheckResult:
    try:
        reached = connector.reach(options, role, boundary)
    except ConnectorError as error:
        return CheckResult(False, str(error))
    if reached is None:
        return CheckResult(True, f"connector '{connector.name}' reaches nothing outside the "
                                 "job; the options are valid")
    return CheckResult(True, reached)


def _check_file(options: Mapping[str, str], role: str | None,
                boundary: Boundary) -> CheckResult:
    raw = options.get("path")
    if not raw:
        return CheckResult(True, "no path set yet; the tables using this profile set it")
    role = role or options.get("type")
    try:
        path = Path(boundary.resolve_path(raw))
    except ConnectorError as error:
        return CheckResult(False, str(error))
    if role == "sink":
        return _check_writable_parent(raw, path)
    if path.is_file() and os.access(path, os.R_OK):
        return CheckResult(True, f"file {raw} is readable")
    if path.is_dir():
        return CheckResult(False, f"{raw} is a directory; a single_file source reads a file")
    if role == "source":
        state = "is not readable" if path.exists() else "does not exist"
        return CheckResult(False, f"file {raw} {state}")
    return _check_writable_parent(raw, path)  # a profile without a type: a sink would do


def _check_writable_parent(raw: str, path: Path) -> CheckResult:
    if path.is_dir():
        return CheckResult(False, f"{raw} is a directory; single_file writes a file")
    folder = path.parent.resolve()
    while not folder.exists():  # a sink creates missing folders; the nearest one decides
        folder = folder.parent
    if os.access(folder, os.W_OK | os.X_OK):
        return CheckResult(True, f"{raw} can be written")
    return CheckResult(False, f"{raw} cannot be written: its folder is not writable")


_CHECKS: dict[str, Callable[[Mapping[str, str], str | None, Boundary], CheckResult]] = {
    "single_file": _check_file,
}


def check_request(request: Mapping[str, Any]) -> CheckResult:
    """Run the check a JSON ``request`` describes: ``connector``, ``options``, ``role``
    (or null) and ``boundary`` (:meth:`Boundary.to_dict`)."""
    connector = str(request.get("connector", ""))
    if connector not in connectors.CONNECTORS:
        return CheckResult(False, f"unknown connector '{connector}'")
    options = {str(k): str(v) for k, v in dict(request.get("options") or {}).items()}
    role = request.get("role")
    boundary = Boundary.from_dict(request["boundary"]) if request.get("boundary") \
        else UNCONFINED
    return check_options(connector, options, None if role is None else str(role), boundary)


def main() -> int:
    """One check: the request on stdin, the result on stdout (both JSON)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        request = json.load(sys.stdin)
    except ValueError:
        result = CheckResult(False, "check failed: the request was not readable")
    else:
        result = check_request(request)
    json.dump(result.to_dict(), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
