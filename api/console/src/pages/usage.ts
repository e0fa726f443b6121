// Usage: what the tenant's pipelines and previews used and cost this month — compute
// units stacked by pipeline, events in and out, state held, the cost to date against
// the budget with a linear forecast to the month's end — a table per pipeline, and the
// budget itself. Usage is the tenant admin's: other keys see the API's refusal.

import { ApiError, type Budget, describe, get, type Usage } from "../api";
import { refreshBanner } from "../banner";
import { type SeriesChart, seriesChart, type SeriesLine } from "../chart";
import { append, h, replace } from "../dom";
import { BYTE_UNITS, formatCount, formatMoney, formatQuantity, formatTime, percentOf, plainNumber, SCU_UNITS,
  unitFor } from "../format";
import { every } from "../poll";
import { averageGiB, byPipeline, costForecast, DIMENSIONS, monthName, periodLabel, periods,
  seriesByPipeline, seriesTotal } from "../usageSeries";
import { budgetPanel, readBudget } from "./budget";

/** Usage is read again this often: the meter charges every 15 s by default. */
const REFRESH_MS = 30_000;
const BUDGET_COLOUR = "#b42318";

type Range = "month" | "hours";

/** What a key that may not read something sees: the API's reason, and what to do. */
export function refusal(error: unknown, what: string): HTMLElement {
  const forbidden = error instanceof ApiError && error.status === 403;
  return h("div", { class: "failure", role: "alert", "data-testid": "refused" },
    h("strong", {}, forbidden ? `${what} are not available to this key: ` : `${what} could not be read: `),
    describe(error),
    forbidden ? h("p", {}, "Sign in with an admin key of the tenant to see them.") : null);
}

/** A chart in its box, with what to say while it has nothing to draw. */
function chartBox(label: string, chart: (canvas: HTMLCanvasElement) => SeriesChart):
    { element: HTMLElement; chart: SeriesChart; empty: HTMLElement } {
  const canvas = h("canvas", { "aria-label": label, role: "img" });
  const empty = h("p", { class: "chart-empty muted" }, "No usage in this span.");
  return { element: h("div", { class: "chart" }, canvas, empty), chart: chart(canvas), empty };
}

export function usagePage(main: HTMLElement): () => void {
  const heading = h("h1", {}, "Usage");
  const span = h("span", { class: "muted", "data-testid": "usage-span" });
  const status = h("p", { class: "muted", role: "status" }, "Reading usage…");
  replace(main, h("div", { class: "page-head" }, h("div", { class: "title" }, heading, span)), status);
  let range: Range = "month";
  let budget: Budget | null = null;
  let month: Usage | null = null;
  let view: UsageView | null = null;
  let refused = false;
  let left = false;

  const load = async () => {
    if (refused || left) return;
    try {
      month = await get<Usage>("/usage?granularity=day");
      const recent = range === "hours" ? await get<Usage>(lastTwoHours()) : null;
      if (!view) budget = await readBudget();
      if (left) return;  // the page was left while this loaded: draw nothing
      if (!view) {
        view = usageView(main, span, (chosen) => {
          range = chosen;
          void load();
        }, (changed) => {
          budget = changed;
          if (month && view) view.showCost(month, budget);
          void refreshBanner("admin");
        }, budget);
      }
      view.show(month, recent ?? month, budget);
      status.textContent = "";
    } catch (error) {
      if (left) return;
      if (view) {
        status.textContent = `Could not read usage: ${describe(error)}`;
        return;
      }
      refused = true;
      replace(main, heading, refusal(error, "Usage and costs"));
    }
  };
  const stop = every(REFRESH_MS, load);
  return () => {
    left = true;
    stop();
    view?.destroy();
  };
}

/** The usage of the last two hours, by minute (UTC minutes). */
function lastTwoHours(): string {
  const start = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 2 * 3_600_000).toISOString();
  return `/usage?granularity=minute&start=${encodeURIComponent(start)}`;
}

interface UsageView {
  show: (month: Usage, overTime: Usage, budget: Budget | null) => void;
  showCost: (month: Usage, budget: Budget | null) => void;
  destroy: () => void;
}

