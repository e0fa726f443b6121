"""The console's billing pages end to end: usage, invoices, quotas, the budget and its
banner, in headless Chromium against a real ``spate serve``.

Usage rows are written into the server's database as the meter writes them (two
pipelines and the previews, this month, some in the last minutes), with quantities
whose costs are whole cents at the built-in price book. The main test reads them
back on the Usage page and checks each figure against the API; sets a budget,
raises its alerts as the scheduler does after a metering pass and sees the banner on
every page (a threshold, then the hard stop); reads and downloads the invoice; reads
the quotas; and reads one pipeline's usage and estimate on its page. A viewer key
sees the API's refusal where usage and invoices would be. No Spark job runs: the
pipelines are created stopped.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from spate.api.db import Database, create_database
from spate.api.repositories.control import SqlControlStore
from tests.api.job_rows import insert_usage, update_job
from tests.api.serving import ServedTenant, ServeProcess, new_tenant
from tests.conftest import SHARED_PLATFORM_KEY
from tests.console.browser import UNLABELLED_CONTROLS_JS, PageWatch, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

SQL = """CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '5');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter FROM ticks;
"""
HOUR_S = 3600
#: A GiB held for a month of the price book (730 hours): one GiB-month.
GIB_MONTH_S = 730 * HOUR_S


@pytest.fixture(scope="module")
def server(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    """A tenant of its own on the session's shared server: its usage is only this
    module's."""
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "billing")
    yield tenant
    tenant.close()


@pytest.fixture(scope="module")
def database(server: ServedTenant) -> Iterator[Database]:
    """The served control-plane database (``spate serve``'s default, in its directory)."""
    served = create_database(f"sqlite:///{server.workdir / '.spate' / 'spate.db'}")
    yield served
    served.dispose()


def write_usage(database: Database, tenant_id: str, pipeline_id: str | None,
                charges: list[tuple[datetime, str, float]]) -> None:
    """Usage rows of a new job, as the meter writes them (``tests.api.job_rows``, which
    reads the database from an API app: here, the served one's). The job has ended, so
    the server's scheduler leaves it alone."""
    served_app = SimpleNamespace(state=SimpleNamespace(spate=SimpleNamespace(database=database)))
    job_id = insert_usage(served_app, tenant_id, pipeline_id, charges)
    update_job(served_app, job_id, state="stopped", ended_at=datetime.now(UTC))


def seed_usage(server: ServedTenant, database: Database) -> dict[str, str]:
    """Two stopped pipelines and this month's usage of theirs and of the previews; their
    names by role. Costs: orders $0.37, clicks $0.61, previews $0.06, total $1.04."""
    suffix = secrets.token_hex(2)
    names = {"orders": f"orders-{suffix}", "clicks": f"clicks-{suffix}"}
    ids = {}
    for role, name in names.items():
        created = server.http.post("/pipelines", json={"name": name, "sql": SQL, "stopped": True})
        assert created.status_code == 201, created.text
        ids[role] = created.json()["id"]
    tenant_id = server.http.get("/me").json()["tenant_id"]
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    month_start = now.replace(day=1, hour=0, minute=0)
    recent = max(month_start, now - timedelta(minutes=5))  # in the last two hours' chart
    write_usage(database, tenant_id, ids["orders"], [
        (month_start, "compute_unit_seconds", HOUR_S), (month_start, "events_in", 2_000_000),
        (month_start, "events_out", 1_000_000), (month_start, "state_gb_seconds", GIB_MONTH_S),
        (recent, "compute_unit_seconds", HOUR_S)])
    write_usage(database, tenant_id, ids["clicks"], [
        (recent, "compute_unit_seconds", 5 * HOUR_S), (recent, "events_in", 1_000_000)])
    write_usage(database, tenant_id, None, [
        (recent, "compute_unit_seconds", HOUR_S / 2), (recent, "preview_seconds", 600)])
    return names


def dollars(amount: float) -> str:
    return f"${amount:,.2f}"


def quantity(value: float) -> str:
    """As the console writes SCU-hours: two decimals from 1, two significant digits below."""
    return f"{value:.2f}" if value >= 1 else f"{value:.2g}"


