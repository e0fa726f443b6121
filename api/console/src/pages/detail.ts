// A pipeline's detail: its operator graph with live rates and backpressure, the
// watermark lag, rows/s over time, checkpoints, errors and the lifecycle controls.

import { type Checkpoint, get, type JobError, type JobMetrics, type Page, patch, type Pipeline, post,
  type Validation, describe } from "../api";
import { ratesChart, ratesOf } from "../chart";
import { field, formatBytes, formatRate, formatTime, h, replace } from "../dom";
import { drawGraph, type GraphView } from "../graph";
import { every } from "../poll";
import { stateOf } from "./pipelines";

/** Watermarks at or past this mean "all input ended" (the engine's end of time). */
const END_OF_TIME_US = 2 ** 62;

/** A job's checkpoints, read incrementally: pages are oldest first. */
class CheckpointLog {
  items: Checkpoint[] = [];
  private cursor: string | null = null;

  constructor(readonly jobId: string) {}

  async refresh(): Promise<void> {
    for (;;) {
      const query = `limit=200${this.cursor ? `&cursor=${encodeURIComponent(this.cursor)}` : ""}`;
      const page = await get<Page<Checkpoint>>(`/jobs/${this.jobId}/checkpoints?${query}`);
      const known = new Set(this.items.map((c) => c.epoch));
      this.items.push(...page.items.filter((c) => !known.has(c.epoch)));
      if (!page.next_cursor) return;
      this.cursor = page.next_cursor;
    }
  }
}

export async function detailPage(main: HTMLElement, params: Record<string, string>): Promise<() => void> {
  const name = params.name;
  const path = `/pipelines/${encodeURIComponent(name)}`;
  let pipeline: Pipeline;
  try {
    pipeline = await get<Pipeline>(path);
  } catch (error) {
    replace(main, h("h1", {}, name), h("p", { role: "alert", class: "error" }, describe(error)));
    return () => undefined;
  }
  const summary = h("dl", { class: "summary" });
  const notice = h("p", { role: "status", class: "muted" });
  const control = controls(path, notice);
  const graphBox = h("div", { class: "graph-box" });
  const canvas = h("canvas", { "aria-label": "Input and output rows per second over time", role: "img" });
  const checkpoints = h("tbody");
  const errors = h("ul", { class: "errors" }, h("li", { class: "muted" }, "No runs yet."));
  control.update(pipeline);
  replace(main,
    h("div", { class: "page-head" }, h("h1", {}, pipeline.name),
      h("span", { class: "muted" }, `version ${pipeline.version}`)),
    summary,
    control.element,
    notice,
    h("section", { "aria-labelledby": "graph-heading" }, h("h2", { id: "graph-heading" }, "Operators"),
      h("p", { class: "legend muted" },
        h("span", { class: "key spark" }, "Spark"), " native Spark SQL · ",
        h("span", { class: "key spate" }, "Spate"), " Spate operator or sink · fill: the job's busy ratio ",
        h("span", { class: "key low" }, "< 0.5"), " ", h("span", { class: "key medium" }, "< 0.8"), " ",
        h("span", { class: "key high" }, "≥ 0.8")),
      graphBox),
    h("section", { "aria-labelledby": "chart-heading" }, h("h2", { id: "chart-heading" }, "Rows per second"),
      h("div", { class: "chart" }, canvas)),
    h("section", { "aria-labelledby": "checkpoints-heading" },
      h("h2", { id: "checkpoints-heading" }, "Checkpoints"),
      h("div", { class: "scroll" }, h("table", { class: "data", "aria-labelledby": "checkpoints-heading" },
        h("thead", {}, h("tr", {}, ["Epoch", "Committed", "Duration (ms)", "State", "Rows in", "Rows out"]
          .map((label) => h("th", { scope: "col" }, label)))), checkpoints))),
    h("section", { "aria-labelledby": "errors-heading" }, h("h2", { id: "errors-heading" }, "Errors"), errors));

  const graph = await planGraph(pipeline.sql, graphBox);
  const rates = ratesChart(canvas);
  let log: CheckpointLog | null = null;
  const stopPolling = every(2000, async () => {
    pipeline = await get<Pipeline>(path);
    control.update(pipeline);
    const job = pipeline.job;
    const metrics = job ? await get<JobMetrics>(`/jobs/${job.id}/metrics`) : null;
    showSummary(summary, pipeline, metrics);
    if (graph && metrics) {
      const perEpoch = metrics.rows_in && metrics.rows_in_per_s ? metrics.rows_in / metrics.rows_in_per_s : null;
      graph.update(metrics.operators, perEpoch, metrics.backpressure);
    }
    if (!job) return;
    if (log?.jobId !== job.id) log = new CheckpointLog(job.id);
    await log.refresh();
    rates.draw(ratesOf(log.items));
    replace(checkpoints, log.items.slice(-20).reverse().map((c) => h("tr", {},
      h("td", { class: "num" }, c.epoch), h("td", {}, formatTime(c.committed_at)),
      h("td", { class: "num" }, c.duration_ms), h("td", { class: "num" }, formatBytes(c.state_bytes)),
      h("td", { class: "num" }, c.rows_in), h("td", { class: "num" }, c.rows_out))));
    const jobErrors = await get<Page<JobError>>(`/jobs/${job.id}/errors?limit=200`);
    replace(errors, jobErrors.items.length === 0 && !job.failure_message
      ? h("li", { class: "muted" }, "No errors.")
      : [job.failure_message ? h("li", { class: "error-text" }, job.failure_message) : null,
         ...jobErrors.items.slice(-20).reverse().map((e) => h("li", {},
           h("time", { datetime: e.at }, formatTime(e.at)), " ", e.message,
           e.detail ? h("details", {}, h("summary", {}, "Detail"), h("pre", {}, e.detail)) : null))]);
  });
  return () => {
    stopPolling();
    rates.destroy();
  };
}

