"""Headless Chromium for the console's end-to-end tests: launch, sign in, watch,
screenshot.

The browser is Debian's ``chromium`` (``.ci/run`` installs it), driven by
Playwright over CDP; Playwright's own browser downloads are never used.

Screenshots go to ``test-artifacts/console/<test>/``. The pictures in
``docs/console.md`` are taken by the same tests: with ``SPATE_CONSOLE_DOCS_IMAGES=1``
a test also writes the views it documents to ``docs/images/console-<name>.png``::

    SPATE_CONSOLE_DOCS_IMAGES=1 python -m pytest -q tests/console/test_console_billing.py
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Error, Locator, Page, expect

from tests.api.serving import ServedTenant

REPO = Path(__file__).resolve().parents[2]
DOCS_IMAGES = REPO / "docs" / "images"
#: The size of the docs' pictures of the console.
DOCS_VIEWPORT = {"width": 1280, "height": 1040}
#: Answers the console asks for and handles, which Chromium logs as errors all the
#: same: GET /budget is 404 while no budget is set, and the banner asks on every page.
EXPECTED_FAILED_LOADS = ((404, "/api/v1/budget"),)

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium_path() -> str:
    """Debian's chromium; a skip (a failure in CI, where it must run) when it is absent."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists()
                                          else None)
    if found:
        return found
    reason = "Debian's chromium is not installed: apt-get install -y chromium (.ci/run does)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class PageWatch:
    """A page's console errors and uncaught exceptions, and its screenshots."""

    page: Page
    artifacts: Path
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("console", self._console)
        self.page.on("pageerror", self._page_error)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and not _expected(message):
            self.problems.append(f"console error: {message.text} ({message.location})")

    def _page_error(self, error: Error) -> None:
        self.problems.append(f"page error: {error.message}")

    def rendered(self, name: str) -> Path:
        """Screenshot the page as ``name``.png; fail on any console error so far."""
        path = self.artifacts / f"{name}.png"
        self.page.screenshot(path=path, full_page=True)
        assert not self.problems, f"{name}: {self.problems}"
        return path

    def document(self, name: str, start: Locator | None = None) -> Path | None:
        """With ``SPATE_CONSOLE_DOCS_IMAGES=1``, the page as docs/images/console-``name``.png
        (the docs' size, what is in view: from the top, or from ``start``); otherwise
        nothing."""
        if os.environ.get("SPATE_CONSOLE_DOCS_IMAGES") != "1":
            return None
        size = self.page.viewport_size
        self.page.set_viewport_size(DOCS_VIEWPORT)
        if start is None:
            self.page.evaluate("window.scrollTo(0, 0)")
        else:
            start.evaluate("el => el.scrollIntoView({block: 'start'})")
        path = DOCS_IMAGES / f"console-{name}.png"
        self.page.screenshot(path=path)
        if size:
            self.page.set_viewport_size(size)
        return path


def _expected(message: ConsoleMessage) -> bool:
    """A failed load the console expects (see EXPECTED_FAILED_LOADS)."""
    url = str(message.location.get("url", ""))
    return message.text.startswith("Failed to load resource") and any(
        f"status of {status}" in message.text and url.split("?")[0].endswith(path)
        for status, path in EXPECTED_FAILED_LOADS)


def sign_in(page: Page, server: ServedTenant, key: str | None = None) -> None:
    """Sign in on the sign-in page with ``key`` (the server's admin key by default)."""
    page.goto(server.url + "/")
    expect(page).to_have_url(re.compile(r"/sign-in"))
    page.get_by_label("API key").fill(key or server.admin_key)
    page.get_by_label("API key").press("Enter")  # Enter submits the form
    expect(page).to_have_url(re.compile(r"/pipelines$"))
    expect(page.get_by_test_id("tenant")).to_have_text(server.name)


def artifacts_dir(name: str) -> Path:
    """Where screenshots go: ``test-artifacts/console/<name>`` (git-ignored) in the repo."""
    safe = re.sub(r"[^\w.-]+", "-", name).strip("-")
    path = REPO / "test-artifacts" / "console" / safe
    path.mkdir(parents=True, exist_ok=True)
    return path


#: Controls that must each have an accessible name (label, aria-label or aria-labelledby).
UNLABELLED_CONTROLS_JS = """
() => [...document.querySelectorAll('input, select, textarea, [contenteditable="true"], button')]
  .filter((el) => el.offsetParent !== null || el.getClientRects().length > 0)
  .filter((el) => {
    if (el.tagName === 'BUTTON') return !(el.getAttribute('aria-label') || el.textContent.trim());
    const named = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')
      || (el.labels && el.labels.length > 0);
    return !named;
  })
  .map((el) => el.outerHTML.slice(0, 120))
"""

#: The focused element's description and whether its focus ring shows.
FOCUSED_JS = """
() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const editor = el.closest('.editor');
  const ring = style.outlineStyle !== 'none' && style.outlineWidth !== '0px'
    || (editor && getComputedStyle(editor).outlineStyle !== 'none');
  const name = el.getAttribute('aria-label') || (el.labels && el.labels[0]?.textContent)
    || el.textContent.trim().slice(0, 40);
  return {tag: el.tagName.toLowerCase(), name, ring};
}
"""
