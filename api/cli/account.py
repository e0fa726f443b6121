"""``spate quotas``, ``spate usage`` and ``spate invoices``: the tenant's plan, what it
used and what it was billed."""

from __future__ import annotations

import click

from spate.api.cli.common import (
    connect,
    connection_options,
    json_option,
    show_table,
    with_client,
)
from spate.api.client.sdk import SpateClient


@click.command("quotas")
@connection_options
@json_option
@click.pass_context
def quotas(ctx: click.Context, server: str, api_key: str | None, as_json: bool) -> None:
    """Show the tenant's plan: each limit, its value and the tenant's current use.

    A dash is a value without limit, or a use that is not counted (a source's
    rate is checked per source, the request rate per request). Any key's role
    may read it."""
    connect(ctx, server, api_key)
    _show_quotas(as_json)


@with_client
def _show_quotas(client: SpateClient, as_json: bool) -> None:
    answer = client.get("/quotas")
    if not as_json:
        click.echo(f"plan: {answer['plan']}")
    rows = [(limit["limit"], limit["value"], limit["current"]) for limit in answer["limits"]]
    show_table(answer, as_json, rows, ("LIMIT", "VALUE", "CURRENT"))


# -- usage and invoices --------------------------------------------------------------


@click.command("usage")
@connection_options
@click.option("--by", "granularity", type=click.Choice(("day", "minute")), default="day",
              show_default=True, help="Sum by day or by minute (two days at most).")
@click.option("--start", help="From (ISO time, UTC; default: the start of this month).")
@click.option("--end", help="Until (ISO time, UTC; default: now).")
@click.option("--pipeline-id", help="Only this pipeline (its id).")
@json_option
@click.pass_context
def usage(ctx: click.Context, server: str, api_key: str | None, granularity: str,
          start: str | None, end: str | None, pipeline_id: str | None,
          as_json: bool) -> None:
    """Show what the tenant's pipelines and previews used and cost, per period and
    dimension (docs/billing.md). Needs an admin or billing key."""
    connect(ctx, server, api_key)
    _show_usage(granularity, start, end, pipeline_id, as_json)


@with_client
def _show_usage(client: SpateClient, granularity: str, start: str | None, end: str | None,
                pipeline_id: str | None, as_json: bool) -> None:
    answer = client.get("/usage", granularity=granularity, start=start, end=end,
                        pipeline_id=pipeline_id)
    width = 16 if granularity == "minute" else 10
    rows = [(item["period_start"][:width].replace("T", " "),
             item["pipeline_name"] or ("(previews)" if item["pipeline_id"] is None
                                       else item["pipeline_id"]),
             item["dimension"], f"{item['quantity']:.6g}", f"{item['cost']:.4f}")
            for item in answer["items"]]
    show_table(answer, as_json, rows, ("PERIOD", "PIPELINE", "DIMENSION", "QUANTITY", "COST"))
    if not as_json:
        click.echo(f"total: {answer['total_cost']:.2f} {answer['currency']}")


@click.command("invoices")
@connection_options
@click.argument("period", required=False)
@click.option("--csv", "as_csv", is_flag=True, help="Print PERIOD's invoice as CSV.")
@json_option
@click.pass_context
def invoices(ctx: click.Context, server: str, api_key: str | None, period: str | None,
             as_csv: bool, as_json: bool) -> None:
    """List the tenant's invoices, or show PERIOD's (YYYY-MM) lines. Needs an admin or
    billing key."""
    connect(ctx, server, api_key)
    _show_invoices(period, as_csv, as_json)


@with_client
def _show_invoices(client: SpateClient, period: str | None, as_csv: bool,
                   as_json: bool) -> None:
    if period is None:
        listed = client.get("/invoices")
        show_table(listed, as_json, [(i["period"], i["state"], f"{i['total']:.2f}", i["currency"])
                                for i in listed], ("PERIOD", "STATE", "TOTAL", "CURRENCY"))
        return
    if as_csv:
        click.echo(client.get(f"/invoices/{period}", format="csv"), nl=False)
        return
    invoice = client.get(f"/invoices/{period}")
    rows = [(line["pipeline_name"] or ("(previews)" if line["pipeline_id"] is None
                                       else line["pipeline_id"]),
             line["dimension"], f"{line['quantity']:.6g}", line["unit"],
             f"{line['unit_price']:g}", f"{line['amount']:.4f}") for line in invoice["lines"]]
    show_table(invoice, as_json, rows, ("PIPELINE", "DIMENSION", "QUANTITY", "UNIT", "PRICE",
                                   "AMOUNT"))
    if not as_json:
        click.echo(f"{invoice['state']}: {invoice['total']:.2f} {invoice['currency']}")
