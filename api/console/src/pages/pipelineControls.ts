// A pipeline's lifecycle controls — stop (with a mode), start, restart (with or without
// state), rescale, autoscale (a parallelism range, or off) — and the notice under them, which says what was asked and goes once
// it is done: "Stop requested." stays only while the job is still stopping.

import { describe, type Job, type JobStateFlags, patch, type Pipeline, post } from "../api";
import { field, h } from "../dom";
import { gate } from "../roles";
import { jobIsActive } from "./pipelines";

/** Whether a start, restart or rescale has got through (the job runs) or failed at (it ended). */
function settled(job: JobStateFlags & { state: string }): boolean {
  return job.state === "running" || !job.active;
}

/** When a request is done, from the pipeline and its job as the page reads them. */
export type Done = (pipeline: Pipeline, run: Job | null) => boolean;

/** The notice under the controls: what was asked, until it is done. */
export class Notice {
  readonly element = h("p", { role: "status", class: "muted", "data-testid": "notice" });
  private done: Done | null = null;

  say(text: string, kind: "muted" | "error", done: Done | null = null): void {
    this.element.className = kind;
    this.element.textContent = text;
    this.done = done;
  }

  /** Clear a request's notice once what it asked for has happened. */
  check(pipeline: Pipeline, run: Job | null): void {
    if (this.done?.(pipeline, run)) {
      this.done = null;
      this.element.textContent = "";
    }
  }
}

/** A new job (not ``before``) that got going, or stopped trying. */
export function newJobSettled(before: string | null): Done {
  return (pipeline) => pipeline.job !== null && pipeline.job.id !== before && settled(pipeline.job);
}

const stopped: Done = (pipeline) => pipeline.desired_state !== "running" && !jobIsActive(pipeline);

export interface Controls { element: HTMLElement; update: (pipeline: Pipeline) => void }

/** Stop (with a mode), start, restart (with or without state) and rescale; a ``role``
 * that may not change pipelines sees them disabled, with why. */
export function controls(path: string, notice: Notice, role: string | null,
                         current: () => Pipeline): Controls {
  const act = (form: HTMLFormElement, action: () => Promise<unknown>, said: string, done: () => Done) => {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const when = done();
      try {
        await action();
        notice.say(said, "muted", when);
      } catch (error) {
        notice.say(`${form.getAttribute("aria-label")} failed: ${describe(error)}`, "error");
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
  const low = h("input", { type: "number", name: "autoscale_min", min: 1, max: 128, value: 1, required: true });
  const high = h("input", { type: "number", name: "autoscale_max", min: 1, max: 128, value: 4, required: true });
  const buttons = {
    stop: h("button", { type: "submit" }, "Stop"), start: h("button", { type: "submit" }, "Start"),
    restart: h("button", { type: "submit" }, "Restart"), rescale: h("button", { type: "submit" }, "Rescale"),
    autoscale: h("button", { type: "submit" }, "Autoscale"),
    autoscaleOff: h("button", { type: "button" }, "Turn autoscaling off"),
  };
  const jobNow = () => current().job?.id ?? null;
  const stop = act(h("form", { "aria-label": "Stop" }, field("Stop mode", mode), buttons.stop),
    () => patch(path, { stop: mode.value }), "Stop requested.", () => stopped);
  const start = act(h("form", { "aria-label": "Start" }, buttons.start),
    () => patch(path, { stop: "none" }), "Start requested.", () => newJobSettled(jobNow()));
  const restart = act(h("form", { "aria-label": "Restart" },
    h("div", { class: "check" }, keepState, h("label", { for: "keep-state" }, "Keep state")), buttons.restart),
    () => post(`${path}/restart`, { with_state: keepState.checked }), "Restart requested.",
    () => newJobSettled(jobNow()));
  const rescale = act(h("form", { "aria-label": "Rescale" }, field("New parallelism", scale), buttons.rescale),
    () => post(`${path}/rescale`, { parallelism: Number(scale.value) }), "Rescale requested.", () => {
      const wanted = Number(scale.value);
      const before = jobNow();
      // A stopped pipeline's rescale only stores the parallelism its next job starts with.
      return (pipeline) => pipeline.parallelism === wanted
        && (pipeline.desired_state !== "running" || newJobSettled(before)(pipeline, null));
    });
  const range = () => ({ min: Number(low.value), max: Number(high.value) });
  const autoscale = act(h("form", { "aria-label": "Autoscale" }, field("Autoscale from", low),
    field("Autoscale to", high), buttons.autoscale, buttons.autoscaleOff),
  async () => {
    const wanted = range();
    if (wanted.min > wanted.max) throw new Error(`Autoscale from (${wanted.min}) is above Autoscale to (${wanted.max})`);
    return patch(path, { autoscale: wanted });
  }, "Autoscaling set.", () => {
    const wanted = range();
    return (pipeline) => pipeline.autoscale?.min === wanted.min && pipeline.autoscale?.max === wanted.max;
  });
  buttons.autoscaleOff.addEventListener("click", async () => {
    try {
      await patch(path, { autoscale: null });
      notice.say("Autoscaling turned off.", "muted", (pipeline) => pipeline.autoscale === null);
    } catch (error) {
      notice.say(`Turning autoscaling off failed: ${describe(error)}`, "error");
    }
  });
  // What the autoscaler does: its range and its latest decision, with its reason.
  const scaling = h("p", { class: "muted", "data-testid": "autoscale" });
  gate(role, "write", mode, keepState, scale, low, high, ...Object.values(buttons));
  const element = h("div", { class: "controls" }, stop, start, restart, rescale, autoscale, scaling);
  // Offer Stop to a pipeline that should run and Start to one that should not.
  const update = (pipeline: Pipeline) => {
    stop.hidden = pipeline.desired_state !== "running";
    start.hidden = pipeline.desired_state === "running";
    const auto = pipeline.autoscale;
    buttons.autoscaleOff.hidden = auto === null;
    scaling.textContent = auto === null ? "Autoscaling is off: the parallelism is what you set."
      : `Autoscaling between ${auto.min} and ${auto.max}.`
        + (auto.last_decision ? ` Latest: ${auto.last_decision.replace(/^autoscale: /, "")}`
          + ` (${new Date(auto.last_decision_at ?? "").toLocaleTimeString()}).` : "");
  };
  return { element, update };
}
