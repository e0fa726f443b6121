// Quotas: the tenant's plan, and each of its limits with the tenant's current use of
// it as a bar. Every key may read them.

import { describe, get, type QuotaLimit, type Quotas } from "../api";
import { h, replace } from "../dom";
import { formatCount } from "../format";

/** What each limit counts, as people say it. */
const LIMITS: Record<string, { label: string; note: string }> = {
  pipelines: { label: "Pipelines", note: "pipelines stored" },
  running_pipelines: { label: "Running pipelines", note: "should be running (a failed one counts until stopped)" },
  compute_units: { label: "Compute units", note: "one per task: the parallelism of running pipelines and live previews" },
  parallelism: { label: "Parallelism", note: "per pipeline or preview; use is the largest running" },
  previews: { label: "Live previews", note: "previews streaming now" },
  source_rate: { label: "Generator source rate", note: "events a second per impulse or nexmark source; checked per source" },
  api_requests_per_minute: { label: "API requests a minute", note: "checked per request" },
};

export async function quotasPage(main: HTMLElement): Promise<void> {
  const heading = h("h1", {}, "Quotas");
  let quotas: Quotas;
  try {
    quotas = await get<Quotas>("/quotas");
  } catch (error) {
    replace(main, heading, h("p", { role: "alert", class: "error" }, `Could not read the quotas: ${describe(error)}`));
    return;
  }
  replace(main, h("div", { class: "page-head" }, h("div", { class: "title" }, heading,
    h("span", { class: "muted" }, "Plan ", h("strong", { "data-testid": "plan" }, quotas.plan)))),
    h("p", { class: "muted" }, "Limits are checked when something is admitted (a pipeline created or started, ",
      "a preview opened); lowering a plan never stops what runs."),
    h("table", { class: "data quotas", "aria-label": "Quotas" },
      h("thead", {}, h("tr", {}, ["Limit", "Value", "In use", "Use"].map((label) => h("th", { scope: "col" }, label)))),
      h("tbody", {}, quotas.limits.map(limitRow))));
}

function limitRow(limit: QuotaLimit): HTMLElement {
  const about = LIMITS[limit.limit] ?? { label: limit.limit, note: "" };
  const counted = limit.current !== null && limit.value !== null;
  const share = counted && limit.value ? Math.min((limit.current ?? 0) / limit.value, 1) : 0;
  const level = share >= 0.9 ? "high" : share >= 0.7 ? "medium" : "low";
  return h("tr", { "data-limit": limit.limit },
    h("th", { scope: "row" }, about.label, h("br"), h("small", { class: "muted" }, about.note)),
    h("td", { class: "num", "data-testid": "value" }, limit.value === null ? "no limit" : formatCount(limit.value)),
    h("td", { class: "num", "data-testid": "current" }, limit.current === null ? "not counted" : formatCount(limit.current)),
    h("td", { class: "use" }, counted
      ? h("div", { class: `bar bar-${level}`, role: "meter", "aria-valuemin": 0, "aria-valuemax": limit.value ?? 0,
          "aria-valuenow": limit.current ?? 0, "aria-label": `${about.label}: ${limit.current} of ${limit.value}` },
          h("span", { style: `width: ${(share * 100).toFixed(1)}%` }))
      : null));
}
