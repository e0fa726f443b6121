"""The console shows what is so, and nothing stale: real headless Chromium against the
session's real ``spate serve``.

A running windowed pipeline's operator boxes show each operator's own rows per second and
busy ratio (a window's output between firings is not 0 rows/s; a source has no busy
figure of its own, so it is not painted by the job's); after "save as version 2" without a
restart the graph is still version 1's, with version 2's beside it; a stop's notice goes
when the job has stopped, and a stopped pipeline shows no rates and no busy colour, but
"stopped". Messages whose cause is gone go too (a failed preview once the SQL changes, a
refused name once the name changes), and the API's refusals are in the user's words.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, expect

from tests.api.serving import ServedTenant, ServeProcess, new_tenant
from tests.conftest import SHARED_PLATFORM_KEY
from tests.console.browser import PageWatch, sign_in
from tests.console.test_console import TIMEOUT_MS, replace_sql

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

# Five-second windows of 20 rows a second: the window writes one row every five seconds,
# 0.2 rows/s, and 0 in most epochs.
WINDOWED_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out
SELECT w.start AS second, k, n
FROM (SELECT TUMBLE(INTERVAL '5' SECOND) AS w, subtask_index AS k, count(*) AS n
      FROM ticks GROUP BY 1, 2);
"""
SECOND_VERSION_SQL = WINDOWED_SQL.replace("SELECT w.start AS second, k, n",
                                          "SELECT w.start AS second, k, n, n * 2 AS twice")
RATE = re.compile(r"^([0-9.]+|< 0\.001) rows/s")


@pytest.fixture(scope="module")
def server(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "console-truth")
    yield tenant
    tenant.close()


def box(graph: Locator, kind: str) -> Locator:
    return graph.locator(f"[data-kind={kind}]")


def rate_of(node: Locator) -> float:
    text = str(node.locator(".rate").text_content())
    found = RATE.match(text)
    assert found, text
    return 0.0005 if found.group(1).startswith("<") else float(found.group(1))


def test_operators_show_their_own_figures_the_running_version_and_stopped_shows_none(
        server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    name = f"windows-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": name, "sql": WINDOWED_SQL})
    assert created.status_code == 201, created.text
    sign_in(page, server)
    page.goto(f"{server.url}/pipelines/{name}")
    expect(page.get_by_test_id("state")).to_have_text("running", timeout=TIMEOUT_MS)

    # Each box has its own operator's figures over the last minute. The window's output
    # (the SELECT after it) is a fifth of a row a second, not 0, once a window has closed.
    first = page.locator("figure[data-version='1']")
    graph = first.locator("svg.graph")
    expect(first.get_by_test_id("graph-caption")).to_have_text("version 1 · running")
    projection = box(graph, "projection")
    expect(projection.locator(".rate")).to_have_text(re.compile(r"^0\.[1-9]\d* rows/s"),
                                                     timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("rows-out")).to_have_text(re.compile(r"^0\.[1-9]"))
    # The header's last minute is the graph's: the figures agree (read in one refresh).
    figures = page.evaluate("""() => ({
        out: document.querySelector('[data-testid=rows-out]').textContent,
        in: document.querySelector('[data-testid=rows-in]').textContent,
        select: document.querySelector("figure[data-version='1'] [data-kind=projection] .rate")
          .textContent,
        source: document.querySelector("figure[data-version='1'] [data-kind=source] .rate")
          .textContent})""")
    assert figures["select"] == f"{figures['out']} rows/s", figures
    assert figures["source"] == f"{figures['in']} rows/s", figures
    assert 10 <= rate_of(box(graph, "source")) <= 40
    # Busy is the window's own (its state tasks), not the job's: the source has none.
    window = box(graph, "window_aggregate")
    expect(window.locator(".rate")).to_have_text(re.compile(r"rows/s · busy 0\.\d\d$"))
    expect(window.locator(".box")).to_have_attribute("data-pressure", re.compile("low|medium|high"))
    expect(box(graph, "source").locator(".box")).to_have_attribute("data-pressure", "none")
    expect(box(graph, "source").locator(".rate")).not_to_contain_text("busy")
    expect(box(graph, "sink").locator(".rate")).to_contain_text("busy")
    watch.rendered("pipeline-running")
    watch.document("pipeline")

    # Version 2, saved without a restart: the graph is still version 1's, with its figures;
    # version 2's is beside it, without any.
    page.get_by_role("button", name="Edit SQL").click()
    replace_sql(page, SECOND_VERSION_SQL)
    expect(page.locator("form[aria-labelledby=edit-title] .diagnostics")).to_contain_text("Valid")
    page.get_by_label("Do not restart").check()
    page.get_by_role("button", name="Save as version 2").click()
    expect(page.get_by_test_id("notice")).to_have_text("Version 2 saved.")
    second = page.locator("figure[data-version='2']")
    expect(second.get_by_test_id("graph-caption")).to_have_text("version 2 · runs after a restart")
    expect(second.locator("[data-kind=projection] .detail")).to_contain_text("twice")
    expect(second.locator("svg.graph .rate").first).to_have_text("not running yet")
    expect(first.get_by_test_id("graph-caption")).to_have_text("version 1 · running")
    expect(first.locator("[data-kind=projection] .detail")).not_to_contain_text("twice")
    expect(box(graph, "source").locator(".rate")).to_have_text(RATE)
    expect(page.get_by_test_id("version")).to_have_text("version 2 · the job runs version 1")
    watch.rendered("pipeline-new-version-waits")

    # Stop: the notice says so while the job stops, and goes once it has.
    page.get_by_label("Stop mode").select_option("immediate")
    page.get_by_role("button", name="Stop", exact=True).click()
    notice = page.get_by_test_id("notice")
    expect(notice).to_have_text("Stop requested.")
    expect(page.get_by_test_id("state")).to_have_text("stopped", timeout=TIMEOUT_MS)
    expect(notice).to_have_text("")
    # No live figures: no rates, no busy colour; the one graph is of the version a start runs.
    for figure in ("rows-in", "rows-out", "busy", "lag"):
        expect(page.get_by_test_id(figure)).to_have_text("stopped")
    expect(page.locator("figure.graph-panel")).to_have_count(1)
    expect(second.get_by_test_id("graph-caption")).to_have_text("version 2 · stopped")
    stopped_graph = second.locator("svg.graph")
    expect(stopped_graph.locator(".rate")).to_have_count(stopped_graph.locator(".box").count())
    for text in stopped_graph.locator(".rate").all_text_contents():
        assert text == "stopped", text
    for pressure in stopped_graph.locator(".box").evaluate_all(
            "boxes => boxes.map(b => b.getAttribute('data-pressure'))"):
        assert pressure == "none", pressure
    watch.rendered("pipeline-stopped")
    page.get_by_role("link", name="Pipelines", exact=True).click()
    row = page.locator(f"tr[data-pipeline='{name}']")
    expect(row.locator(".state")).to_have_text("stopped")
    expect(row.get_by_test_id("rows-in")).to_have_text("—")
    expect(row.get_by_test_id("rows-out")).to_have_text("—")
    assert server.http.delete(f"/pipelines/{name}").status_code == 204


