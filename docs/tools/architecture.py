"""Draw Spate's architecture picture: ``docs/images/architecture.svg``.

Run from the repository root after changing what the picture shows:

    python docs/tools/architecture.py            # rewrites docs/images/architecture.svg
    python docs/tools/architecture.py out.png    # any other path and format, to look at it

The drawing is data (the boxes and arrows below) handed to matplotlib, a
development dependency; the SVG keeps its text as text and carries no date,
so regenerating it with the same matplotlib gives the same file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUTPUT = Path(__file__).resolve().parents[1] / "images" / "architecture.svg"
WIDTH, HEIGHT = 100.0, 58.0  # drawing units; the figure keeps this aspect ratio

CONTROL = "#e8f0fb"   # control plane
DATA = "#eaf6ec"      # data plane
CLIENT = "#fdf3e1"    # what a tenant runs
STORE = "#f3ecf8"     # storage
EDGE = "#44546a"


@dataclass(frozen=True)
class Box:
    """One labelled box: lower-left corner, size, title and an optional second line."""

    x: float
    y: float
    w: float
    h: float
    title: str
    detail: str = ""
    colour: str = "white"

    def anchor(self, side: str) -> tuple[float, float]:
        """The middle of one side: "left", "right", "top" or "bottom"."""
        middle_x, middle_y = self.x + self.w / 2, self.y + self.h / 2
        return {"left": (self.x, middle_y), "right": (self.x + self.w, middle_y),
                "top": (middle_x, self.y + self.h), "bottom": (middle_x, self.y)}[side]


@dataclass(frozen=True)
class Group:
    """A shaded region holding boxes, its name in its top-left corner."""

    x: float
    y: float
    w: float
    h: float
    title: str
    colour: str


GROUPS = (
    Group(1, 1, 44, 40, "control plane", CONTROL),
    Group(52, 1, 47, 40, "data plane", DATA),
)

CONSOLE = Box(2, 46, 13, 9, "web console", "browser, served at /", CLIENT)
CLI = Box(17, 46, 13, 9, "spate CLI", "pipelines, keys", CLIENT)
REST = Box(32, 46, 13, 9, "REST clients", "/api/v1, OpenAPI", CLIENT)
RUN = Box(63.5, 46, 24, 9, "spate run FILE.sql", "one process, no services", CLIENT)
API = Box(3, 22, 18, 14, "API (FastAPI)", "keys, roles, tenancy,\nplans SQL before storing")
DATABASE = Box(3, 4, 18, 11, "control database", "PostgreSQL or SQLite:\npipelines, jobs, keys",
               STORE)
SCHEDULER = Box(25, 22, 18, 14, "scheduler",
                "Celery workers: start, stop,\nrestart, rescale, reconcile")
BROKER = Box(25, 4, 18, 11, "Redis", "Celery broker,\nrate limits", STORE)
JOB = Box(54, 20, 43, 18, "", "", "white")
SOURCES = Box(55.5, 22, 8, 8, "sources", "offsets", "white")
NATIVE = Box(65.5, 22, 10, 8, "[spark]", "stateless SQL,\npanes", "white")
OPERATORS = Box(77.5, 22, 9, 8, "[spate]", "operators\nper epoch", "white")
SINKS = Box(88.5, 22, 7, 8, "sinks", "commit\nmarkers", "white")
STATE = Box(67, 4, 30, 11, "state store", "epoch-versioned key-value: SQLite,\n"
            "PostgreSQL or FoundationDB;\na cache in every process", STORE)

JOB_CAPTION = ("job: one Spark Structured Streaming query, each micro-batch an epoch;\n"
               "under the service, in its tenant's sandbox (bubblewrap, cgroups)")

BOXES = (CONSOLE, CLI, REST, RUN, API, DATABASE, SCHEDULER, BROKER, JOB, SOURCES, NATIVE,
         OPERATORS, SINKS, STATE)

#: (from box, side, to box, side, label, both ways); a label sits right of a vertical
#: arrow and above a horizontal one.
ARROWS = (
    (CONSOLE, "bottom", API, "top", "", False),
    (CLI, "bottom", API, "top", "", False),
    (REST, "bottom", API, "top", "HTTP, Bearer API key", False),
    (API, "bottom", DATABASE, "top", "desired state", True),
    (API, "right", SCHEDULER, "left", "poke", False),
    (SCHEDULER, "bottom", BROKER, "top", "tasks", True),
    (SCHEDULER, "right", JOB, "left", "start in the tenant's\nsandbox; events back", True),
    (RUN, "bottom", JOB, "top", "same engine, no sandbox", False),
    (SOURCES, "right", NATIVE, "left", "", False),
    (NATIVE, "right", OPERATORS, "left", "", False),
    (OPERATORS, "right", SINKS, "left", "", False),
    (OPERATORS, "bottom", STATE, "top", "read epoch N-1,\ncommit N", True),
)


def draw_group(axes: Axes, group: Group) -> None:
    axes.add_patch(FancyBboxPatch((group.x, group.y), group.w, group.h,
                                  boxstyle="round,pad=0,rounding_size=1.2",
                                  facecolor=group.colour, edgecolor="none"))
    axes.text(group.x + 1.2, group.y + group.h - 1.2, group.title, ha="left", va="top",
              fontsize=8.5, color=EDGE, style="italic")


def draw_box(axes: Axes, box: Box) -> None:
    axes.add_patch(FancyBboxPatch((box.x, box.y), box.w, box.h,
                                  boxstyle="round,pad=0,rounding_size=0.8",
                                  facecolor=box.colour, edgecolor=EDGE, linewidth=0.9))
    if box is JOB:
        axes.text(box.x + 1, box.y + box.h - 0.8, JOB_CAPTION, ha="left", va="top",
                  fontsize=7.5, color=EDGE, linespacing=1.3)
        return
    middle = box.x + box.w / 2
    if box.detail:
        axes.text(middle, box.y + box.h - 1.4, box.title, ha="center", va="top", fontsize=9,
                  weight="bold")
        axes.text(middle, box.y + box.h - 4.2, box.detail, ha="center", va="top", fontsize=7,
                  color="#333333", linespacing=1.3)
    else:
        axes.text(middle, box.y + box.h / 2, box.title, ha="center", va="center", fontsize=9,
                  weight="bold")


def draw_arrow(axes: Axes, start: tuple[float, float], end: tuple[float, float], label: str,
               both: bool) -> None:
    axes.add_patch(FancyArrowPatch(start, end, arrowstyle="<|-|>" if both else "-|>",
                                   mutation_scale=9, color=EDGE, linewidth=0.9,
                                   shrinkA=1, shrinkB=1))
    if not label:
        return
    x, y = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
    if start[1] == end[1]:  # horizontal
        axes.text(x, y + 0.8, label, ha="center", va="bottom", fontsize=6.5, color=EDGE,
                  linespacing=1.2)
    else:
        offset = 0.8 if start[0] == end[0] else 2.5  # clear of a slanted arrow
        axes.text(x + offset, y, label, ha="left", va="center", fontsize=6.5, color=EDGE,
                  linespacing=1.2)


def draw(path: Path) -> None:
    """Draw the picture into ``path`` (the format follows its suffix)."""
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "spate-architecture",
                         "font.family": "DejaVu Sans"})
    figure = plt.figure(figsize=(10, 10 * HEIGHT / WIDTH))
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, WIDTH)
    axes.set_ylim(0, HEIGHT)
    axes.set_axis_off()
    for group in GROUPS:
        draw_group(axes, group)
    for box in BOXES:
        draw_box(axes, box)
    for source, source_side, target, target_side, label, both in ARROWS:
        draw_arrow(axes, source.anchor(source_side), target.anchor(target_side), label, both)
    metadata = {"Date": None} if path.suffix == ".svg" else {}
    figure.savefig(path, metadata=metadata, dpi=150)
    plt.close(figure)


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else OUTPUT
    path.parent.mkdir(parents=True, exist_ok=True)
    draw(path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
