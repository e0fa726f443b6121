// A pipeline's detail: its operator graph with live rates and backpressure, the
// watermark lag, rows/s over time, its usage and cost this month, checkpoints,
// versions, errors, the lifecycle controls, and editing (a new SQL version) and
// deleting it.

import { type Checkpoint, get, type Job, type JobError, type JobMetrics, type Page, patch, type Pipeline,
  type PipelineVersion, post, type Validation, describe } from "../api";
import { ratesChart, ratesOf, recentRates } from "../chart";
import { field, h, replace } from "../dom";
import { firstLine, formatBytes, formatRate, formatTime } from "../format";
import { drawGraph, type GraphView } from "../graph";
import { every } from "../poll";
import { deletePanel, editPanel, jobIsActive, type Panel, versionRows } from "./pipelineActions";
import { usageSection } from "./pipelineUsage";
import { idleUntil, stateOf } from "./pipelines";

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
  const version = h("span", { class: "muted", "data-testid": "version" });
  const failure = h("div", { "aria-live": "polite" });
  const summary = h("dl", { class: "summary" });
  const notice = h("p", { role: "status", class: "muted" });
  const control = controls(path, notice);
  const panelBox = h("div");
  const graphBox = h("div", { class: "graph-box" });
  const canvas = h("canvas", { "aria-label": "Input and output rows per second over time", role: "img" });
  const chartEmpty = h("p", { class: "chart-empty muted" }, "No committed epochs yet.");
  const checkpoints = h("tbody");
  const versions = h("tbody");
  const errors = h("ul", { class: "errors" }, h("li", { class: "muted" }, "No runs yet."));

  // One panel (edit or delete) at a time, under the heading; its buttons toggle it.
  let panel: Panel | null = null;
  const closePanel = () => {
    panel?.close();
    panel = null;
    replace(panelBox);
  };
  const openPanel = (make: () => Panel) => {
    closePanel();
    panel = make();
    replace(panelBox, panel.element);
    panel.element.querySelector<HTMLElement>("h2")?.setAttribute("tabindex", "-1");
    panel.element.querySelector<HTMLElement>("h2")?.focus();
  };
  let versionList: PipelineVersion[] = [];
  const showVersions = () => replace(versions, versionRows(versionList, pipeline.version, runningVersion));
  const loadVersions = async () => {
    versionList = (await get<Page<PipelineVersion>>(`${path}/versions?limit=200`)).items;
    showVersions();
  };
  const edit = h("button", { type: "button", class: "secondary", onclick: () => openPanel(() =>
    editPanel(pipeline, (message) => {
      closePanel();
      notice.textContent = message;
      void refresh().then(loadVersions);
    }, closePanel)) }, "Edit SQL");
  const remove = h("button", { type: "button", class: "danger", onclick: () => openPanel(() =>
    deletePanel(pipeline, closePanel)) }, "Delete pipeline");

  control.update(pipeline);
  replace(main,
    h("div", { class: "page-head" },
      h("div", { class: "title" }, h("h1", {}, pipeline.name), version),
      h("div", { class: "actions" }, edit, remove)),
    panelBox,
    failure,
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
      h("div", { class: "chart" }, canvas, chartEmpty)),
    usageSection(pipeline.id, pipeline.name),
    h("section", { "aria-labelledby": "checkpoints-heading" },
      h("h2", { id: "checkpoints-heading" }, "Checkpoints"),
      h("div", { class: "scroll" }, h("table", { class: "data", "aria-labelledby": "checkpoints-heading" },
        h("thead", {}, h("tr", {}, ["Epoch", "Committed", "Duration (ms)", "State", "Rows in", "Rows out"]
          .map((label) => h("th", { scope: "col" }, label)))), checkpoints))),
    h("section", { "aria-labelledby": "errors-heading" }, h("h2", { id: "errors-heading" }, "Errors"), errors),
    h("section", { "aria-labelledby": "versions-heading" },
      h("h2", { id: "versions-heading" }, "SQL versions"),
      h("table", { class: "data", "aria-labelledby": "versions-heading" },
        h("thead", {}, h("tr", {}, ["Version", "Created", "In use", "SQL"]
          .map((label) => h("th", { scope: "col" }, label)))), versions)));

  let graph: GraphView | null = null;
  let graphSql: string | null = null;
  let runningVersion: number | null = null;
  const rates = ratesChart(canvas);
  let log: CheckpointLog | null = null;
  const refresh = async () => {
    pipeline = await get<Pipeline>(path);
    control.update(pipeline);
    const job = pipeline.job;
    // The graph is of the current version's SQL: redrawn when a new version is saved.
    if (pipeline.sql !== graphSql) {
      graphSql = pipeline.sql;
      graph = await planGraph(pipeline.sql, graphBox);
    }
    const [metrics, run] = job ? await Promise.all([get<JobMetrics>(`/jobs/${job.id}/metrics`),
      get<Job>(`/jobs/${job.id}`)]) : [null, null];
    // Which version the job runs, while it runs: a new version waits for a restart.
    const running = run && jobIsActive(pipeline) ? run.pipeline_version : null;
    if (running !== runningVersion) {
      runningVersion = running;
      showVersions();
    }
    version.textContent = `version ${pipeline.version}${runningVersion !== null && runningVersion !== pipeline.version
      ? ` · the job runs version ${runningVersion}` : ""}`;
    const recent = job && log?.jobId === job.id && jobIsActive(pipeline) ? recentRates(log.items) : null;
    showSummary(summary, pipeline, metrics, recent);
    showFailure(failure, pipeline);
    if (graph && metrics) {
      const perEpoch = metrics.rows_in && metrics.rows_in_per_s ? metrics.rows_in / metrics.rows_in_per_s : null;
      graph.update(metrics.operators, perEpoch, metrics.backpressure);
    }
    if (!job) return;
    if (log?.jobId !== job.id) log = new CheckpointLog(job.id);
    await log.refresh();
    const samples = ratesOf(log.items);
    rates.draw(samples);
    chartEmpty.hidden = samples.length > 0;
    replace(checkpoints, log.items.slice(-20).reverse().map((c) => h("tr", {},
      h("td", { class: "num" }, c.epoch), h("td", {}, formatTime(c.committed_at)),
      h("td", { class: "num" }, c.duration_ms), h("td", { class: "num" }, formatBytes(c.state_bytes)),
      h("td", { class: "num" }, c.rows_in), h("td", { class: "num" }, c.rows_out))));
    const jobErrors = await get<Page<JobError>>(`/jobs/${job.id}/errors?limit=200`);
    // Redrawn only when they change, so an opened "Detail" stays open.
    const seen = `${job.id}:${job.failure_message ?? ""}:${jobErrors.items.length}:${jobErrors.items.at(-1)?.at ?? ""}`;
    if (errors.dataset.seen === seen) return;
    errors.dataset.seen = seen;
    replace(errors, jobErrors.items.length === 0
      ? h("li", { class: "muted" }, job.failure_message ? "The failure above is the only one." : "No errors.")
      : jobErrors.items.slice(-20).reverse().map((e) => h("li", {},
          h("time", { datetime: e.at }, formatTime(e.at)), " ", messageWithDetail(e.message, e.detail))));
  };
  const stopPolling = every(2000, refresh);
  void loadVersions();
  return () => {
    stopPolling();
    closePanel();
    rates.destroy();
  };
}

