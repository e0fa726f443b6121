// The pipelines list: each pipeline's state, rates and last error, refreshed live.

import { get, type Page, type Pipeline } from "../api";
import { h, replace } from "../dom";
import { firstLine, formatRate, formatTime } from "../format";
import { every } from "../poll";

export function stateOf(pipeline: Pipeline): string {
  return pipeline.job?.state ?? (pipeline.desired_state === "running" ? "starting" : "stopped");
}

/** Whether the pipeline's job still runs (or is about to): deleting must stop it first. */
export function jobIsActive(pipeline: Pipeline): boolean {
  return pipeline.job?.active ?? false;
}

/** Whether the pipeline's job runs, so its rates and busy ratio are live; otherwise
 * (stopped, failed, idle, starting) they are a past epoch's, or none, and not shown. */
export function hasLiveFigures(pipeline: Pipeline): boolean {
  return pipeline.job?.live ?? false;
}

export function pipelinesPage(main: HTMLElement): () => void {
  const body = h("tbody");
  const status = h("p", { class: "muted", role: "status" });
  // The detail page sends a deleted pipeline's user here, to say it is gone.
  const deleted = new URLSearchParams(location.search).get("deleted");
  const flash = h("p", { role: "status", class: "ok", hidden: !deleted }, deleted ? `Pipeline ${deleted} deleted.` : "");
  replace(main,
    h("div", { class: "page-head" },
      h("h1", {}, "Pipelines"),
      h("a", { href: "/pipelines/new", class: "button" }, "New pipeline")),
    flash,
    h("table", { class: "data", "aria-label": "Pipelines" },
      h("thead", {}, h("tr", {},
        ["Name", "State", "Input rows/s", "Output rows/s", "Parallelism", "Last error"]
          .map((label) => h("th", { scope: "col" }, label)))),
      body),
    status);
  return every(2000, async () => {
    const page = await get<Page<Pipeline>>("/pipelines?limit=100");
    replace(body, page.items.map((pipeline) => h("tr", { "data-pipeline": pipeline.name },
      h("th", { scope: "row" }, h("a", { href: `/pipelines/${encodeURIComponent(pipeline.name)}` }, pipeline.name)),
      h("td", {}, h("span", { class: `state state-${stateOf(pipeline)}` }, stateOf(pipeline)),
        idleUntil(pipeline)),
      h("td", { class: "num", "data-testid": "rows-in" },
        hasLiveFigures(pipeline) ? formatRate(pipeline.job?.rows_in_per_s) : "—"),
      h("td", { class: "num", "data-testid": "rows-out" },
        hasLiveFigures(pipeline) ? formatRate(pipeline.job?.rows_out_per_s) : "—"),
      h("td", { class: "num" }, pipeline.parallelism),
      lastError(pipeline.job?.failure_message ?? null))));
    status.textContent = page.items.length === 0
      ? "No pipelines yet: write one with “New pipeline”." : "";
  });
}

/** An idle pipeline (no input, no compute) says when it resumes by itself. */
export function idleUntil(pipeline: Pipeline): string {
  const at = pipeline.job?.state === "idle" ? pipeline.job.resumes_at : null;
  return at ? ` until ${formatTime(at)}` : "";
}

/** A failure's first line (the engine's located message); the whole text on hover. */
function lastError(message: string | null): HTMLElement {
  if (!message) return h("td", {});
  return h("td", { class: "error-text", title: message }, firstLine(message));
}
