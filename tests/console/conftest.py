"""Fixtures of the console's browser tests: one headless Chromium for the package (the
console modules are one xdist group, ``serve``, so they run one after the other on one
worker and share it), and a fresh browser context (its own session storage, so its own
sign-in) per test.

Package scope, not session: Playwright's sync API keeps an asyncio loop running on the
main thread while it is open, and a later test on the same worker that calls
``asyncio.run`` (the NATS and RabbitMQ helpers do) would fail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.console.browser import CHROMIUM_ARGS, PageWatch, artifacts_dir, chromium_path


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def watch(browser: Browser, request: pytest.FixtureRequest) -> Iterator[PageWatch]:
    # en-US: the tests read numbers and money as the console writes them for that locale.
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield PageWatch(page, artifacts_dir(request.node.name))
    context.close()
