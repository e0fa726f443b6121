"""The recovery times the scenarios measure: printed as they are measured, and as a
table at the end of the suite (``docs/faults.md`` records a run's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """A measured recovery of one scenario."""

    fault: str
    what: str
    seconds: float


#: Every figure the run measured, printed as a table at the end of the suite.
FIGURES: list[Figure] = []


def record(fault: str, what: str, seconds: float) -> float:
    """Keep and print a measured figure."""
    FIGURES.append(Figure(fault, what, seconds))
    print(f"[faults] {fault}: {what}: recovery {seconds:.1f} s")
    return seconds


def figures_table() -> str:
    lines = ["| fault | measured | seconds |", "|---|---|---:|"]
    lines += [f"| {f.fault} | {f.what} | {f.seconds:.1f} |" for f in FIGURES]
    return "\n".join(lines)
