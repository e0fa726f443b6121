"""Every pipeline in examples/ plans: the files the documentation names are real
pipelines. What the pages show ``spate run`` printing for them is what it prints:
the quick start's rows (a Spark run, with none of the test tooling importable, as
after the README's ``pip install -e .``) and ``--explain``'s plans; and CI runs the
README's test command."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from spate.engine.explain import explain_plan
from spate.engine.planner import plan_pipeline

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.sql"))


def test_the_examples_folder_holds_the_documented_examples() -> None:
    names = {path.name for path in EXAMPLES}
    assert {"quickstart.sql", "hot_auctions.sql", "clicks.sql"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_the_example_plans_as_a_pipeline_that_runs_on_its_own(example: Path) -> None:
    # No environment variables and no previews: as `spate run` or a server's job plans it.
    plan = plan_pipeline(example.read_text(), {}, previews=False)
    assert plan.queries, f"{example.name} has no query"
    for query in plan.queries:
        assert query.sink in plan.tables, f"{example.name}: query {query.index} writes nowhere"
    assert plan.sources, f"{example.name} reads no source"


def fenced_text(page: Path, first_line: str) -> list[str]:
    """The lines of the fenced block of ``page`` whose first line is ``first_line``
    (without that line)."""
    blocks = re.findall(r"^```\w*\n(.*?)^```", page.read_text(encoding="utf-8"),
                        re.MULTILINE | re.DOTALL)
    found = [block.splitlines()[1:] for block in blocks if block.startswith(first_line + "\n")]
    assert len(found) == 1, f"{page.name}: one block should start with {first_line!r}"
    return found[0]


def quick_start_output() -> tuple[list[list[str]], str]:
    """What the README's quick start shows ``spate run`` printing: its JSON lines, in
    runs of consecutive lines (a ``…`` line between two runs), and the ``finished:`` line."""
    shown = fenced_text(ROOT / "README.md", "Obtaining file:///…")
    runs: list[list[str]] = [[]]
    for line in shown:
        if line == "…" and runs[-1]:
            runs.append([])
        elif line.startswith("{"):
            runs[-1].append(line)
    finished = [line for line in shown if line.startswith("finished: ")]
    assert len(finished) == 1 and runs[0], "the README's quick start shows no output"
    return runs, finished[0]


@pytest.mark.parametrize(("page", "example"), [("README.md", "quickstart.sql"),
                                               ("docs/running.md", "clicks.sql")])
def test_the_explain_a_page_shows_is_what_spate_run_prints(page: str, example: str) -> None:
    shown = fenced_text(ROOT / page, f"$ spate run --explain examples/{example}")
    plan = plan_pipeline((ROOT / "examples" / example).read_text(), check_inputs=False)
    assert shown == explain_plan(plan).splitlines()


#: A ``sitecustomize`` for the quick start's processes (the driver and Spark's Python
#: workers, which inherit PYTHONPATH): a module of a distribution only the ``dev`` extras
#: install cannot be imported, as after the README's ``pip install -e .``.
_NO_DEV_IMPORTS = """
import sys
from importlib.machinery import ModuleSpec

DEV_ONLY = {modules!r}


class DevOnlyModules:
    # Found (libraries probe for optional packages with find_spec), but not importable.
    def find_spec(self, name, path=None, target=None):
        return ModuleSpec(name, self) if name.partition(".")[0] in DEV_ONLY else None

    def create_module(self, spec):
        raise ModuleNotFoundError(f"{{spec.name}} is installed by Spate's dev extras only",
                                  name=spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, DevOnlyModules())
"""


def dev_only_modules() -> set[str]:
    """The top-level modules of the distributions Spate's ``dev`` extras add."""
    dev = set()
    for text in importlib.metadata.requires("spate") or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is not None and marker.evaluate({"extra": "dev"}) \
                and not marker.evaluate({"extra": ""}):
            dev.add(canonicalize_name(requirement.name))
    return {module for module, dists in importlib.metadata.packages_distributions().items()
            if all(canonicalize_name(dist) in dev for dist in dists)}


def test_the_dev_only_modules_are_found() -> None:
    # The quick start's guard below is only as good as this list.
    assert {"pytest", "duckdb", "hypothesis", "moto", "playwright"} <= dev_only_modules()


@pytest.mark.spark
def test_the_quick_start_prints_what_the_readme_shows(tmp_path: Path) -> None:
    runs, finished = quick_start_output()
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(
        _NO_DEV_IMPORTS.format(modules=sorted(dev_only_modules())))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(guard), *filter(None, [os.environ.get("PYTHONPATH")])])}
    result = subprocess.run(
        [sys.executable, "-m", "spate.api.cli", "run", str(ROOT / "examples" / "quickstart.sql")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout.splitlines()
    assert printed[:len(runs[0])] == runs[0], "the first lines differ from the README's"
    assert printed[-len(runs[-1]):] == runs[-1], "the last lines differ from the README's"
    position = 0
    for line in (line for run in runs for line in run):  # every line shown, in order
        assert line in printed[position:], f"{line} is not printed (in this order)"
        position = printed.index(line, position) + 1
    assert result.stderr.strip().splitlines()[-1] == finished


def test_ci_runs_the_readmes_test_command() -> None:
    blocks = re.findall(r"^```sh\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"),
                        re.MULTILINE | re.DOTALL)
    quick_start, tests = (block.strip() for block in blocks[:2])
    assert quick_start == "pip install -e . && spate run examples/quickstart.sql"
    # As CI writes it: the interpreter by name, pip quiet.
    as_ci_runs_it = tests.replace("pip install", "python3 -m pip install -q").replace(
        "python -m", "python3 -m")
    assert as_ci_runs_it in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