def test_messages_go_with_their_cause_and_refusals_are_in_the_users_words(
        server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    taken = f"taken-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": taken, "sql": WINDOWED_SQL,
                                                   "stopped": True})
    assert created.status_code == 201, created.text
    sign_in(page, server)
    page.get_by_role("link", name="New pipeline").first.click()

    # A preview of SQL that does not plan fails; editing the SQL takes the failure away.
    replace_sql(page, WINDOWED_SQL.replace("subtask_index", "no_such_column"))
    page.get_by_role("button", name="Run preview").click()
    status = page.locator(".preview [role=status]")
    expect(status).to_contain_text("Preview failed")
    watch.problems = [p for p in watch.problems if "400" not in p]  # the API's refusal
    replace_sql(page, WINDOWED_SQL)
    expect(status).not_to_contain_text("failed")
    expect(status).to_have_text("Run a preview to see the first rows.")

    # A taken name: the API's answer in the user's words, gone once the name changes.
    page.get_by_label("Pipeline name").fill(taken)
    expect(page.locator(".diagnostics")).to_contain_text("Valid")
    page.get_by_role("button", name="Start pipeline").click()
    refused = page.locator("form[aria-label='New pipeline'] [role=alert]")
    expect(refused).to_have_text(f"a pipeline named '{taken}' already exists; choose another "
                                 "name, or delete it first")
    watch.problems = [p for p in watch.problems if "409" not in p]
    watch.rendered("editor-name-taken")
    page.get_by_label("Pipeline name").fill(f"{taken}-2")
    expect(refused).to_be_hidden()


