"""The ``spate`` client commands start without loading the server, Spark or the ORM.

Each check runs in a fresh interpreter, so nothing a test imported beforehand
can hide an import the command itself makes.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import click
import pytest

from spate.api.cli import COMMANDS

pytestmark = pytest.mark.e2e

#: Modules a client command must not load (prefixes of ``sys.modules`` names).
HEAVY = ("pyspark", "fastapi", "sqlalchemy", "spate.engine.runtime", "spate.api.http.app")

_RUN_AND_LIST_MODULES = textwrap.dedent("""
    import json, sys
    from spate.api.cli import main

    for args in json.loads(sys.argv[1]):
        try:
            main(args, prog_name="spate")
        except SystemExit:
            pass
    print("\\n" + json.dumps(sorted(sys.modules)))
""")


def loaded_modules(*commands: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The modules a fresh interpreter holds after running each of ``commands``."""
    result = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST_MODULES, json.dumps(commands)],
        env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120,
        check=False)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout.splitlines()[-1]))


def heavy_among(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_help_and_a_client_command_load_no_server_spark_or_orm() -> None:
    modules = loaded_modules(
        ["--help"], ["pipelines", "--help"], ["pipelines", "delete", "--help"],
        ["pipelines", "preview", "--help"], ["keys", "list", "--help"],
        # A client command all the way to its HTTP call (to a port nobody listens on).
        ["pipelines", "list"],
        env={"SPATE_SERVER": "http://127.0.0.1:9", "SPATE_API_KEY": "spate_x_y"})
    assert {"spate.api.cli.pipelines", "spate.api.cli.keys", "httpx"} <= set(modules)
    assert heavy_among(modules) == []


def test_spate_help_imports_no_command() -> None:
    modules = loaded_modules(["--help"])
    assert [m for m in modules if m.startswith("spate.") and m != "spate.api.cli"
            and m != "spate.api"] == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_its_commands_own(name: str) -> None:
    """``spate --help`` shows the summaries in spate.api.cli; they must not drift."""
    module_name, attribute = COMMANDS[name].target.split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(command, click.Command) and command.name == name
    assert COMMANDS[name].summary == command.get_short_help_str(limit=10_000)