/** The page's parts, built once; ``show`` fills them with the latest usage. */
function usageView(main: HTMLElement, span: HTMLElement,
                   onRange: (range: Range) => void, onBudget: (budget: Budget | null) => void,
                   budget: Budget | null): UsageView {
  let currency = "USD";
  const summary = h("dl", { class: "summary" });
  const compute = chartBox("Compute units over time, stacked by pipeline", (canvas) =>
    seriesChart(canvas, { kind: "bar", stacked: true,
      axis: { unit: (max) => unitFor(max, SCU_UNITS), title: "{unit}", format: plainNumber } }));
  const events = chartBox("Events read and written over time", (canvas) =>
    seriesChart(canvas, { kind: "line", stacked: false,
      axis: { title: "events", format: (v) => Number.isInteger(v) ? formatCount(v) : "" } }));
  const state = chartBox("State held over time (average), by pipeline", (canvas) =>
    seriesChart(canvas, { kind: "line", stacked: false,
      axis: { unit: (max) => unitFor(max, BYTE_UNITS), title: "{unit} (average)", format: plainNumber } }));
  const cost = chartBox("Cost to date, the linear forecast to the month's end and the budget", (canvas) =>
    seriesChart(canvas, { kind: "line", stacked: false,
      axis: { title: "cost", format: (v) => formatMoney(v, currency) } }));
  const forecastNote = h("p", { class: "muted", "data-testid": "forecast-note" });
  const table = h("div", { class: "scroll" });
  const rangeNote = h("p", { class: "muted" });
  const budgetBox = h("div");
  replace(budgetBox, budgetPanel(budget, currency, onBudget));

  // Appended under the heading and status already shown, so the heading keeps its focus.
  append(main, [summary,
    h("section", { "aria-labelledby": "over-time-heading" },
      h("h2", { id: "over-time-heading" }, "Over time"), rangeChoice(onRange), rangeNote,
      h("h3", {}, "Compute units, stacked by pipeline"), compute.element,
      h("h3", {}, "Events in and out"), events.element,
      h("h3", {}, "State held (average over each period)"), state.element),
    h("section", { "aria-labelledby": "cost-heading" },
      h("h2", { id: "cost-heading" }, "Cost to date and forecast"), cost.element, forecastNote),
    h("section", { "aria-labelledby": "budget-heading" }, h("h2", { id: "budget-heading" }, "Budget"), budgetBox),
    h("section", { "aria-labelledby": "by-pipeline-heading" },
      h("h2", { id: "by-pipeline-heading" }, "By pipeline, this month"), table)]);

  const showCost = (month: Usage, current: Budget | null) => {
    const forecast = costForecast(month);
    const lines: SeriesLine[] = [
      { label: "Cost to date", data: forecast.toDate },
      { label: "Forecast (linear)", data: forecast.forecast, dashed: true },
    ];
    if (current) {
      lines.push({ label: "Budget", data: forecast.labels.map(() => current.amount), dashed: true,
        colour: BUDGET_COLOUR });
    }
    cost.chart.draw(forecast.labels, lines);
    cost.empty.hidden = true;
    showSummary(summary, month, current);
    forecastNote.textContent = `Forecast: the cost so far, ${formatMoney(forecast.costSoFar, month.currency)}, `
      + `over the ${(forecast.elapsedFraction * 100).toFixed(1)} % of ${monthName(month)} that has passed `
      + `gives ${formatMoney(forecast.forecastTotal, month.currency)} by the month's end, if usage goes on `
      + "as so far. It is a forecast, not a bill.";
  };
  const show = (month: Usage, overTime: Usage, current: Budget | null) => {
    span.textContent = `${monthName(month)} (UTC), to ${formatTime(month.end)}`;
    if (month.currency !== currency) {
      currency = month.currency;
      replace(budgetBox, budgetPanel(current, currency, onBudget));
    }
    const labels = periods(overTime).map((at) => periodLabel(at, overTime.granularity));
    rangeNote.textContent = overTime.granularity === "day"
      ? "Each day of this month (UTC)." : "Each minute of the last 2 hours (UTC).";
    compute.chart.draw(labels, seriesByPipeline(overTime, "compute_unit_seconds"));
    events.chart.draw(labels, [seriesTotal(overTime, "events_in", "Events in"),
      seriesTotal(overTime, "events_out", "Events out")]);
    state.chart.draw(labels, seriesByPipeline(overTime, "state_gb_seconds", averageGiB(overTime)));
    const empty = overTime.items.length === 0;
    for (const box of [compute, events, state]) box.empty.hidden = !empty;
    showCost(month, current);
    replace(table, pipelineTable(month));
  };
  const destroy = () => {
    for (const box of [compute, events, state, cost]) box.chart.destroy();
  };
  return { show, showCost, destroy };
}

