"""Connection checks (the ``/test`` endpoints) run in the tenant's compute unit.

A check connects to what a tenant configured, so it must not run in the API's
process, which sits next to the control plane's database and broker and is
not sandboxed. :class:`CheckRunner` starts one short process per check
(``python -m spate.engine.connectors.core.checks``): with sandboxing on, in a
compute unit of the tenant's own — its user, its folders, small limits and a
network of its own that the host filters by the egress policy
(:mod:`spate.scheduler.sandbox.network`) — which is removed when the check
ends; with sandboxing off (trusted tenants only), as a plain child process.
The API relays the process's answer.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from spate.scheduler.config import SchedulerConfig
from spate.scheduler.errors import SchedulerError
from spate.scheduler.sandbox.cgroups import Limits, find_cgroups
from spate.scheduler.sandbox.network import NetworkRules, UnitNetwork
from spate.scheduler.sandbox.unit import ComputeUnit, TenantUser, UnitFolders
from spate.scheduler.tenants import Tenants

log = logging.getLogger(__name__)

#: A check that has not answered by then failed (the connectors' own timeouts are shorter).
CHECK_TIMEOUT_S = 60.0
#: What a check's unit may use: enough for a client library, nothing like a job.
CHECK_LIMITS = Limits(cpu_cores=1.0, memory_bytes=512 * 1024 * 1024)
_COMMAND = [sys.executable, "-m", "spate.engine.connectors.core.checks"]


class CheckRunner:
    """Runs one tenant's connection check in a process of its own."""

    def __init__(self, config: SchedulerConfig,
                 tenant_number: Callable[[str], int] | None = None) -> None:
        self.config = config
        self.tenants = Tenants(config)
        #: the tenant's sandbox number (its user); needed only with sandboxing on
        self.tenant_number = tenant_number
        self._network: UnitNetwork | None = None

    def run(self, tenant_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """The check's answer (``ok`` and ``message``) for ``request``
        (:func:`spate.engine.connectors.core.checks.check_request`)."""
        payload = json.dumps(dict(request))
        unit = None
        try:
            if self.config.sandbox:
                unit = self._unit(tenant_id)
                argv, env = unit.command(_COMMAND, {})
            else:
                argv, env = _COMMAND, _plain_environment()
            done = subprocess.run(argv, input=payload, capture_output=True, text=True, env=env,
                                  timeout=CHECK_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"ok": False, "message": f"check failed: no answer in {CHECK_TIMEOUT_S:.0f} s"}
        except (SchedulerError, OSError) as error:  # the server's fault, not the tenant's
            log.error("a connection check could not be started: %s", error)
            return {"ok": False, "message": "check failed: the server could not start the "
                                            "check in its sandbox; ask the operator"}
        finally:
            if unit is not None:
                unit.remove()
                shutil.rmtree(unit.folders.job_dir.parent, ignore_errors=True)
                shutil.rmtree(unit.folders.identity_dir, ignore_errors=True)
        return self._answer(done)

    def _unit(self, tenant_id: str) -> ComputeUnit:
        if self.tenant_number is None:
            raise SchedulerError("connection checks need the tenants' sandbox numbers")
        number = self.tenant_number(tenant_id)
        self.tenants.make_folders(tenant_id)
        name = f"check-{tenant_id}-{time.time_ns()}"
        base = self.config.data_dir / "checks" / name
        folders = UnitFolders(base / "run", self.tenants.space(tenant_id).folders,
                              self.config.data_dir / "identities" / name)
        unit = ComputeUnit(name, TenantUser(self.config.sandbox_uid_base + number,
                                            f"spate-t{number}"),
                           folders, CHECK_LIMITS, find_cgroups(), self._unit_network())
        unit.prepare()
        return unit

    def _unit_network(self) -> UnitNetwork:
        if self._network is None:
            self._network = UnitNetwork(NetworkRules.from_policy(
                self.tenants.egress_policy(), platform=self.tenants.platform_endpoints()))
        return self._network

    @staticmethod
    def _answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        lines = done.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            log.warning("a connection check ended without an answer (exit %s): %s",
                        done.returncode, done.stderr.strip()[-500:])
            return {"ok": False, "message": "check failed: the check process ended without "
                                            "an answer"}
        return {"ok": answer["ok"], "message": str(answer.get("message", ""))}


def _plain_environment() -> dict[str, str]:
    """A check's environment without sandboxing: this one without Spate's settings
    (which hold the control plane's secrets)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("SPATE_")}
