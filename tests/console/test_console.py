"""The web console end to end: real headless Chromium against a real ``spate serve``.

One server (embedded defaults: SQLite, in-process scheduler worker, local Spark
jobs) and one browser serve the module. The main test walks a user's way
through the console — sign in, write SQL with an error and see it marked at
its line, fix it, preview windowed rows, start the pipeline, watch its rates,
edit its SQL into a new version that the job restarts on, stop it, create an
API key whose secret shows once — screenshotting every page and failing on any
console error. The others check connections (secrets never shown back, a
table's columns inferred from a JSON sample), a stopped pipeline's readable
graph, its edit into a new version and its deletion, and that every form is
labelled and keyboard-operable; and a pipeline with no input shows as idle with the time it
resumes. The main test and the idle one run Spark jobs.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.serving import ServedTenant, ServeProcess, new_tenant
from tests.conftest import SHARED_PLATFORM_KEY
from tests.console.browser import FOCUSED_JS, UNLABELLED_CONTROLS_JS, PageWatch, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

# Line 3 names a column the impulse source does not have.
BROKEN_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, no_such_column FROM ticks;
"""
FIXED_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""
# A windowed query: its graph has native Spark steps and a Spate window operator.
WINDOWED_SQL = """CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '100',
    runtime = '5');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out
SELECT w.start AS second, bids
FROM (SELECT TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS bids
      FROM nexmark WHERE bid IS NOT NULL GROUP BY w);
"""
# The preview: one-second windows of the ticks, shown as times rather than JSON.
WINDOW_PREVIEW_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
SELECT TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM ticks GROUP BY 1;
"""
# The running pipeline's second version.
EDITED_SQL = FIXED_SQL.replace("SELECT counter,", "SELECT counter * 2,")
# Keyed five-second windows: the graph's labels name the key and the window in the
# SQL's terms. The planner calls the key k0 and the width 5000000 us.
KEYED_WINDOW_SQL = """CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
CREATE TABLE hot_auctions WITH (connector = 'blackhole');
INSERT INTO hot_auctions
SELECT w.start AS window_start, auction, bids
FROM (SELECT TUMBLE(INTERVAL '5' SECOND) AS w, bid.auction AS auction, count(*) AS bids
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""
# Bid records as a user would paste them: JSON lines, one with a null.
JSON_SAMPLE = (
    '{"auction": 1001, "price": 12.5, "bidder": "ann", "at": "2026-01-05T10:00:00Z", '
    '"seller": {"id": 7}}\n'
    '{"auction": 1002, "price": 3, "bidder": null, "at": "2026-01-05T10:00:01Z", '
    '"seller": {"id": 8}}\n')
# One row every 10 s: between rows the pipeline goes idle and says when it resumes.
SLOW_TICKS_SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '0.1');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter FROM ticks;
"""
TIMEOUT_MS = 300_000  # Spark jobs start slowly on a loaded machine
#: A connection check starts a process in the tenant's sandbox: seconds, on a loaded machine.
CHECK_WAIT_MS = 30_000


@pytest.fixture(scope="module")
def server(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    """A tenant of its own on the session's shared server (where three seconds without
    input make a pipeline idle: the slow-ticks test)."""
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "console")
    yield tenant
    tenant.close()


def replace_sql(page: Page, sql: str) -> None:
    editor = page.get_by_label("Pipeline SQL")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    # CodeMirror auto-indents and closes brackets as one types; insert the text whole.
    page.keyboard.insert_text(sql)


def test_write_preview_start_watch_stop_and_keys(server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    page.goto(server.url + "/pipelines")
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2Fpipelines"))
    expect(page.get_by_role("heading", name="Sign in to Spate")).to_be_visible()
    watch.rendered("sign-in")
    sign_in(page, server)
    expect(page.get_by_role("heading", name="Pipelines")).to_be_visible()
    expect(page.get_by_text("No pipelines yet")).to_be_visible()
    watch.rendered("pipelines-empty")

    # The editor: an error is marked on its line; fixing it clears the marker.
    page.get_by_role("link", name="New pipeline").first.click()
    name = f"ticks-{secrets.token_hex(3)}"
    page.get_by_label("Pipeline name").fill(name)
    replace_sql(page, BROKEN_SQL)
    marker = page.locator(".cm-lintRange-error")
    # The server's first plan starts its planning processes: slow on a loaded machine.
    expect(marker).to_have_count(1, timeout=60_000)
    expect(marker).to_have_text("no_such_column")
    line_of_marker = marker.evaluate(
        "el => [...el.closest('.cm-content').children].indexOf(el.closest('.cm-line')) + 1")
    assert line_of_marker == 3
    expect(page.locator(".diagnostics li[data-line='3']")).to_contain_text("Line 3, column")
    expect(page.locator(".cm-gutter-lint .cm-lint-marker-error")).to_have_count(1)
    watch.rendered("editor-error")
    replace_sql(page, FIXED_SQL)
    expect(page.locator(".diagnostics")).to_contain_text("Valid")
    expect(marker).to_have_count(0)
    expect(page.get_by_role("button", name="Insert CREATE TABLE for impulse")).to_be_visible()

    # The preview streams rows into its table; a window shows as its start and end times.
    replace_sql(page, WINDOW_PREVIEW_SQL)
    expect(page.locator(".diagnostics")).to_contain_text("Valid")
    page.get_by_role("button", name="Run preview").click()
    rows = page.get_by_role("table", name="Preview rows").locator("tbody tr")
    expect(rows.first).to_be_visible(timeout=TIMEOUT_MS)
    expect(rows.first.locator("td").first).to_have_text(
        re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d – \d\d:\d\d:\d\d$"))
    watch.rendered("editor-preview")
    page.get_by_role("button", name="Stop preview").click()
    expect(page.locator(".preview [role=status]")).to_contain_text("preview stopped")
    replace_sql(page, FIXED_SQL)
    expect(page.locator(".diagnostics")).to_contain_text("Valid")

    # Start: the detail page shows the job running and its rates moving.
    page.get_by_role("button", name="Start pipeline").click()
    expect(page).to_have_url(re.compile(rf"/pipelines/{name}$"))
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(page.get_by_test_id("state")).to_have_text("running", timeout=TIMEOUT_MS)
    rate = page.get_by_test_id("rows-in")
    expect(rate).to_have_text(re.compile(r"^[1-9][0-9.]*$"), timeout=TIMEOUT_MS)
    first_epoch = int(page.get_by_test_id("epoch").inner_text())
    expect(page.get_by_test_id("epoch")).not_to_have_text(str(first_epoch), timeout=TIMEOUT_MS)
    graph = page.locator("svg.graph")
    expect(graph.locator("[data-runs-on=spark]")).not_to_have_count(0)
    expect(graph.locator("[data-runs-on=spate]")).not_to_have_count(0)
    expect(graph.locator("[data-node='source:ticks'] .rate")).to_have_text(
        re.compile(r"^[0-9.]+ rows/s$"))
    expect(graph.locator("[data-node='source:ticks'] .box")).not_to_have_attribute(
        "data-pressure", "unknown")
    expect(page.get_by_role("table", name="Checkpoints").locator("tbody tr")).not_to_have_count(0)
    expect(page.locator(".chart canvas")).to_be_visible()
    expect(page.locator("h1:focus")).to_have_count(1)  # focused after navigating, no ring:
    assert page.locator("h1").evaluate("el => getComputedStyle(el).outlineStyle") == "none"
    watch.rendered("pipeline-running")

    # Edit: the new SQL is version 2, and the job restarts on it keeping its state.
    page.get_by_role("button", name="Edit SQL").click()
    replace_sql(page, EDITED_SQL)
    expect(page.locator("form[aria-labelledby=edit-title] .diagnostics")).to_contain_text("Valid")
    expect(page.get_by_label("Restart now, keeping state")).to_be_checked()
    page.get_by_role("button", name="Save as version 2").click()
    expect(page.get_by_role("status").filter(has_text="Version 2 saved")).to_contain_text(
        "restart requested")
    expect(page.get_by_test_id("version")).to_have_text("version 2", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("state")).to_have_text("running", timeout=TIMEOUT_MS)
    versions = server.http.get(f"/pipelines/{name}/versions").json()["items"]
    assert [v["version"] for v in versions] == [1, 2] and versions[1]["sql"] == EDITED_SQL

    page.get_by_label("Stop mode").select_option("checkpoint")
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.get_by_test_id("state")).to_have_text("stopped", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("desired")).to_have_text("stopped (checkpoint)")
    expect(page.get_by_role("button", name="Start", exact=True)).to_be_visible()
    expect(page.get_by_label("Stop mode")).to_be_hidden()
    watch.rendered("pipeline-stopped")

    page.get_by_role("link", name="Pipelines", exact=True).click()
    listed = page.locator(f"tr[data-pipeline='{name}']")
    expect(listed).to_contain_text("stopped")
    watch.rendered("pipelines")

    # A new key's secret shows once: it works, and a reload does not show it again.
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Key name").fill("console-ci")
    page.get_by_label("Role").select_option("viewer")
    page.get_by_label("Key name").press("Enter")
    secret = page.get_by_label("New API key")
    expect(secret).to_have_value(re.compile(r"^spate_"))
    token = secret.input_value()
    expect(page.get_by_role("button", name="Copy key")).to_be_visible()
    me = httpx.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["key_name"] == "console-ci" and me.json()["role"] == "viewer"
    watch.rendered("keys-created")
    page.reload()
    expect(page.locator("tr[data-key='console-ci']")).to_be_visible()
    assert token not in page.content()
    expect(page.get_by_label("New API key")).to_have_count(0)
    watch.rendered("keys")

    # Revoking takes two clicks; the key stops working.
    page.get_by_role("button", name="Revoke console-ci").click()
    page.get_by_role("button", name="Confirm revoking console-ci").click()
    expect(page.locator("tr[data-key='console-ci']")).to_have_count(0)
    assert httpx.get(f"{server.url}/api/v1/me",
                     headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_autoscaling_is_set_shown_and_turned_off(server: ServedTenant,
                                                 watch: PageWatch) -> None:
    page = watch.page
    sign_in(page, server)
    name = f"auto-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": name, "sql": WINDOWED_SQL,
                                                   "stopped": True})
    assert created.status_code == 201, created.text
    page.goto(f"{server.url}/pipelines/{name}")
    scaling = page.get_by_test_id("autoscale")
    expect(scaling).to_have_text("Autoscaling is off: the parallelism is what you set.")
    expect(page.get_by_role("button", name="Turn autoscaling off")).to_be_hidden()
    page.get_by_label("Autoscale from").fill("1")
    page.get_by_label("Autoscale to").fill("3")
    page.get_by_role("button", name="Autoscale", exact=True).click()
    expect(scaling).to_have_text("Autoscaling between 1 and 3.")
    assert server.http.get(f"/pipelines/{name}").json()["autoscale"]["max"] == 3
    # A range upside down is refused in the page, saying why.
    page.get_by_label("Autoscale from").fill("4")
    page.get_by_role("button", name="Autoscale", exact=True).click()
    expect(page.get_by_test_id("notice")).to_contain_text(
        "Autoscale from (4) is above Autoscale to (3)")
    watch.rendered("pipeline-autoscale")
    page.get_by_role("button", name="Turn autoscaling off").click()
    expect(scaling).to_have_text("Autoscaling is off: the parallelism is what you set.")
    assert server.http.get(f"/pipelines/{name}").json()["autoscale"] is None


def test_connections_are_tested_and_secrets_never_shown(server: ServedTenant,
                                                        watch: PageWatch) -> None:
    page = watch.page
    sign_in(page, server)
    page.get_by_role("link", name="Connections").click()
    expect(page.get_by_role("heading", name="Connections")).to_be_visible()
    secret_value = f"s3cret-{secrets.token_hex(4)}"
    # The form is the connector's: a field per option it declares, credentials as
    # password fields; a path that carries a token can be kept encrypted too.
    profile_form = page.locator("form[aria-labelledby=profile-form-title]")
    page.get_by_label("Profile name").fill("files")
    page.get_by_label("Connector of the profile").select_option("single_file")
    expect(profile_form.locator("legend").first).to_have_text("Options of single_file")
    connectors = {c["name"]: c for c in server.http.get("/connectors").json()["items"]}
    declared = [o["name"] for o in connectors["single_file"]["options"] if o["name"] != "type"]
    expect(profile_form.locator(".option-grid label")).to_have_text(declared)
    # Each field is of its option's type (a list of its values, a number field), with its
    # meaning, whether it is required and its default under it, all from the declaration.
    expect(profile_form.get_by_label("bad_data", exact=True).locator("option")).to_have_text(
        ["(default: fail)", "fail", "drop"])  # single_file has no dead-letter table
    expect(profile_form.get_by_label("json.unstructured", exact=True).locator("option")) \
        .to_have_text(["(default: false)", "true", "false"])
    expect(profile_form.get_by_label("max_lines_per_batch", exact=True)).to_have_attribute(
        "type", "number")
    hint_id = profile_form.get_by_label("path", exact=True).get_attribute("aria-describedby")
    path_hint = profile_form.locator(f"#{hint_id}")
    expect(path_hint).to_contain_text("Required.")
    expect(path_hint).to_contain_text("storage root")
    profile_form.get_by_label("format", exact=True).fill("json")
    profile_form.get_by_text("Keep other options encrypted").click()
    profile_form.get_by_label("Encrypted options (profile)").fill(f"path = {secret_value}.jsonl")
    # Test checks what the form says, before anything is stored.
    page.get_by_role("button", name="Test profile").click()
    form_status = page.get_by_test_id("profile-form-status")
    expect(form_status).to_have_text(re.compile(r"^OK: \*+ can be written \(not stored yet\)$"),
                                     timeout=CHECK_WAIT_MS)
    assert secret_value not in page.content()
    assert server.http.get("/connection-profiles").json()["items"] == []
    profile_form.get_by_label("format", exact=True).fill("jsonl")  # the test's answer goes
    expect(form_status).to_have_text("")
    profile_form.get_by_label("format", exact=True).fill("json")
    page.get_by_role("button", name="Add profile").click()
    profile = page.locator("tr[data-profile='files']")
    expect(profile).to_contain_text("path = ********")
    # A table's fields are those of its role; a credential is a password field.
    table_form = page.locator("form[aria-labelledby=table-form-title]")
    page.get_by_label("Connector of the table").select_option("postgres")
    expect(table_form.get_by_label("password", exact=True)).to_have_attribute("type", "password")
    page.get_by_label("Connector of the table").select_option("single_file")
    page.get_by_label("Role of the table").select_option("sink")
    expect(table_form.get_by_label("event_time_field", exact=True)).to_have_count(0)
    page.get_by_label("Role of the table").select_option("source")
    expect(table_form.get_by_label("event_time_field", exact=True)).to_be_visible()
    page.get_by_label("Table name").fill("drain")
    page.get_by_label("Connector of the table").select_option("blackhole")
    expect(page.get_by_label("Role of the table")).to_be_hidden()  # a sink only
    page.get_by_role("button", name="Add table").click()
    expect(page.locator("tr[data-table='drain']")).to_contain_text("sink")
    page.get_by_role("button", name="Test drain").click()
    # A test's outcome shows in the tested table's own row.
    expect(page.locator("tr[data-table='drain'] [role=status]")).to_have_text(
        re.compile(r"^OK"), timeout=CHECK_WAIT_MS)
    page.reload()
    expect(profile).to_contain_text("path = ********")
    assert secret_value not in page.content()
    watch.rendered("connections")

    # A JSON source's columns, inferred from a pasted sample; the sample's problems are
    # said beside it.
    page.get_by_label("Table name").fill("bids")
    page.get_by_label("Connector of the table").select_option("single_file")
    page.get_by_label("Role of the table").select_option("source")
    table_form.get_by_label("path", exact=True).fill("bids.jsonl")
    table_form.get_by_label("format", exact=True).fill("json")
    page.get_by_label("JSON sample").fill('{"auction": 1}\nnot json')
    page.get_by_role("button", name="Infer columns").click()
    expect(page.locator("#table-sample-status")).to_contain_text("Line 2 is not JSON")
    page.get_by_label("JSON sample").fill(JSON_SAMPLE)
    page.get_by_role("button", name="Infer columns").click()
    expect(page.locator("#table-sample-status")).to_contain_text("5 columns from 2 records")
    inferred = {page.get_by_label(f"Column {n} name").input_value():
                page.get_by_label(f"Column {n} type").input_value() for n in range(1, 6)}
    assert inferred == {"auction": "BIGINT", "price": "DOUBLE", "bidder": "TEXT",
                        "at": "TIMESTAMP", "seller": "STRUCT<id BIGINT>"}
    # The columns stay editable: one more, typed by hand, and auction made NOT NULL.
    page.get_by_label("Column 1 nullable").uncheck()
    page.get_by_role("button", name="Add column").click()
    page.get_by_label("Column 6 name").fill("note")
    page.get_by_label("Column 6 type").fill("TEXT")
    page.keyboard.press("Tab")  # on, past the type's suggestions (a datalist popup)
    watch.rendered("connections-inferred")
    watch.document("connections", table_form)
    page.get_by_role("button", name="Add table").click()
    expect(page.get_by_role("status").filter(has_text="bids added")).to_be_visible()
    expect(page.locator("tr[data-table='bids'] td.fields")).to_have_text(
        "auction BIGINT NOT NULL, price DOUBLE, bidder TEXT, at TIMESTAMP, "
        "seller STRUCT<id BIGINT>, note TEXT")
    fields = server.http.get("/connection-tables/bids").json()["fields"]
    assert fields[0] == {"name": "auction", "type": "BIGINT", "nullable": False}
    # Pipelines use its columns by name.
    checked = server.http.post("/pipelines/validate", json={
        "sql": "SELECT auction, price * 2 AS doubled, seller.id AS seller FROM bids"}).json()
    assert checked["valid"], checked
    unknown = server.http.post("/pipelines/validate", json={"sql": "SELECT nope FROM bids"})
    assert "available: auction, price, bidder, at, seller, note" in unknown.text

    # The editor's catalog lists the new tables; a button inserts a name.
    page.get_by_role("link", name="New pipeline").click()
    expect(page.locator(".catalog")).to_contain_text("auction BIGINT NOT NULL, price DOUBLE")
    page.get_by_role("button", name="Insert table drain").click()
    expect(page.locator(".cm-content")).to_contain_text("drain")
    watch.rendered("editor-catalog")


def test_a_stopped_pipelines_graph_edit_and_delete(server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    sign_in(page, server)
    name = f"auctions-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": name, "sql": KEYED_WINDOW_SQL,
                                                   "stopped": True})
    assert created.status_code == 201, created.text
    page.goto(f"{server.url}/pipelines/{name}")

    # The graph speaks the SQL's language, and all of it is in view.
    graph = page.locator("svg.graph")
    pre_aggregate = graph.locator("[data-kind=pre_aggregate]")
    expect(pre_aggregate.locator(".name")).to_have_text("pre-aggregate by auction")
    expect(pre_aggregate.locator(".detail")).to_have_text("native, into 5 s panes")
    expect(graph.locator("[data-kind=window_aggregate] .name")).to_have_text("TUMBLE 5 s")
    expect(graph.locator("[data-kind=window_aggregate] .detail")).to_have_text("count(*)")
    expect(graph.locator("[data-kind=projection] .name")).to_have_text("SELECT into hot_auctions")
    expect(graph.locator("[data-kind=sink] .name")).to_have_text("hot_auctions")
    shown = " | ".join(graph.locator("text").all_text_contents())  # not the hover texts
    for internal in ("query 0", "k0", "us)", "panes by"):
        assert internal not in shown, shown
    box = page.locator(".graph-box").bounding_box()
    last = graph.locator("[data-kind=sink] .box").bounding_box()
    assert box and last and last["x"] + last["width"] <= box["x"] + box["width"], (box, last)
    watch.rendered("pipeline-graph")

    # Edit: a mistake is shown in the edit form; the fix is saved as version 2, stopped.
    page.get_by_role("button", name="Edit SQL").click()
    edit = page.locator("form[aria-labelledby=edit-title]")
    replace_sql(page, KEYED_WINDOW_SQL.replace("bid.auction", "bid.no_such_field"))
    page.get_by_label("Keep it stopped").check()
    page.get_by_role("button", name="Save as version 2").click()
    expect(edit.get_by_role("alert")).to_contain_text("Not saved")
    watch.problems = [p for p in watch.problems if "400" not in p]  # the API's refusal
    replace_sql(page, KEYED_WINDOW_SQL.replace("'5' SECOND", "'10' SECOND"))
    expect(edit.locator(".diagnostics")).to_contain_text("Valid")
    watch.rendered("pipeline-edit")
    watch.document("edit")
    page.get_by_role("button", name="Save as version 2").click()
    expect(page.get_by_role("status").filter(has_text="Version 2 saved")).to_be_visible()
    expect(edit).to_have_count(0)
    expect(page.get_by_test_id("version")).to_have_text("version 2")
    expect(graph.locator("[data-kind=window_aggregate] .name")).to_have_text("TUMBLE 10 s")
    expect(page.locator("tr[data-version]")).to_have_count(2)
    pipeline = server.http.get(f"/pipelines/{name}").json()
    assert pipeline["version"] == 2 and pipeline["desired_state"] == "stopped"
    assert pipeline["job"] is None

    # Delete asks first; Cancel keeps the pipeline, confirming deletes it.
    page.get_by_role("button", name="Delete pipeline").click()
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("button", name=f"Delete {name}")).to_have_count(0)
    page.get_by_role("button", name="Delete pipeline").click()
    expect(page.get_by_role("heading", name=f"Delete {name}?")).to_be_visible()
    watch.rendered("pipeline-delete")
    page.get_by_role("button", name=f"Delete {name}").click()
    expect(page).to_have_url(re.compile(r"/pipelines\?deleted="))
    expect(page.get_by_role("status").filter(has_text=f"Pipeline {name} deleted.")).to_be_visible()
    expect(page.locator(f"tr[data-pipeline='{name}']")).to_have_count(0)
    assert server.http.get(f"/pipelines/{name}").status_code == 404


def test_an_idle_pipeline_says_when_it_resumes(server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    sign_in(page, server)
    name = f"slow-{secrets.token_hex(3)}"
    created = server.http.post("/pipelines", json={"name": name, "sql": SLOW_TICKS_SQL})
    assert created.status_code == 201, created.text
    row = page.locator(f"tr[data-pipeline='{name}']")
    expect(row.locator(".state")).to_have_text("idle", timeout=TIMEOUT_MS)
    expect(row).to_contain_text(re.compile(r"idle until \S"))
    watch.rendered("pipelines-idle")
    page.goto(f"{server.url}/pipelines/{name}")
    expect(page.get_by_test_id("state")).to_contain_text(
        re.compile(r"(idle until|running|starting)"), timeout=30_000)
    stopped = server.http.patch(f"/pipelines/{name}", json={"stop": "immediate"})
    assert stopped.status_code == 200, stopped.text


def _tab_through(page: Page, steps: int) -> list[dict[str, object]]:
    focused = []
    for _ in range(steps):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUSED_JS)
        if now is not None:
            focused.append(now)
    return focused


#: Per page, controls the keyboard must reach (by accessible name).
KEYBOARD_REACHES = {
    "/sign-in": {"API key", "Sign in"},
    "/pipelines": {"Pipelines", "New pipeline"},
    "/pipelines/new": {"Pipeline name", "Parallelism", "Pipeline SQL"},
    "/pipelines/{stopped}": {"Start", "Keep state", "Restart", "New parallelism", "Rescale"},
    "/connections": {"Profile name", "Add profile"},
    "/udfs": {"UDF name", "UDF source"},
    "/keys": {"Key name", "Role", "Create key"},
}


@pytest.mark.parametrize("path", list(KEYBOARD_REACHES))
def test_every_control_is_labelled_and_reached_by_keyboard(server: ServedTenant, watch: PageWatch,
                                                           path: str) -> None:
    page = watch.page
    screenshot = "a11y" + re.sub(r"\W+", "-", path).rstrip("-")
    if path != "/sign-in":
        sign_in(page, server)
    if "{stopped}" in path:  # a pipeline created stopped: its page, without a Spark job
        name = f"idle-{secrets.token_hex(3)}"
        created = server.http.post("/pipelines", json={"name": name, "sql": WINDOWED_SQL,
                                                       "stopped": True})
        assert created.status_code == 201, created.text
        path = path.format(stopped=name)
        page.goto(server.url + path)
        graph = page.locator("svg.graph")
        expect(graph.locator("[data-node$=':pre_aggregate']")).to_have_attribute(
            "data-runs-on", "spark")
        window = graph.locator("[data-runs-on=spate]").filter(has_text="window aggregate")
        expect(window).to_have_count(1)
        expect(graph.locator("[data-node='source:nexmark']")).to_have_attribute(
            "data-runs-on", "spark")
    page.goto(server.url + path)
    expect(page.locator("main h1")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert page.evaluate(UNLABELLED_CONTROLS_JS) == []
    focused = _tab_through(page, 30)
    assert focused, "Tab reaches nothing"
    assert all(item["ring"] for item in focused), [i for i in focused if not i["ring"]]
    reached = {str(item["name"]).strip() for item in focused}
    expected = KEYBOARD_REACHES[path if path in KEYBOARD_REACHES else "/pipelines/{stopped}"]
    assert expected <= reached, (expected - reached, focused)
    watch.rendered(screenshot)


def test_a_wrong_key_is_refused_and_signing_out_forgets_the_key(server: ServedTenant,
                                                                watch: PageWatch) -> None:
    page = watch.page
    page.goto(server.url + "/sign-in")
    page.get_by_label("API key").fill("spate_nope_nope")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    expect(page.get_by_label("API key")).to_be_focused()
    # The refused sign-in is an expected 401, not a page error.
    watch.problems = [p for p in watch.problems if "401" not in p]
    watch.rendered("sign-in-refused")
    sign_in(page, server)
    assert page.evaluate("sessionStorage.getItem('spate.apiKey')") == server.admin_key
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/sign-in$"))
    assert page.evaluate("sessionStorage.getItem('spate.apiKey')") is None
    page.goto(server.url + "/keys")
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2Fkeys"))


def test_detail_page_of_a_missing_pipeline_says_so(server: ServedTenant, watch: PageWatch) -> None:
    page = watch.page
    sign_in(page, server)
    page.goto(server.url + "/pipelines/no-such-pipeline")
    expect(page.get_by_role("alert")).to_contain_text("not found")
    # The API's own 404 is an expected answer here, not a page error.
    watch.problems = [p for p in watch.problems if "404" not in p]
    watch.rendered("pipeline-missing")


def test_console_is_served_beside_the_api(server: ServedTenant, tmp_path: Path) -> None:
    index = httpx.get(server.url + "/pipelines/anything")
    assert index.status_code == 200 and '<div' not in index.text[:0]
    assert "text/html" in index.headers["content-type"]
    assert "default-src 'self'" in index.headers["content-security-policy"]
    asset = re.search(r'src="(/assets/[^"]+\.js)"', index.text)
    assert asset, index.text
    assert httpx.get(server.url + asset.group(1)).status_code == 200
    unknown = httpx.get(server.url + "/api/v1/no-such-route")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