/** A message's first line; the rest of it and any detail (a trace) behind "Detail". */
function messageWithDetail(message: string, detail: string): (HTMLElement | string)[] {
  const rest = [message.trim().split("\n").slice(1).join("\n"), detail.trim()].filter(Boolean).join("\n\n");
  return [h("span", { class: "message" }, firstLine(message)),
    rest ? h("details", {}, h("summary", {}, "Detail"), h("pre", {}, rest)) : ""];
}

/** A failed job's message, at the top of the page where it cannot be missed. */
function showFailure(box: HTMLElement, pipeline: Pipeline): void {
  const message = pipeline.job?.state === "failed" ? pipeline.job.failure_message ?? "the job failed" : null;
  if (box.dataset.message === (message ?? "")) return;  // unchanged: keep an opened "Detail"
  box.dataset.message = message ?? "";
  replace(box, message === null ? null : h("div", { class: "failure", role: "alert", "data-testid": "failure" },
    h("strong", {}, "The job failed: "), messageWithDetail(message, "")));
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

/** The pipeline at a glance. Rows/s are the last minute's when its checkpoints are known
 * (``recent``), else the latest epoch's. */
function showSummary(summary: HTMLElement, pipeline: Pipeline, metrics: JobMetrics | null,
                     recent: { rowsIn: number; rowsOut: number } | null): void {
  const lag = metrics?.watermark_us !== null && metrics?.watermark_us !== undefined && metrics.watermark_us >= END_OF_TIME_US
    ? "input ended" : metrics?.watermark_lag_s !== null && metrics?.watermark_lag_s !== undefined
      ? `${metrics.watermark_lag_s.toFixed(1)} s` : "—";
  const items: [string, string, string][] = [
    ["State", stateOf(pipeline) + idleUntil(pipeline), "state"],
    ["Should be", pipeline.desired_state + (pipeline.stop_mode ? ` (${pipeline.stop_mode})` : ""), "desired"],
    ["Parallelism", String(pipeline.job?.parallelism ?? pipeline.parallelism), "parallelism"],
    ["Epoch", metrics?.epoch === null || metrics?.epoch === undefined ? "—" : String(metrics.epoch), "epoch"],
    [recent ? "Input rows/s (1 min)" : "Input rows/s", formatRate(recent?.rowsIn ?? metrics?.rows_in_per_s), "rows-in"],
    [recent ? "Output rows/s (1 min)" : "Output rows/s", formatRate(recent?.rowsOut ?? metrics?.rows_out_per_s), "rows-out"],
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
        notice.className = "muted";
        notice.textContent = done;
      } catch (error) {
        notice.className = "error";
        notice.textContent = `${form.getAttribute("aria-label")} failed: ${describe(error)}`;
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