def expected_rows(usage: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The API's usage per pipeline (previews as "previews") as the table should show it."""
    rows: dict[str, dict[str, float]] = {}
    for item in usage["items"]:
        label = item["pipeline_name"] if item["pipeline_id"] else "previews"
        row = rows.setdefault(label, {"cost": 0.0})
        row[item["dimension"]] = row.get(item["dimension"], 0.0) + item["quantity"]
        row["cost"] += item["cost"]
    return {label: {
        "compute_unit_seconds": quantity(row.get("compute_unit_seconds", 0) / HOUR_S),
        "events_in": f"{int(row['events_in']):,}" if "events_in" in row else "—",
        "cost": dollars(row["cost"]),
    } for label, row in rows.items()}


def open_page(page: Page, link: str, heading: str) -> None:
    """Go to a page by the navigation, as a user does."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name=link, exact=True).click()
    expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()


def test_usage_budget_banner_invoices_and_quotas(server: ServedTenant, database: Database,
                                                 watch: PageWatch, tmp_path: Path) -> None:
    page = watch.page
    names = seed_usage(server, database)
    usage = server.http.get("/usage").json()
    assert round(usage["total_cost"], 6) == 1.04, usage
    sign_in(page, server)
    expect(page.get_by_test_id("budget-banner")).to_have_count(0)  # no budget yet

    # Usage: each pipeline's figures and cost, as the API has them.
    open_page(page, "Usage", "Usage")
    table = page.get_by_role("table", name="Usage by pipeline")
    for label, row in expected_rows(usage).items():
        shown = table.locator(f"tbody tr[data-pipeline='{label}']")
        for dimension in ("compute_unit_seconds", "events_in"):
            expect(shown.locator(f"[data-dimension={dimension}]")).to_have_text(row[dimension])
        expect(shown.get_by_test_id("cost")).to_have_text(row["cost"])
    expect(table.locator("tbody tr").last).to_have_attribute("data-pipeline", "previews")
    expect(table.locator("tfoot").get_by_test_id("cost")).to_have_text(dollars(usage["total_cost"]))
    expect(page.get_by_test_id("cost-to-date")).to_have_text(dollars(usage["total_cost"]))
    expect(page.get_by_test_id("forecast")).to_contain_text("(forecast)")
    expect(page.get_by_test_id("forecast-note")).to_contain_text("It is a forecast, not a bill")
    expect(page.get_by_test_id("budget")).to_have_text("none set")
    assert page.locator(".chart canvas").count() == 4
    expect(page.locator("h1:focus")).to_have_count(1)  # still focused once the page filled in
    assert page.evaluate(UNLABELLED_CONTROLS_JS) == []
    with page.expect_response(lambda r: "granularity=minute" in r.url and r.ok):
        page.get_by_label("Last 2 hours, by minute").check()
    expect(page.get_by_text("Each minute of the last 2 hours (UTC).")).to_be_visible()
    watch.rendered("usage-minutes")
    page.get_by_label("This month, by day").check()
    expect(page.get_by_text("Each day of this month (UTC).")).to_be_visible()

    # A budget of $2.00: the month's $1.04 crosses its 50 % threshold once the
    # scheduler checks budgets (after a metering pass); the banner then shows everywhere.
    page.get_by_label("Monthly budget (USD)").fill("2")
    page.get_by_label("Alert thresholds (%)").fill("50, 80, 100")
    page.get_by_role("button", name="Set budget").click()
    expect(page.get_by_role("status").filter(has_text="Budget set.")).to_be_visible()
    expect(page.get_by_test_id("budget-summary")).to_contain_text("$2.00 a month")
    expect(page.get_by_test_id("budget")).to_have_text("$2.00 · 52 % used")
    assert server.http.get("/budget").json()["amount"] == 2
    SqlControlStore(database).enforce_budgets()
    open_page(page, "Pipelines", "Pipelines")
    banner = page.get_by_test_id("budget-banner")
    expect(banner).to_contain_text("Budget alert: this month's cost so far, $1.04, is 52 % of the "
                                   "budget of $2.00 (alert at 50 %).")
    open_page(page, "Usage", "Usage")
    expect(banner).to_be_visible()
    alerts = page.get_by_role("list", name="Budget alerts this month")
    expect(alerts).to_contain_text("50 % crossed")
    watch.rendered("usage")
    watch.document("usage")

    # The per-pipeline section: its month's figures, and its estimate, labelled so.
    estimate = server.http.get(f"/pipelines/{names['orders']}/estimate").json()
    page.get_by_role("table", name="Usage by pipeline").get_by_role(
        "link", name=names["orders"]).click()
    expect(page.get_by_role("heading", name=names["orders"], level=1)).to_be_visible()
    expect(page.get_by_test_id("usage-compute")).to_have_text("2.00 SCU-hours")
    expect(page.get_by_test_id("usage-events-in")).to_have_text("2,000,000")
    expect(page.get_by_test_id("usage-cost")).to_have_text(re.compile(r"\$0\.37$"))
    shown_estimate = page.get_by_test_id("pipeline-estimate")
    expect(shown_estimate).to_contain_text("Estimate: about ")
    expect(shown_estimate).to_contain_text(
        f"SCU at parallelism 1, {dollars(estimate['cost_per_hour'])} an hour or "
        f"{dollars(estimate['cost_per_month'])} a month")
    expect(shown_estimate).to_contain_text(f"An estimate, not a quote. Basis: {estimate['basis']}")
    watch.rendered("pipeline-usage")

    # A hard stop at $1.00: reached, so pipelines are stopped and starts refused.
    open_page(page, "Usage", "Usage")
    page.get_by_label("Monthly budget (USD)").fill("1")
    page.get_by_label("Hard stop").check()
    page.get_by_role("button", name="Change budget").click()
    expect(page.get_by_role("status").filter(has_text="Budget changed.")).to_be_visible()
    SqlControlStore(database).enforce_budgets()

    # Invoices: this month's, open, with its total; its lines, its JSON, its CSV.
    invoices = server.http.get("/invoices").json()
    period = invoices[0]["period"]
    open_page(page, "Invoices", "Invoices")
    expect(banner).to_contain_text("Budget reached: this month's cost so far, $1.04, has reached "
                                   "the budget of $1.00.")
    expect(banner).to_contain_text("Running pipelines were stopped")
    expect(banner).to_contain_text("starting a pipeline or a preview is refused")
    row = page.locator(f"tr[data-period='{period}']")
    expect(row).to_contain_text("open")
    expect(row.get_by_test_id("total")).to_have_text(dollars(invoices[0]["total"]))
    page.get_by_role("button", name=f"View {period}").click()
    invoice = page.get_by_test_id("invoice")
    expect(invoice.get_by_role("heading")).to_have_text(f"Invoice {period} (open)")
    expect(invoice.locator("tbody tr")).to_have_count(
        len(server.http.get(f"/invoices/{period}").json()["lines"]))
    invoice.get_by_text("JSON", exact=True).click()
    expect(invoice.locator("pre")).to_contain_text(f'"period": "{period}"')
    with page.expect_download() as download:
        page.get_by_role("button", name=f"Download {period} as CSV").click()
    assert download.value.suggested_filename == f"spate-invoice-{period}.csv"
    saved = tmp_path / "invoice.csv"
    download.value.save_as(saved)
    assert saved.read_text() == server.http.get(f"/invoices/{period}?format=csv").text
    expect(page.get_by_role("status").filter(has_text="Downloaded")).to_be_visible()
    assert page.evaluate(UNLABELLED_CONTROLS_JS) == []
    watch.rendered("invoices")
    watch.document("invoices")

    # Quotas: the plan, and each limit's value and use as the API has them.
    quotas = server.http.get("/quotas").json()
    open_page(page, "Quotas", "Quotas")
    expect(page.get_by_test_id("plan")).to_have_text(quotas["plan"])
    for limit in quotas["limits"]:
        shown = page.locator(f"tr[data-limit='{limit['limit']}']")
        value, current = limit["value"], limit["current"]
        expect(shown.get_by_test_id("value")).to_have_text(
            "no limit" if value is None else f"{value:,}")
        expect(shown.get_by_test_id("current")).to_have_text(
            "not counted" if current is None else f"{current:,}")
        expect(shown.get_by_role("meter")).to_have_count(
            0 if value is None or current is None else 1)
    expect(page.locator("tr[data-limit='pipelines'] [role=meter]")).to_have_attribute(
        "aria-valuenow", "2")
    watch.rendered("quotas")
    watch.document("quotas")

    # Removing the budget takes its banner away.
    open_page(page, "Usage", "Usage")
    page.get_by_role("button", name="Remove budget").click()
    expect(page.get_by_role("status").filter(has_text="Budget removed.")).to_be_visible()
    expect(banner).to_have_count(0)
    assert server.http.get("/budget").status_code == 404


def test_a_viewer_key_is_told_why_usage_and_invoices_are_refused(server: ServedTenant,
                                                                  watch: PageWatch) -> None:
    created = server.http.post("/api-keys", json={"name": f"viewer-{secrets.token_hex(2)}",
                                                   "role": "viewer"})
    assert created.status_code == 201, created.text
    key = created.json()["key"]
    as_viewer = {"Authorization": f"Bearer {key}"}
    page = watch.page
    sign_in(page, server, key)
    for link, path in (("Usage", "/usage"), ("Invoices", "/invoices")):
        answer = httpx.get(f"{server.url}/api/v1{path}", headers=as_viewer)
        assert answer.status_code == 403, answer.text
        open_page(page, link, link)
        refused = page.get_by_test_id("refused")
        expect(refused).to_contain_text(f"{link if link == 'Invoices' else 'Usage and costs'} "
                                        "are not available to this key")
        expect(refused).to_contain_text(answer.json()["error"]["message"])
        expect(page.get_by_test_id("budget-banner")).to_have_count(0)
    # Chromium logs each refused request; the page said why, which is the point.
    watch.problems = [p for p in watch.problems if "403" not in p]
    watch.rendered("usage-refused")
    open_page(page, "Quotas", "Quotas")  # every key reads its plan
    expect(page.locator("tr[data-limit='pipelines'] [data-testid=value]")).not_to_be_empty()


@pytest.mark.parametrize("path", ["/usage", "/invoices", "/quotas"])
def test_billing_pages_load_at_their_address(server: ServedTenant, path: str) -> None:
    # A reload, a bookmark or the sign-in page's ?next= lands here.
    shell = httpx.get(server.url + path)
    assert shell.status_code == 200 and '<main id="main"' in shell.text, (
        f"{path} is not served: add it to PAGES in api/http/routes/console.py")


def axes_of(page: Page, chart: str) -> list[dict[str, Any]]:
    """The y axes of a chart as drawn: each one's title and tick labels."""
    canvas = page.get_by_role("img", name=chart)
    # Drawn once laid out: at least two ticks on the first axis.
    expect(canvas).to_have_attribute("data-axes", re.compile(r'"ticks":\["[^"]*","'))
    axes: list[dict[str, Any]] = json.loads(str(canvas.get_attribute("data-axes")))
    return axes


def test_usage_axes_read_in_units_and_a_deleted_pipeline_by_its_name(
        shared_serve: ServeProcess, database: Database, watch: PageWatch) -> None:
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "usage-axes")
    try:
        names = {}
        for role in ("kept", "gone"):
            name = f"{role}-{secrets.token_hex(2)}"
            created = tenant.http.post("/pipelines", json={"name": name, "sql": SQL,
                                                           "stopped": True})
            assert created.status_code == 201, created.text
            # 20 s of compute and a little state held today: the axes must not read
            # 0.0056 SCU-hours or 6.0E-7 GiB.
            now = datetime.now(UTC).replace(second=0, microsecond=0)
            write_usage(database, tenant.tenant_id, created.json()["id"], [
                (now, "compute_unit_seconds", 20.0), (now, "state_gb_seconds", 0.05),
                (now, "events_in", 3)])
            names[role] = name
        assert tenant.http.delete(f"/pipelines/{names['gone']}").status_code == 204
        page = watch.page
        sign_in(page, tenant)
        open_page(page, "Usage", "Usage")

        [compute] = axes_of(page, "Compute units over time, stacked by pipeline")
        assert compute["title"] == "SCU-seconds", compute
        [state] = axes_of(page, "State held over time (average), by pipeline")
        # Bytes, KiB or MiB: how much the average is depends on how much of today is over.
        assert state["title"] in {"bytes (average)", "KiB (average)", "MiB (average)"}, state
        [events] = axes_of(page, "Events read and written over time")
        [cost] = axes_of(page, "Cost to date, the linear forecast to the month's end and the "
                               "budget")
        for axis in (compute, state, events, cost):
            assert len(axis["ticks"]) >= 2, axis
            for tick in axis["ticks"]:
                # Plain numbers (or money), never in exponent notation.
                assert re.fullmatch(r"\$?-?[\d,]*\.?\d*", tick), axis
        assert max(float(t.replace(",", "")) for t in compute["ticks"] if t) >= 40
        with page.expect_response(lambda r: "granularity=minute" in r.url and r.ok):
            page.get_by_label("Last 2 hours, by minute").check()
        expect(page.get_by_text("Each minute of the last 2 hours (UTC).")).to_be_visible()
        [minutes] = axes_of(page, "Compute units over time, stacked by pipeline")
        assert minutes["title"] == "SCU-seconds" and all("e" not in t.lower()
                                                         for t in minutes["ticks"]), minutes

        # The deleted pipeline keeps its row under its name, marked deleted and not linked
        # (its page is gone); the live one links to its page.
        table = page.get_by_role("table", name="Usage by pipeline")
        gone = table.locator(f"tbody tr[data-pipeline='{names['gone']} (deleted)']")
        expect(gone.locator("th")).to_have_text(f"{names['gone']} (deleted)")
        expect(gone.get_by_role("link")).to_have_count(0)
        expect(table.get_by_role("link", name=names["kept"], exact=True)).to_be_visible()
        assert "deleted pipeline 0" not in page.content()
        watch.rendered("usage-axes")
    finally:
        tenant.close()
