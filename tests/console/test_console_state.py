"""The console's SQL edit offers to keep a running pipeline's state only while the API
says the edited SQL can read it: real headless Chromium, a real ``spate serve``, a
real (cheap) windowed pipeline whose job has run."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.api.serving import ServedTenant, ServeProcess, new_tenant
from tests.conftest import SHARED_PLATFORM_KEY
from tests.console.browser import PageWatch, sign_in
from tests.console.test_console import TIMEOUT_MS, replace_sql

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

WINDOWED_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out
SELECT w.start AS second, k, n
FROM (SELECT TUMBLE(INTERVAL '5' SECOND) AS w, subtask_index AS k, count(*) AS n
      FROM ticks GROUP BY 1, 2);
"""
ADDED_COLUMN_SQL = WINDOWED_SQL.replace("SELECT w.start AS second, k, n",
                                        "SELECT w.start AS second, k, n, n * 2 AS twice")
WIDER_WINDOW_SQL = WINDOWED_SQL.replace("'5' SECOND", "'10' SECOND")


@pytest.fixture(scope="module")
def server(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "console-state")
    yield tenant
    tenant.close()


def offered(page: Page) -> list[str]:
    """The after-saving choices the edit form lets the user pick."""
    return [str(choice.get_attribute("value")) for choice in
            page.locator("input[name=after_save]:enabled").all()]


def wait_running(server: ServedTenant, name: str) -> None:
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        job = server.http.get(f"/pipelines/{name}").json()["job"]
        if job and job["state"] == "running":
            return
        assert not job or job["state"] not in ("failed", "stopped"), job
        time.sleep(1)
    raise AssertionError(f"pipeline {name} did not start")


def test_keeping_state_is_offered_only_when_the_new_sql_can_read_it(
        server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    name = f"windows-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": name, "sql": WINDOWED_SQL})
    assert created.status_code == 201, created.text
    wait_running(server, name)
    sign_in(page, server)
    page.goto(f"{server.url}/pipelines/{name}")
    page.get_by_role("button", name="Edit SQL").click()
    edit = page.locator("form[aria-labelledby=edit-title]")
    state = edit.get_by_label("State", exact=True)

    # An added output column keeps the window's state: every choice is offered.
    replace_sql(page, ADDED_COLUMN_SQL)
    expect(state).to_contain_text("The new SQL can keep the state of version 1.")
    assert offered(page) == ["restart", "restart-empty", "none"]
    expect(page.get_by_label("Restart now, keeping state")).to_be_checked()

    # A wider window cannot read it: keeping state is not offered, and the form says why.
    replace_sql(page, WIDER_WINDOW_SQL)
    expect(page.get_by_label("Restart now, keeping state")).to_be_disabled()
    assert offered(page) == ["restart-empty", "none"]
    expect(page.get_by_label("Restart now from empty state")).to_be_checked()
    expect(state).to_contain_text("Keeping state is not offered: the new SQL cannot read the "
                                  "state of version 1.")
    expect(state.locator("li[data-operator=q0_window]")).to_have_text(
        "TUMBLE 10 s by k: count(*) AS n (q0_window): its window changed: TUMBLE 5 s → TUMBLE 10 s")
    watch.rendered("pipeline-edit-state")
    watch.document("edit-state")

    # Back to SQL that can keep it: offered again.
    replace_sql(page, ADDED_COLUMN_SQL)
    expect(page.get_by_label("Restart now, keeping state")).to_be_enabled()
    replace_sql(page, WIDER_WINDOW_SQL)
    expect(page.get_by_label("Restart now, keeping state")).to_be_disabled()

    page.get_by_role("button", name="Save as version 2").click()
    expect(page.get_by_role("status").filter(has_text="Version 2 saved")).to_contain_text(
        "restart requested from empty state")
    pipeline = server.http.get(f"/pipelines/{name}").json()
    assert pipeline["version"] == 2 and pipeline["restart_generation"] == 1
    assert server.http.delete(f"/pipelines/{name}", params={"force": "true"}).status_code == 204