def test_a_preview_says_what_it_waits_for_and_for_how_long(server: ServedTenant,
                                                           watch: PageWatch) -> None:
    page = watch.page
    sign_in(page, server)
    page.get_by_role("link", name="New pipeline").first.click()
    replace_sql(page, WINDOWED_SQL.replace("INSERT INTO out\n", ""))
    expect(page.locator(".diagnostics")).to_contain_text("Valid")
    page.get_by_role("button", name="Run preview").click()
    status = page.get_by_test_id("preview-status")
    waiting = re.compile(r"^(Waiting for the scheduler to start a preview job|Starting the preview "
                         r"job and its Spark application|Running: waiting for the first epoch to "
                         r"commit|Epoch \d+ committed \(\d+ rows? read, none out yet: a window "
                         r"writes when it closes\); waiting for rows)… (\d+) s$")
    expect(status).to_have_text(waiting)
    seconds = int(waiting.match(str(status.text_content())).group(2))  # type: ignore[union-attr]
    # The time it has waited goes on: it is a clock, not a label.
    expect(status).not_to_have_text(re.compile(rf"… {seconds} s$"))
    # Five-second windows: epochs commit before the first window closes, and it says so.
    expect(status).to_have_text(re.compile(r"^Epoch \d+ committed \([1-9]\d* rows? read"),
                                timeout=TIMEOUT_MS)
    watch.rendered("preview-waiting")
    rows = page.get_by_role("table", name="Preview rows").locator("tbody tr")
    expect(rows.first).to_be_visible(timeout=TIMEOUT_MS)
    expect(status).to_have_text(re.compile(r"^\d+ rows?$"))
    page.get_by_role("button", name="Stop preview").click()
    expect(status).to_contain_text("preview stopped")


def test_a_key_sees_what_its_role_cannot_do_disabled_and_why(server: ServedTenant,
                                                              watch: PageWatch) -> None:
    name = f"viewed-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": name, "sql": WINDOWED_SQL,
                                                   "stopped": True})
    assert created.status_code == 201, created.text
    table = server.http.post("/connection-tables", json={"name": f"drain_{secrets.token_hex(3)}",
                                                         "connector": "blackhole"})
    assert table.status_code == 201, table.text
    keys = {role: server.http.post("/api-keys", json={"name": f"{role}-{secrets.token_hex(2)}",
                                                      "role": role}).json()["key"]
            for role in ("viewer", "developer")}
    page = watch.page
    sign_in(page, server, keys["viewer"])
    why = "This needs a developer or admin key; you are signed in with a viewer key."

    def refused(button: Locator) -> None:
        expect(button).to_be_disabled()
        expect(button).to_have_attribute("title", why)

    # Writing and checking SQL is a viewer's too; starting it, or a preview, is not.
    page.get_by_role("link", name="New pipeline").first.click()
    expect(page.locator(".diagnostics")).to_contain_text("Valid")
    refused(page.get_by_role("button", name="Start pipeline"))
    refused(page.get_by_role("button", name="Run preview"))
    expect(page.get_by_test_id("role-note")).to_contain_text(
        "viewer key: it can write and check SQL")
    watch.rendered("viewer-editor")

    page.goto(f"{server.url}/pipelines/{name}")
    expect(page.get_by_test_id("state")).to_have_text("stopped")
    for button in ("Edit SQL", "Delete pipeline", "Start", "Restart", "Rescale", "Autoscale"):
        refused(page.get_by_role("button", name=button, exact=True))
    # Usage and costs are not the viewer's: not asked for (no refused requests), and said so.
    expect(page.get_by_test_id("pipeline-usage")).to_have_text(
        "Usage and costs are not shown. This needs an admin or billing key; you are signed in "
        "with a viewer key.")
    watch.rendered("viewer-pipeline")

    page.get_by_role("link", name="Connections").click()
    for button in ("Add profile", "Test profile", "Add table", "Test table"):
        refused(page.get_by_role("button", name=button))
    refused(page.get_by_role("button", name=f"Test {table.json()['name']}"))
    refused(page.get_by_role("button", name=f"Delete {table.json()['name']}"))

    page.get_by_role("link", name="UDFs").click()
    refused(page.get_by_role("button", name="Save UDF"))
    expect(page.get_by_role("button", name="Validate")).to_be_enabled()

    # API keys are an admin's: the page says so instead of failing.
    page.get_by_role("link", name="API keys").click()
    expect(page.get_by_test_id("refused")).to_contain_text(
        "API keys are not available to this key. This needs an admin key; you are signed in "
        "with a viewer key.")
    watch.rendered("viewer-keys")

    # A developer may do all of that but manage keys.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, server, keys["developer"])
    page.get_by_role("link", name="New pipeline").first.click()
    expect(page.get_by_role("button", name="Start pipeline")).to_be_enabled()
    expect(page.get_by_test_id("role-note")).to_have_count(0)
    page.get_by_role("link", name="API keys").click()
    expect(page.get_by_test_id("refused")).to_contain_text("with a developer key")
