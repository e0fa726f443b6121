"""Fixtures of the Terraform provider's tests: a real ``spate serve`` and a Terraform
working directory whose CLI configuration points ``spate/spate`` at this checkout's
provider (``dev_overrides``: Terraform downloads nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.api.serving import ServedTenant, ServeProcess, new_tenant
from tests.conftest import SHARED_PLATFORM_KEY


@dataclass
class Terraform:
    """``terraform`` in ``workdir`` with this checkout's provider and ``env``."""

    workdir: Path
    env: dict[str, str]
    outputs: list[str] = field(default_factory=list)

    def write(self, config: str) -> None:
        (self.workdir / "main.tf").write_text(config)

    def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = subprocess.run(["terraform", *args, "-no-color"], cwd=self.workdir,
                                env=self.env, capture_output=True, text=True, timeout=600)
        self.outputs.append(result.stdout + result.stderr)
        print(f"terraform {' '.join(args)}: {time.monotonic() - started:.1f} s")
        assert result.returncode in ok, (
            f"terraform {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        return result

    def state_text(self) -> str:
        return (self.workdir / "terraform.tfstate").read_text()


@pytest.fixture(scope="module")
def serve(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    """A tenant of its own on the session's shared server."""
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "terraform")
    yield tenant
    tenant.close()


@pytest.fixture(scope="module")
def terraform(serve: ServedTenant, tmp_path_factory: pytest.TempPathFactory) -> Terraform:
    if shutil.which("terraform") is None:
        pytest.skip("the terraform binary is not installed")
    plugins = tmp_path_factory.mktemp("tf-plugins")
    wrapper = plugins / "terraform-provider-spate"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m spate.api.client.terraform "$@"\n')
    wrapper.chmod(0o755)
    home = tmp_path_factory.mktemp("tf-home")
    cli_config = home / "terraform.rc"
    cli_config.write_text(
        'provider_installation {\n'
        f'  dev_overrides {{ "spate/spate" = "{plugins}" }}\n'
        '  direct {}\n'
        '}\n')
    workdir = tmp_path_factory.mktemp("tf-work")
    env = {**os.environ, "TF_CLI_CONFIG_FILE": str(cli_config), "HOME": str(home),
           "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1",
           "SPATE_API_URL": serve.url, "SPATE_API_KEY": serve.admin_key}
    env.pop("TF_LOG", None)
    return Terraform(workdir, env)
