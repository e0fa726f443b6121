"""The documentation stands alone: every relative link resolves to a file of this
repository (and a ``#fragment`` to a heading of it), no page points outside the
repository or at a machine's paths, and every example a page names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted({ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "CONTRIBUTING.md",
                *(ROOT / "docs").rglob("*.md")})

_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]"  # [text], brackets nested once
                          r"\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # (target "title")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""")
_EXAMPLE = re.compile(r"\bexamples/[\w./-]+\.sql\b")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
#: A folder of the machine a page was written on: a checkout, a home, a temporary
#: folder (Linux's and macOS's). ``/tmp`` alone (a sandbox's private folder) is fine.
_MACHINE_PATH = re.compile(r"(?<![\w.])(?:/(?:work|root|home|tmp|Users|mnt|private|var/folders)"
                           r"|[A-Z]:\\Users)[/\\]\w")


def _prose(text: str) -> str:
    """The page without code blocks and code spans (where link syntax means nothing)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    prose = _prose(text)
    return [*_INLINE_LINK.findall(prose), *_REFERENCE.findall(prose), *_HTML.findall(prose)]


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set(_HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """What is wrong with each link of ``page``, one message per bad link."""
    problems = []
    for target in links(page.read_text(encoding="utf-8")):
        if _SCHEME.match(target):
            if target.lower().startswith("file:"):
                problems.append(f"{target}: a file on some machine, not in the repository")
            continue  # a web address
        path_part, _, fragment = target.partition("#")
        if path_part.startswith("/"):
            problems.append(f"{target}: an absolute path; link relative to the page")
            continue
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.is_relative_to(ROOT):
            problems.append(f"{target}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file ({resolved.relative_to(ROOT)})")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            problems.append(f"{target}: no heading #{fragment} in {resolved.relative_to(ROOT)}")
    return problems


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=[_name(page) for page in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    problems = broken_links(page)
    assert not problems, f"{_name(page)} has broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=[_name(page) for page in PAGES])
def test_every_example_the_page_names_exists(page: Path) -> None:
    named = set(_EXAMPLE.findall(page.read_text(encoding="utf-8")))
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert not missing, f"{_name(page)} names examples that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[_name(page) for page in PAGES])
def test_nothing_points_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text and "shared/SQL.md" not in text
    found = _MACHINE_PATH.search(text)
    assert not found, f"a path of some machine: {text[found.start():].split()[0]}"


def test_the_checker_finds_what_it_should() -> None:
    """The patterns catch the link forms the pages use (else the tests above pass vacuously)."""
    text = ("See [a](docs/x.md#part), ![b](img/p.svg), [`c`](../up.md), <img src=\"i.png\">\n"
            "[ref]: other.md\n`[not](a-link.md)`\n```\n[nor](this.md)\n```\n")
    assert links(text) == ["docs/x.md#part", "img/p.svg", "../up.md", "other.md", "i.png"]
    assert slug("Choices where the dialect is silent") == "choices-where-the-dialect-is-silent"
    assert slug("`spate run`") == "spate-run"
    readme = ROOT / "README.md"
    assert len(links(readme.read_text(encoding="utf-8"))) > 10
    assert "quick-start" in anchors(readme)
    machine = ["/tmp/clidocs/.spate/admin.key", "/home/ann/spate", "/work/main/README.md",
               "/Users/ann/x", "/var/folders/xy/T/a", "C:\\Users\\ann\\x"]
    assert all(_MACHINE_PATH.search(f"see {path} here") for path in machine)
    neutral = [".spate/admin.key", "HOME=/tmp,", "a private `/tmp`;", "/opt/spate",
               "path = '/etc/passwd'", "examples/tmp/x.sql", "`/root`"]
    assert not any(_MACHINE_PATH.search(text) for text in neutral)