async function planGraph(sql: string, box: HTMLElement): Promise<GraphView | null> {
  try {
    const validation = await post<Validation>("/pipelines/validate", { sql });
    if (!validation.plan) {
      replace(box, h("p", { class: "error-text" },
        validation.diagnostics.map((d) => `Line ${d.line}, column ${d.column}: ${d.message}`).join("; ")));
      return null;
    }
    const graph = drawGraph(validation.plan);
    replace(box, graph.element);
    return graph;
  } catch (error) {
    replace(box, h("p", { class: "error-text" }, `No graph: ${describe(error)}`));
    return null;
  }
}

function showSummary(summary: HTMLElement, pipeline: Pipeline, metrics: JobMetrics | null): void {
  const lag = metrics?.watermark_us !== null && metrics?.watermark_us !== undefined && metrics.watermark_us >= END_OF_TIME_US
    ? "input ended" : metrics?.watermark_lag_s !== null && metrics?.watermark_lag_s !== undefined
      ? `${metrics.watermark_lag_s.toFixed(1)} s` : "—";
  const items: [string, string, string][] = [
    ["State", stateOf(pipeline), "state"],
    ["Should be", pipeline.desired_state + (pipeline.stop_mode ? ` (${pipeline.stop_mode})` : ""), "desired"],
    ["Parallelism", String(pipeline.job?.parallelism ?? pipeline.parallelism), "parallelism"],
    ["Epoch", metrics?.epoch === null || metrics?.epoch === undefined ? "—" : String(metrics.epoch), "epoch"],
    ["Input rows/s", formatRate(metrics?.rows_in_per_s), "rows-in"],
    ["Output rows/s", formatRate(metrics?.rows_out_per_s), "rows-out"],
    ["Busy ratio", metrics?.backpressure === null || metrics?.backpressure === undefined ? "—" : metrics.backpressure.toFixed(2), "busy"],
    ["Watermark lag", lag, "lag"],
    ["State written", formatBytes(metrics?.state_bytes), "state-bytes"],
  ];
  replace(summary, items.map(([term, value, id]) => h("div", {},
    h("dt", {}, term), h("dd", { "data-testid": id }, value))));
}

/** Stop (with a mode), start, restart (with or without state) and rescale. */
function controls(path: string, notice: HTMLElement): { element: HTMLElement; update: (p: Pipeline) => void } {
  const act = (form: HTMLFormElement, action: () => Promise<unknown>, done: string) => {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await action();
        notice.textContent = done;
      } catch (error) {
        notice.textContent = `Failed: ${describe(error)}`;
      }
    });
    return form;
  };
  const mode = h("select", { name: "stop_mode" },
    h("option", { value: "checkpoint" }, "checkpoint: after the epoch in progress commits"),
    h("option", { value: "graceful" }, "graceful: checkpoint, or immediate if that takes too long"),
    h("option", { value: "immediate" }, "immediate: now; the epoch in progress is replayed"),
    h("option", { value: "force" }, "force: kill the job"));
  const keepState = h("input", { type: "checkbox", id: "keep-state", name: "with_state", checked: true });
  const scale = h("input", { type: "number", name: "parallelism", min: 1, max: 128, value: 2, required: true });
  const stop = act(h("form", { "aria-label": "Stop" }, field("Stop mode", mode),
    h("button", { type: "submit" }, "Stop")), () => patch(path, { stop: mode.value }), "Stop requested.");
  const start = act(h("form", { "aria-label": "Start" }, h("button", { type: "submit" }, "Start")),
    () => patch(path, { stop: "none" }), "Start requested.");
  const element = h("div", { class: "controls" }, stop, start,
    act(h("form", { "aria-label": "Restart" },
      h("div", { class: "check" }, keepState, h("label", { for: "keep-state" }, "Keep state")),
      h("button", { type: "submit" }, "Restart")),
      () => post(`${path}/restart`, { with_state: keepState.checked }), "Restart requested."),
    act(h("form", { "aria-label": "Rescale" }, field("New parallelism", scale), h("button", { type: "submit" }, "Rescale")),
      () => post(`${path}/rescale`, { parallelism: Number(scale.value) }), "Rescale requested."));
  // Offer Stop to a pipeline that should run and Start to one that should not.
  const update = (pipeline: Pipeline) => {
    stop.hidden = pipeline.desired_state !== "running";
    start.hidden = pipeline.desired_state === "running";
  };
  return { element, update };
}
