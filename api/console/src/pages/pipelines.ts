// The pipelines list: each pipeline's state, rates and last error, refreshed live.

import { get, type Page, type Pipeline } from "../api";
import { formatRate, h, replace } from "../dom";
import { every } from "../poll";

export function stateOf(pipeline: Pipeline): string {
  return pipeline.job?.state ?? (pipeline.desired_state === "running" ? "starting" : "stopped");
}

export function pipelinesPage(main: HTMLElement): () => void {
  const body = h("tbody");
  const status = h("p", { class: "muted", role: "status" });
  replace(main,
    h("div", { class: "page-head" },
      h("h1", {}, "Pipelines"),
      h("a", { href: "/pipelines/new", class: "button" }, "New pipeline")),
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
      h("td", {}, h("span", { class: `state state-${stateOf(pipeline)}` }, stateOf(pipeline))),
      h("td", { class: "num" }, formatRate(pipeline.job?.rows_in_per_s)),
      h("td", { class: "num" }, formatRate(pipeline.job?.rows_out_per_s)),
      h("td", { class: "num" }, pipeline.parallelism),
      h("td", { class: "error-text" }, pipeline.job?.failure_message ?? ""))));
    status.textContent = page.items.length === 0
      ? "No pipelines yet: write one with “New pipeline”." : "";
  });
}
