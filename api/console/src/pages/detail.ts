// A pipeline's detail: the operator graph of the version its job runs, each operator with
// its own rates and busy ratio (and a new version's graph beside it while it waits for a
// restart), the watermark lag, rows/s over time, its usage and cost this month,
// checkpoints, versions, errors, the lifecycle controls, and editing (a new SQL version)
// and deleting it. A pipeline whose job does not run shows no live figures.

import { type Checkpoint, describe, get, type Job, type JobError, type JobMetrics, type OperatorMetrics, type Page,
  type Pipeline, type PipelineVersion } from "../api";
import { ratesChart, ratesOf, recentRates } from "../chart";
import { h, replace } from "../dom";
import { firstLine, formatBytes, formatRate, formatTime } from "../format";
import { every } from "../poll";
import { callerRole, gate, roleNote } from "../roles";
import { deletePanel, editPanel, type Panel, versionRows } from "./pipelineActions";
import { controls, Notice } from "./pipelineControls";
import { type GraphPanel, pipelineGraphs } from "./pipelineGraphs";
import { usageSection } from "./pipelineUsage";
import { hasLiveFigures, idleUntil, jobIsActive, stateOf } from "./pipelines";

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
  const role = await callerRole();
  const version = h("span", { class: "muted", "data-testid": "version" });
  const failure = h("div", { "aria-live": "polite" });
  const summary = h("dl", { class: "summary" });
  const notice = new Notice();
  const control = controls(path, notice, role, () => pipeline);
  const panelBox = h("div");
  const canvas = h("canvas", { "aria-label": "Input and output rows per second over time", role: "img" });
  const chartEmpty = h("p", { class: "chart-empty muted" }, "No committed epochs yet.");
  const checkpoints = h("tbody");
  const versions = h("tbody");
  const errors = h("ul", { class: "errors" }, h("li", { class: "muted" }, "No runs yet."));

  let versionList: PipelineVersion[] = [];
  let runningVersion: number | null = null;
  const showVersions = () => replace(versions, versionRows(versionList, pipeline.version, runningVersion));
  const loadVersions = async () => {
    versionList = (await get<Page<PipelineVersion>>(`${path}/versions?limit=200`)).items;
    showVersions();
  };
  const sqlOf = async (number: number) => {
    if (!versionList.some((v) => v.version === number)) await loadVersions();
    return versionList.find((v) => v.version === number)?.sql ?? pipeline.sql;
  };
  const graphs = pipelineGraphs(sqlOf);
  const panelsOf = runningGraphs();

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
  const edit = h("button", { type: "button", class: "secondary", onclick: () => openPanel(() =>
    editPanel(pipeline, (message, done) => {
      closePanel();
      notice.say(message, "muted", done);
      void refresh().then(loadVersions);
    }, closePanel)) }, "Edit SQL");
  const remove = h("button", { type: "button", class: "danger", onclick: () => openPanel(() =>
    deletePanel(pipeline, closePanel)) }, "Delete pipeline");
  gate(role, "write", edit, remove);

  control.update(pipeline);
  replace(main,
    h("div", { class: "page-head" },
      h("div", { class: "title" }, h("h1", {}, pipeline.name), version),
      h("div", { class: "actions" }, edit, remove)),
    roleNote(role, "write", "watch this pipeline", "changing it"),
    panelBox,
    failure,
    summary,
    control.element,
    notice.element,
    h("section", { "aria-labelledby": "graph-heading" }, h("h2", { id: "graph-heading" }, "Operators"),
      h("p", { class: "legend muted" },
        h("span", { class: "key spark" }, "Spark"), " native Spark SQL · ",
        h("span", { class: "key spate" }, "Spate"), " Spate operator or sink · each box: its own rows/s "
          + "and, for Spate operators and sinks, how busy its work kept it over the last minute ",
        h("span", { class: "key low" }, "< 0.5"), " ", h("span", { class: "key medium" }, "< 0.8"), " ",
        h("span", { class: "key high" }, "≥ 0.8")),
      graphs.element),
    h("section", { "aria-labelledby": "chart-heading" }, h("h2", { id: "chart-heading" }, "Rows per second"),
      h("div", { class: "chart" }, canvas, chartEmpty)),
    usageSection(pipeline.id, pipeline.name, role),
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

  const rates = ratesChart(canvas);
  let log: CheckpointLog | null = null;
  const refresh = async () => {
    pipeline = await get<Pipeline>(path);
    control.update(pipeline);
    const job = pipeline.job;
    const [metrics, run] = job ? await Promise.all([get<JobMetrics>(`/jobs/${job.id}/metrics`),
      get<Job>(`/jobs/${job.id}`)]) : [null, null];
    notice.check(pipeline, run);
    const live = hasLiveFigures(pipeline);
    // Which version the job runs, while it runs: a new version waits for a restart.
    const running = run && jobIsActive(pipeline) ? run.pipeline_version : null;
    if (running !== runningVersion) {
      runningVersion = running;
      showVersions();
    }
    version.textContent = `version ${pipeline.version}${runningVersion !== null && runningVersion !== pipeline.version
      ? ` · the job runs version ${runningVersion}` : ""}`;
    await graphs.show(await panelsOf(pipeline, run, metrics));
    // The last minute's rates: the operators' own (the graph's figures, so the two agree),
    // else from the checkpoints (a job from before operators reported them).
    const recent = !live ? null : operatorRates(metrics?.operators ?? [])
      ?? (job && log?.jobId === job.id ? recentRates(log.items) : null);
    showSummary(summary, pipeline, metrics, live, recent);
    showFailure(failure, pipeline);
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

/** The graphs a pipeline's page shows: the plan of the version its job runs, with the job's
 * figures (none when it does not run); while a restart's new job starts, the old job's
 * plan and figures too, as long as it runs; and a new version that waits for a restart
 * (or starts with one) beside the running one. */
function runningGraphs(): (pipeline: Pipeline, run: Job | null, metrics: JobMetrics | null)
    => Promise<GraphPanel[]> {
  let lastLive: { jobId: string; version: number } | null = null;
  return async (pipeline, run, metrics) => {
    const job = pipeline.job;
    const active = jobIsActive(pipeline);
    const live = hasLiveFigures(pipeline);
    const panels: GraphPanel[] = [];
    if (job && active && !live && lastLive && lastLive.jobId !== job.id) {
      const [old, figures] = await Promise.all([get<Job>(`/jobs/${lastLive.jobId}`),
        get<JobMetrics>(`/jobs/${lastLive.jobId}/metrics`)]);
      if (old.live) {
        const version = old.pipeline_version ?? lastLive.version;
        panels.push({ version, caption: `version ${version} · ${old.state}`, operators: figures.operators,
          word: old.state });
      } else {
        lastLive = null;
      }
    }
    const shown = active && run?.pipeline_version ? run.pipeline_version : pipeline.version;
    if (job && live) lastLive = { jobId: job.id, version: shown };
    const state = stateOf(pipeline);
    if (!panels.some((p) => p.version === shown)) {
      panels.push({ version: shown, caption: `version ${shown} · ${state}`,
        operators: live ? metrics?.operators ?? [] : null, word: state });
    }
    if (active && shown !== pipeline.version) {
      const asked = run !== null && pipeline.restart_generation > run.restart_generation;
      panels.push({ version: pipeline.version, caption: `version ${pipeline.version} · ${asked
        ? "starts with the restart asked for" : "runs after a restart"}`, operators: null,
        word: asked ? "starting" : "not running yet" });
    }
    return panels;
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

/** Rows/s read by the sources and written to the sinks over the job's last minute, from
 * their own figures (null when the job does not report them). */
function operatorRates(operators: OperatorMetrics[]): { rowsIn: number; rowsOut: number } | null {
  const sum = (prefix: string, rate: (o: OperatorMetrics) => number | null) => {
    const rates = operators.filter((o) => o.operator.startsWith(prefix)).map(rate);
    return rates.length > 0 && rates.every((r) => r !== null) ? rates.reduce((a, b) => a! + b!, 0)! : null;
  };
  const rowsIn = sum("source:", (o) => o.rows_out_per_s);
  const rowsOut = sum("sink:", (o) => o.rows_in_per_s);
  return rowsIn === null || rowsOut === null ? null : { rowsIn, rowsOut };
}

/** The pipeline at a glance. While its job runs, rows/s are the last minute's when its
 * checkpoints are known (``recent``), else the latest epoch's; otherwise there are no live
 * figures, and the rates, busy ratio and lag say what the pipeline is (stopped, …). */
function showSummary(summary: HTMLElement, pipeline: Pipeline, metrics: JobMetrics | null, live: boolean,
                     recent: { rowsIn: number; rowsOut: number } | null): void {
  const still = live ? null : stateOf(pipeline);
  const ended = metrics?.watermark_us !== null && metrics?.watermark_us !== undefined
    && metrics.watermark_us >= END_OF_TIME_US;
  const lag = ended ? "input ended" : still ?? (metrics?.watermark_lag_s !== null && metrics?.watermark_lag_s !== undefined
    ? `${metrics.watermark_lag_s.toFixed(1)} s` : "—");
  const busy = metrics?.backpressure === null || metrics?.backpressure === undefined ? "—" : metrics.backpressure.toFixed(2);
  const items: [string, string, string][] = [
    ["State", stateOf(pipeline) + idleUntil(pipeline), "state"],
    ["Should be", pipeline.desired_state + (pipeline.stop_mode ? ` (${pipeline.stop_mode})` : ""), "desired"],
    ["Parallelism", String(pipeline.job?.parallelism ?? pipeline.parallelism), "parallelism"],
    [live ? "Epoch" : "Last epoch", metrics?.epoch === null || metrics?.epoch === undefined ? "—" : String(metrics.epoch), "epoch"],
    [recent ? "Input rows/s (1 min)" : "Input rows/s", still ?? formatRate(recent?.rowsIn ?? metrics?.rows_in_per_s), "rows-in"],
    [recent ? "Output rows/s (1 min)" : "Output rows/s", still ?? formatRate(recent?.rowsOut ?? metrics?.rows_out_per_s), "rows-out"],
    ["Busy ratio (job)", still ?? busy, "busy"],
    ["Watermark lag", lag, "lag"],
    [live ? "State written" : "State written (last epoch)", formatBytes(metrics?.state_bytes), "state-bytes"],
  ];
  replace(summary, items.map(([term, value, id]) => h("div", {},
    h("dt", {}, term), h("dd", { "data-testid": id, class: still && ["rows-in", "rows-out", "busy", "lag"].includes(id)
      && value === still ? "still" : null }, value))));
}