/** This month or the last two hours: the three charts over time follow the choice. */
function rangeChoice(onRange: (range: Range) => void): HTMLElement {
  const option = (value: Range, label: string, checked: boolean) => {
    const id = `range-${value}`;
    return h("span", { class: "check" },
      h("input", { type: "radio", name: "range", id, value, checked, onchange: () => onRange(value) }),
      h("label", { for: id }, label));
  };
  return h("fieldset", { class: "range" }, h("legend", {}, "Span"),
    option("month", "This month, by day", true), option("hours", "Last 2 hours, by minute", false));
}

function showSummary(summary: HTMLElement, month: Usage, budget: Budget | null): void {
  const forecast = costForecast(month);
  const money = (amount: number) => formatMoney(amount, month.currency);
  const items: [string, string, string][] = [
    ["Cost to date", money(month.total_cost), "cost-to-date"],
    [`Forecast for ${monthName(month)}`, `${money(forecast.forecastTotal)} (forecast)`, "forecast"],
    ["Budget", budget ? `${money(budget.amount)} · ${percentOf(month.total_cost, budget.amount)} % used`
      : "none set", "budget"],
    ["Compute", `${formatQuantity((month.totals.compute_unit_seconds ?? 0) / 3600)} SCU-hours`, "compute"],
    ["Events in", formatCount(month.totals.events_in ?? 0), "events-in"],
    ["Events out", formatCount(month.totals.events_out ?? 0), "events-out"],
  ];
  replace(summary, items.map(([term, value, id]) => h("div", {},
    h("dt", {}, term), h("dd", { "data-testid": id }, value))));
}

/** Each pipeline's (and the previews') use of every dimension this month, and its cost. */
function pipelineTable(month: Usage): HTMLElement {
  const rows = byPipeline(month);
  const shown = DIMENSIONS.filter((d) => rows.some((row) => row.quantities[d.key] !== undefined)
    || ["compute_unit_seconds", "events_in", "events_out", "state_gb_seconds"].includes(d.key));
  const amount = (key: string, value: number | undefined) => value === undefined ? "—"
    : key.startsWith("events_") ? formatCount(value) : formatQuantity(value);
  const headings = h("tr", {}, h("th", { scope: "col" }, "Pipeline"),
    shown.map((d) => h("th", { scope: "col", class: "num", title: month.units[d.key] ?? "" },
      d.label, h("br"), h("small", { class: "muted" }, d.unit))),
    h("th", { scope: "col", class: "num" }, "Cost"));
  const body = rows.map((row) => h("tr", { "data-pipeline": row.label },
    h("th", { scope: "row" }, row.name === null ? h("em", {}, row.label)
      : h("a", { href: `/pipelines/${encodeURIComponent(row.name)}` }, row.label)),
    shown.map((d) => h("td", { class: "num", "data-dimension": d.key }, amount(d.key, row.quantities[d.key]))),
    h("td", { class: "num", "data-testid": "cost" }, formatMoney(row.cost, month.currency))));
  const total = h("tr", { "data-pipeline": "total" }, h("th", { scope: "row" }, "Total"),
    shown.map((d) => h("td", { class: "num", "data-dimension": d.key },
      amount(d.key, month.totals[d.key] === undefined ? undefined : month.totals[d.key] / d.perUnit))),
    h("td", { class: "num", "data-testid": "cost" }, formatMoney(month.total_cost, month.currency)));
  if (rows.length === 0) {
    return h("p", { class: "muted" }, "No usage this month yet: pipelines and previews are metered while they run.");
  }
  return h("table", { class: "data", "aria-label": "Usage by pipeline" },
    h("thead", {}, headings), h("tbody", {}, body), h("tfoot", {}, total));
}
