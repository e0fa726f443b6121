"""Generate the option tables of the connector docs from the connectors' declarations.

    python docs/tools/connectors.py            # rewrite the tables in place
    python docs/tools/connectors.py --check    # exit 1 when a table is stale

A table's place in a page is marked by a pair of comments, and everything
between them is generated::

    <!-- options: mqtt -->
    …
    <!-- /options -->

``mqtt`` names a connector: its table lists the options it declares itself
(:mod:`spate.engine.connectors.core.metadata`), then a line naming the shared groups it
also takes (format options, source time options), each documented once under its
own marker: ``format``, ``binary-format``, ``source-time`` or ``lookup``.

``tests/docs/test_connector_options.py`` fails when a committed table differs from
what this generates, or when a connector's options have no table.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.core.base import LOOKUP, SINK, SOURCE
from spate.engine.connectors.core.metadata import (
    DEAD_LETTER,
    FORMAT,
    FORMAT_BINARY,
    FORMAT_SOURCE,
    LOOKUP_TABLE,
    SOURCE_TIME,
    TYPE,
    OptionSpec,
)

ROOT = Path(__file__).resolve().parents[2]
#: The pages holding generated tables, relative to the repository root.
PAGES = ("docs/sql/connectors.md", "docs/sql/ddl.md")
#: Connectors whose options are the planner's own, documented elsewhere.
UNDOCUMENTED = frozenset({"preview"})

_MARKER = re.compile(r"(<!-- options: ([\w-]+) -->\n)(.*?)(<!-- /options -->)", re.DOTALL)


@dataclass(frozen=True)
class Group:
    """Options several connectors take, documented once."""

    title: str
    #: where its table is, as a link from ``docs/sql/connectors.md``
    link: str
    specs: tuple[OptionSpec, ...]


#: The shared groups by marker name, in the order a connector's table names them.
GROUPS = {
    "format": Group("format options", "#formats", (*FORMAT, *FORMAT_SOURCE, *DEAD_LETTER)),
    "binary-format": Group("avro and protobuf options", "#formats", FORMAT_BINARY),
    "source-time": Group("event time options", "ddl.md#with-options", SOURCE_TIME),
    "lookup": Group("lookup table options", "#lookup-connectors", LOOKUP_TABLE),
}
#: Shared options a connector's table leaves out without naming a group for them.
_SILENT = frozenset(TYPE)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _roles(spec: OptionSpec, connector_roles: frozenset[str]) -> str:
    if spec.roles >= connector_roles or len(connector_roles) == 1:
        return ""
    names = {SOURCE: "sources", SINK: "sinks", LOOKUP: "lookup tables"}
    return " and ".join(names[role] for role in sorted(spec.roles)) + ": "


def _required(spec: OptionSpec) -> str:
    if spec.required:
        return "yes"
    return spec.required_when or "no"


def _default(spec: OptionSpec) -> str:
    shown = spec.shown_default
    if not shown or spec.default_text:
        return shown
    return f"`{shown}`"


def _rows(specs: Iterable[OptionSpec], connector_roles: frozenset[str]) -> list[str]:
    rows = ["| option | required | default | meaning |", "|---|---|---|---|"]
    for spec in specs:
        secret = " (a secret: stored encrypted, never shown)" if spec.secret else ""
        rows.append(f"| `{spec.name}` | {_required(spec)} | {_cell(_default(spec))} | "
                    f"{_cell(_roles(spec, connector_roles) + spec.description + secret)} |")
    return rows


def group_table(name: str) -> str:
    """The table of a shared group."""
    group = GROUPS[name]
    roles = frozenset().union(*(spec.roles for spec in group.specs))
    return "\n".join(_rows(group.specs, roles)) + "\n"


def _member(spec: OptionSpec, specs: Iterable[OptionSpec]) -> bool:
    """Whether ``spec`` is one of ``specs`` as declared there, whatever tables take it (a
    connector may give a shared option to more of its roles)."""
    return any(spec.for_roles(member.roles) == member for member in specs)


def _shared(spec: OptionSpec) -> str | None:
    """The group ``spec`` is a member of, as declared there (None: the connector's own)."""
    for name, group in GROUPS.items():
        if _member(spec, group.specs):
            return name
    return "" if _member(spec, _SILENT) else None


def connector_table(name: str) -> str:
    """The table of one connector's own options, and the groups it takes besides."""
    connector = CONNECTORS[name]
    own = [spec for spec in connector.options if _shared(spec) is None]
    groups = [group for group in GROUPS if any(_shared(spec) == group
                                                for spec in connector.options)]
    lines = _rows(own, connector.roles) if own else ["No options of its own."]
    if groups:
        links = ", ".join(f"[{GROUPS[group].title}]({GROUPS[group].link})" for group in groups)
        lines += ["", f"Also: {links}."]
    return "\n".join(lines) + "\n"


def table(marker: str) -> str:
    """What goes between the markers named ``marker``."""
    return group_table(marker) if marker in GROUPS else connector_table(marker)


def generated(text: str) -> str:
    """``text`` with every marked table generated afresh."""
    def fill(match: re.Match[str]) -> str:
        return match.group(1) + table(match.group(2)) + match.group(4)
    return _MARKER.sub(fill, text)


def markers(text: str) -> list[str]:
    """The names of the tables marked in ``text``."""
    return [match.group(2) for match in _MARKER.finditer(text)]


def stale_pages(root: Path = ROOT) -> list[str]:
    """The pages whose generated tables differ from what the declarations say."""
    return [page for page in PAGES
            if generated((root / page).read_text(encoding="utf-8"))
            != (root / page).read_text(encoding="utf-8")]


def main(argv: Sequence[str]) -> int:
    if "--check" in argv:
        stale = stale_pages()
        for page in stale:
            print(f"{page} is stale: run python docs/tools/connectors.py", file=sys.stderr)
        return 1 if stale else 0
    for page in PAGES:
        path = ROOT / page
        path.write_text(generated(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
