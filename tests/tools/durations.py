"""Where a test run's time goes, read from its JUnit report.

Run the suite with a report, then read it::

    python -m pytest --junitxml=test-artifacts/junit.xml
    python tests/tools/durations.py test-artifacts/junit.xml --top 15

It prints the slowest modules (every phase of every test in them), the slowest
fixtures (their set-up time, summed over every time they were set up), and the
slowest single tests. The fixtures' figures are properties
``tests/conftest.py`` records on each test; a report written without them
still gives the modules and the tests.

With ``--markdown`` the modules' table is printed as Markdown, the form
CONTRIBUTING.md shows.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: The property ``tests/conftest.py`` records per fixture set up (see ``pytest_fixture_setup``).
FIXTURE_PREFIX = "fixture_s:"


@dataclass
class Case:
    """One test of the report."""

    module: str
    name: str
    seconds: float
    outcome: str
    fixtures: dict[str, float] = field(default_factory=dict)


def read_cases(report: Path) -> list[Case]:
    """Every test case of a JUnit XML report."""
    root = ElementTree.parse(report).getroot()
    return [_case(element) for element in root.iter("testcase")]


def _case(element: ElementTree.Element) -> Case:
    outcome = "passed"
    for tag in ("failure", "error", "skipped"):
        if element.find(tag) is not None:
            outcome = tag
    case = Case(module=_module_of(element.get("classname", "")),
                name=element.get("name", ""), seconds=float(element.get("time") or 0.0),
                outcome=outcome)
    for prop in element.iter("property"):
        name = prop.get("name", "")
        if name.startswith(FIXTURE_PREFIX):
            key = name.removeprefix(FIXTURE_PREFIX)
            case.fixtures[key] = case.fixtures.get(key, 0.0) + float(prop.get("value") or 0)
    return case


def _module_of(classname: str) -> str:
    """``tests.api.test_jobs.TestX`` → ``tests/api/test_jobs.py``."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py" if parts else classname


def by_module(cases: Iterable[Case]) -> list[tuple[str, float, int]]:
    """(module, seconds, tests), slowest first."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        seconds[case.module] += case.seconds
        counts[case.module] += 1
    return sorted(((m, s, counts[m]) for m, s in seconds.items()), key=lambda r: -r[1])


def by_fixture(cases: Iterable[Case]) -> list[tuple[str, float, int]]:
    """(fixture, seconds of set-up, times set up), slowest first."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        for name, spent in case.fixtures.items():
            seconds[name] += spent
            counts[name] += 1
    return sorted(((f, s, counts[f]) for f, s in seconds.items()), key=lambda r: -r[1])


def _table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]],
           markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def summary(cases: list[Case], top: int, markdown: bool = False) -> str:
    """The report's slowest modules, fixtures and tests as text."""
    total = sum(c.seconds for c in cases)
    parts = [f"{len(cases)} tests, {total / 60:.1f} min of test time "
             f"({sum(c.outcome == 'skipped' for c in cases)} skipped)"]
    modules = [(m, f"{s:.1f}", str(n)) for m, s, n in by_module(cases)[:top]]
    parts.append(_table("slowest modules", ("module", "seconds", "tests"), modules, markdown))
    if markdown:
        return "\n\n".join(parts)
    fixtures = [(f, f"{s:.1f}", str(n)) for f, s, n in by_fixture(cases)[:top]]
    if fixtures:
        parts.append(_table("slowest fixtures (set-up)", ("fixture", "seconds", "set up"),
                            fixtures, markdown))
    slowest = sorted(cases, key=lambda c: -c.seconds)[:top]
    parts.append(_table("slowest tests", ("test", "seconds"),
                        [(f"{c.module}::{c.name}", f"{c.seconds:.1f}") for c in slowest],
                        markdown))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a JUnit XML report of a pytest run")
    parser.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    parser.add_argument("--markdown", action="store_true",
                        help="the modules' table as Markdown")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        parser.error(f"no report at {args.report}: run pytest with --junitxml={args.report}")
    sys.stdout.write(summary(read_cases(args.report), args.top, args.markdown) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
