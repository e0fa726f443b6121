"""Cheap, real checks of connection settings, for the ``/test`` endpoints.

What a check can do depends on the connector: ``single_file`` looks at its
path, resolved inside the tenant's storage root (a source's file must be
readable, a sink's folder writable; a path outside the root is refused
before anything is looked at, so a check tells nothing about the rest of the
server); a network connector connects to its system through the tenant's
egress policy (``Connector.reach``); the generated sources and the
stdout/blackhole sinks have nothing outside the process to reach, so their
check is the validation itself. A
check never raises and never returns a secret: every secret value is
scrubbed from its message.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from spate.api.connections import SECRET_PLACEHOLDER
from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.base import Connector, ConnectorError
from spate.engine.connectors.boundary import UNCONFINED, Boundary

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str

    def scrubbed(self, secrets: Mapping[str, str]) -> CheckResult:
        """The result with every secret value in its message replaced by a marker."""
        message = self.message
        for value in sorted(secrets.values(), key=len, reverse=True):
            if value:
                message = message.replace(value, SECRET_PLACEHOLDER)
        return CheckResult(self.ok, message)


def check_options(connector: str, options: Mapping[str, str], role: str | None,
                  boundary: Boundary = UNCONFINED) -> CheckResult:
    """Reach what ``options`` point at, for a table of ``role`` (None: a profile, role
    unknown), within the tenant's ``boundary``."""
    check = _CHECKS.get(connector) or partial(_reach, CONNECTORS[connector])
    try:
        return check(options, role, boundary)
    except OSError as error:  # an unexpected filesystem answer is a failed check, not a 500
        logger.info("connection check failed", extra={"connector": connector})
        return CheckResult(False, f"check failed: {error.strerror or type(error).__name__}")


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
