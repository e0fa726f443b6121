// A pipeline's usage this month (compute, events, state, cost) and the estimate of
// what its compute costs at its parallelism, on its page. Both are the tenant admin's.

import { ApiError, describe, type Estimate, get, type Usage } from "../api";
import { h, replace } from "../dom";
import { formatCount, formatMoney, formatQuantity } from "../format";
import { allows, refusal } from "../roles";
import { monthName } from "../usageSeries";

export function usageSection(pipelineId: string, name: string, role: string | null): HTMLElement {
  const figures = h("div", { "data-testid": "pipeline-usage" }, h("p", { class: "muted" }, "Reading usage…"));
  const estimate = h("p", { "data-testid": "pipeline-estimate" });
  const section = h("section", { "aria-labelledby": "usage-heading" },
    h("h2", { id: "usage-heading" }, "Usage this month"), figures, estimate,
    h("p", { class: "muted" }, "All pipelines' usage, and the budget: ", h("a", { href: "/usage" }, "Usage"), "."));
  if (!allows(role, "billing")) {
    // Not asked for: the API refuses this key usage and costs.
    replace(figures, h("p", { class: "muted" }, `Usage and costs are not shown. ${refusal(role, "billing")}`));
    return section;
  }
  void Promise.allSettled([
    get<Usage>(`/usage?granularity=day&pipeline_id=${encodeURIComponent(pipelineId)}`),
    get<Estimate>(`/pipelines/${encodeURIComponent(name)}/estimate`),
  ]).then(([usage, estimated]) => {
    if (usage.status === "fulfilled") replace(figures, usageFigures(usage.value));
    else replace(figures, unavailable(usage.reason));
    if (estimated.status === "fulfilled") replace(estimate, estimateText(estimated.value));
    else if (usage.status === "fulfilled") replace(estimate, unavailable(estimated.reason));
  });
  return section;
}

function usageFigures(usage: Usage): HTMLElement {
  const totals = usage.totals;
  const money = (amount: number) => formatMoney(amount, usage.currency);
  const items: [string, string, string][] = [
    ["Compute", `${formatQuantity((totals.compute_unit_seconds ?? 0) / 3600)} SCU-hours`, "usage-compute"],
    ["Events in", formatCount(totals.events_in ?? 0), "usage-events-in"],
    ["Events out", formatCount(totals.events_out ?? 0), "usage-events-out"],
    ["State", `${formatQuantity((totals.state_gb_seconds ?? 0) / 3600)} GiB-hours`, "usage-state"],
    [`Cost in ${monthName(usage)}`, money(usage.total_cost), "usage-cost"],
  ];
  return h("dl", { class: "summary" }, items.map(([term, value, id]) => h("div", {},
    h("dt", {}, term), h("dd", { "data-testid": id }, value))));
}

function estimateText(estimate: Estimate): (HTMLElement | string)[] {
  const money = (amount: number) => formatMoney(amount, estimate.currency);
  return [h("strong", {}, "Estimate: "),
    `about ${formatQuantity(estimate.compute_units)} SCU at parallelism ${estimate.parallelism}, `,
    `${money(estimate.cost_per_hour)} an hour or ${money(estimate.cost_per_month)} a month for compute `,
    "(state and events are billed on top). ",
    h("span", { class: "muted" }, `An estimate, not a quote. Basis: ${estimate.basis}.`)];
}

function unavailable(error: unknown): HTMLElement {
  const forbidden = error instanceof ApiError && error.status === 403;
  return h("p", { class: forbidden ? "muted" : "error" },
    forbidden ? `Usage and costs are the tenant admin's: ${describe(error)}` : `Not read: ${describe(error)}`);
}
