"""Fixtures of the console's browser tests: one headless Chromium per module (its start
is a second or two), and a fresh browser context (its own session storage, so its own
sign-in) per test.

Playwright's sync API marks its asyncio loop as the main thread's running loop between
calls and leaves it marked after it exits: the fixture clears the mark, or every later
test on the same worker that calls ``asyncio.run`` (the NATS and RabbitMQ helpers do)
would fail (tests/suite.py names a test that leaves a loop marked)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.console.browser import CHROMIUM_ARGS, PageWatch, artifacts_dir, chromium_path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=executable,
                                                  args=CHROMIUM_ARGS)
            yield launched
            launched.close()
    finally:
        asyncio.events._set_running_loop(None)  # the low-level call event loops use


@pytest.fixture
def watch(browser: Browser, request: pytest.FixtureRequest) -> Iterator[PageWatch]:
    # en-US: the tests read numbers and money as the console writes them for that locale.
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield PageWatch(page, artifacts_dir(request.node.name))
    context.close()
