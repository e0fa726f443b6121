"""The console's UDF editor end to end: real headless Chromium against the session's real
``spate serve``.

A UDF is written in the browser, checked as it is typed by the API's own check (a
problem marked at its line in the file), saved, edited into version 2, and deleted —
first refused, naming the running pipeline that calls it, then done once that pipeline
is gone.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.serving import ServedTenant, ServeProcess, new_tenant
from tests.conftest import SHARED_PLATFORM_KEY
from tests.console.browser import PageWatch, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

RATIO = """from typing import Optional

from spate.engine.udf import udf


@udf
def ratio(a: int, b: Optional[int]) -> Optional[float]:
    return None if not b else a / b
"""
# Line 7's parameter has no type hint: the check says so there.
UNHINTED = RATIO.replace("def ratio(a: int,", "def ratio(a,")
RATIO_2 = RATIO.replace("a / b", "round(a / b, 3)")
CALLER_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '1');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT ratio(counter, 2) AS r FROM ticks;
"""


@pytest.fixture(scope="module")
def server(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "console-udfs")
    yield tenant
    tenant.close()


def replace_source(page: Page, source: str) -> None:
    page.locator("#udf-editor .cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(source)


def test_write_check_save_edit_and_delete_a_udf(server: ServedTenant, watch: PageWatch) -> None:
    assert httpx.get(server.url + "/udfs").status_code == 200  # served at its address
    page = watch.page
    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="UDFs").click()
    expect(page.get_by_role("heading", name="UDFs", level=1)).to_be_visible()
    expect(page.get_by_role("table", name="UDFs")).to_contain_text("No UDFs yet")

    # Checked as it is typed: a problem is marked at its line, and listed with its place.
    page.get_by_label("UDF name").fill("ratio")
    expect(page.locator("#udf-editor .cm-content")).to_contain_text("def ratio(")
    diagnostics = page.get_by_test_id("udf-diagnostics")
    expect(diagnostics).to_have_text(
        "Valid: scalar UDF ratio(a: int, b: Optional[int]) -> Optional[float]", timeout=60_000)
    replace_source(page, UNHINTED)
    problem = diagnostics.locator("li[data-line='7']")
    expect(problem).to_contain_text(re.compile(r"^Line 7, column \d+: .*\ba\b"))
    marker = page.locator("#udf-editor .cm-lintRange-error")
    expect(marker).to_have_count(1)
    line_of_marker = marker.evaluate(
        "el => [...el.closest('.cm-content').children].indexOf(el.closest('.cm-line')) + 1")
    assert line_of_marker == 7
    expect(page.locator("#udf-editor .cm-gutter-lint .cm-lint-marker-error")).to_have_count(1)
    watch.rendered("udf-error")
    # Saving it anyway is refused by the API, in the file's terms.
    page.get_by_role("button", name="Save UDF").click()
    status = page.get_by_test_id("udf-status")
    expect(status).to_contain_text(re.compile(r"^Not saved: ratio\.py:7:\d+: "))
    watch.problems = [p for p in watch.problems if "400" not in p]  # the API's refusal
    replace_source(page, RATIO)
    expect(status).to_have_text("")  # the refusal was about the file as it was
    page.get_by_role("button", name="Validate").click()
    expect(diagnostics).to_contain_text("Valid: scalar UDF")

    page.get_by_role("button", name="Save UDF").click()
    expect(status).to_have_text("ratio saved as version 1: jobs load it when they next start.")
    row = page.locator("tr[data-udf='ratio']")
    expect(row).to_contain_text("ratio(a: int, b: Optional[int]) -> Optional[float]")
    expect(row.locator("td.num")).to_have_text("1")

    # Edit: the stored source comes back; saving it changed is version 2, unchanged is not.
    page.get_by_role("button", name="New UDF").click()
    expect(page.get_by_label("UDF name")).to_have_value("")
    page.get_by_role("button", name="Edit ratio").click()
    expect(page.get_by_role("heading", name="Edit ratio (version 1)")).to_be_visible()
    expect(page.get_by_label("UDF name")).to_have_attribute("readonly", "")
    replace_source(page, RATIO_2)
    expect(diagnostics).to_contain_text("Valid: scalar UDF")
    page.get_by_role("button", name="Save UDF").click()
    expect(status).to_have_text("ratio saved as version 2: jobs load it when they next start.")
    expect(row.locator("td.num")).to_have_text("2")
    page.get_by_role("button", name="Save UDF").click()
    expect(status).to_have_text("ratio is unchanged: still version 2.")
    assert server.http.get("/udfs/ratio").json()["source"] == RATIO_2
    watch.rendered("udfs")
    watch.document("udfs")

    # Delete: refused while a running pipeline calls it, naming (and linking) the pipeline.
    caller = f"ctr-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": caller, "sql": CALLER_SQL})
    assert created.status_code == 201, created.text
    page.get_by_role("button", name="Delete ratio").click()
    page.get_by_role("button", name="Confirm deleting ratio").click()
    refused = row.locator("[role=status]")
    expect(refused).to_contain_text(f"Not deleted: UDF 'ratio' is called by running pipelines "
                                    f"{caller}")
    expect(refused.get_by_role("link", name=caller)).to_have_attribute("href",
                                                                       f"/pipelines/{caller}")
    watch.problems = [p for p in watch.problems if "409" not in p]
    watch.rendered("udf-delete-refused")
    gone = server.http.delete(f"/pipelines/{caller}", params={"force": "true"})
    assert gone.status_code == 204, gone.text
    page.get_by_role("button", name="Delete ratio").click()
    page.get_by_role("button", name="Confirm deleting ratio").click()
    expect(page.get_by_text("UDF ratio deleted, with its 2 versions.")).to_be_visible()
    expect(row).to_have_count(0)
    assert server.http.get("/udfs/ratio").status_code == 404
