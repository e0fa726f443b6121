"""The SQL reference (``docs/sql/*.md``) holds only SQL that behaves as it says.

Every fenced ``sql`` block of the reference is a complete pipeline:

- it is planned, and must plan, unless it has a line
  ``-- error: [LINE:COLUMN: ]message``: then planning must fail with a
  PlanningError whose message contains ``message``, at LINE:COLUMN of the
  block when they are given;
- it is planned as ``spate run`` plans it: ``{{ NAME }}`` references read
  the environment, where ``env:NAME=value`` words after ``sql`` in the
  fence's info string (which Markdown does not show) set variables;
- a block whose next fenced block is ```` ```json output ```` runs on Spark
  over the files of ``docs/sql/examples/``, its sinks printing what
  ``spate run`` prints, and must print exactly the rows of that block (in
  any order).  Keep these few: each costs a Spark run.

Every ``docs/sql/examples/`` file the pages name must exist, and every example
file must be read by a block that runs.  (Links between the pages are checked
with the rest of the documentation's, by ``test_links.py``.)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.engine.connectors.builtin.sinks import StdoutSink
from spate.engine.connectors.formats.records import JSON, FormatSpec
from spate.engine.planner import PREVIEW_SINK, PipelinePlan, PlanningError, plan_pipeline
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.statestore import open_store

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "sql"
EXAMPLES = REFERENCE / "examples"
PAGES = sorted(REFERENCE.glob("*.md"))

_ERROR = re.compile(r"^--\s*error:\s*(?:(\d+):(\d+):\s*)?(.+?)\s*$", re.MULTILINE)
_EXAMPLE_PATH = re.compile(r"docs/sql/examples/[\w.-]+")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    info: tuple[str, ...]  # the info string's words: language first
    text: str
    #: the next fenced block of the page, if any
    following: Block | None = None

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def variables(self) -> dict[str, str]:
        pairs = (word.removeprefix("env:").split("=", 1) for word in self.info
                 if word.startswith("env:"))
        return {name: value for name, value in pairs}

    @property
    def output(self) -> list[dict[str, Any]] | None:
        """The rows this block's run must print, when it runs."""
        after = self.following
        if after is None or after.info != ("json", "output"):
            return None
        return [json.loads(line) for line in after.text.splitlines() if line.strip()]


def fenced_blocks(page: Path) -> list[Block]:
    blocks: list[Block] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].startswith("```"):
            opening = index
            info = tuple(lines[index][3:].split())
            index += 1
            while not lines[index].startswith("```"):
                index += 1
            blocks.append(Block(page, opening + 1, info, "\n".join(lines[opening + 1:index])))
        index += 1
    return [Block(b.page, b.line, b.info, b.text, blocks[i + 1] if i + 1 < len(blocks) else None)
            for i, b in enumerate(blocks)]


SQL_BLOCKS = [b for page in PAGES for b in fenced_blocks(page) if b.info[:1] == ("sql",)]
RUNS = [b for b in SQL_BLOCKS if b.output is not None]


def test_the_reference_has_examples_and_few_of_them_run() -> None:
    assert len(PAGES) >= 8 and len(SQL_BLOCKS) >= 40
    assert 1 <= len(RUNS) <= 3  # each one is a Spark run of the test suite


def _plan(block: Block, monkeypatch: pytest.MonkeyPatch, check_inputs: bool = False
          ) -> PipelinePlan:
    for name, value in block.variables.items():
        monkeypatch.setenv(name, value)
    return plan_pipeline(block.text, check_inputs=check_inputs)


@pytest.mark.parametrize("block", SQL_BLOCKS, ids=[b.id for b in SQL_BLOCKS])
def test_example_plans_or_fails_as_shown(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _ERROR.search(block.text)
    if expected is None:
        assert _plan(block, monkeypatch).queries
        return
    line, column, message = expected.groups()
    with pytest.raises(PlanningError) as caught:
        _plan(block, monkeypatch)
    assert message in caught.value.message
    if line is not None:
        assert (caught.value.line, caught.value.column) == (int(line), int(column)), \
            str(caught.value)


@pytest.mark.spark
@pytest.mark.parametrize("block", RUNS, ids=[b.id for b in RUNS])
def test_example_prints_the_rows_shown(block: Block, spark: SparkSession, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)  # the examples name their input files from the repository root
    plan = _plan(block, monkeypatch, check_inputs=True)
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    capsys.readouterr()
    try:
        # As `spate run` does: a bare SELECT's rows are printed as JSON lines.
        options = RunOptions(checkpoint_dir=str(tmp_path / "checkpoint"),
                             sink_overrides={PREVIEW_SINK: StdoutSink(FormatSpec(JSON))})
        runner = PipelineRunner(plan, spark, store.pipeline("docs", "example"), options)
        assert runner.run(), "the example's input is bounded: it must finish"
    finally:
        store.close()
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert _multiset(printed) == _multiset(block.output or [])


def _multiset(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(row, sort_keys=True) for row in rows)


def test_example_files_exist_and_each_is_read_by_a_run() -> None:
    named = {match for page in PAGES for match in _EXAMPLE_PATH.findall(page.read_text())}
    assert named, "the reference names its example files"
    missing = sorted(n for n in named if not (REPO / n).is_file())
    assert not missing
    files = {p.relative_to(REPO).as_posix() for p in EXAMPLES.iterdir() if p.is_file()}
    read_by_runs = {m for block in RUNS for m in _EXAMPLE_PATH.findall(block.text)}
    assert files == read_by_runs
