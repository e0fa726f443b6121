// What a pipeline's page can do to it besides run and stop it: edit its SQL (a new
// version, then a restart with or without state — with it only when the new SQL can
// read it — or none) and delete it (after a confirmation). Each panel shows its own
// outcome and errors inside itself.

import type { EditorView } from "@codemirror/view";

import { type Pipeline, type PipelineVersion, type StatePlan, del, describe, post } from "../api";
import { h, replace } from "../dom";
import { navigate } from "../router";
import { createSqlEditor } from "../sqlEditor";
import { showDiagnostics } from "./editor";
import { type Done, newJobSettled } from "./pipelineControls";
import { jobIsActive } from "./pipelines";

/** A panel that opens under the page's heading; only one is open at a time. */
export interface Panel { element: HTMLElement; close: () => void }

/** "Delete pipeline" asks first; a pipeline whose job is active is stopped with force. */
export function deletePanel(pipeline: Pipeline, onClose: () => void): Panel {
  const active = jobIsActive(pipeline);
  const message = h("p", { role: "alert", class: "error", hidden: true });
  const confirm = h("button", { type: "submit", class: "danger-solid" }, `Delete ${pipeline.name}`);
  const cancel = h("button", { type: "button", class: "secondary", onclick: () => onClose() }, "Cancel");
  const form = h("form", { class: "card confirm", "aria-labelledby": "delete-title" },
    h("h2", { id: "delete-title" }, `Delete ${pipeline.name}?`),
    h("p", {}, "Its SQL versions, runs, checkpoints and errors are deleted with it. This cannot be undone."),
    active ? h("p", { class: "warning" },
      "Its job is still running: it is stopped at once (force), without a final checkpoint.") : null,
    message,
    h("div", { class: "actions" }, confirm, cancel));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.hidden = true;
    confirm.disabled = true;
    confirm.textContent = active ? "Stopping and deleting…" : "Deleting…";
    try {
      await del(`/pipelines/${encodeURIComponent(pipeline.name)}${active ? "?force=true" : ""}`);
      navigate(`/pipelines?deleted=${encodeURIComponent(pipeline.name)}`);
    } catch (error) {
      message.textContent = `Not deleted: ${describe(error)}`;
      message.hidden = false;
      confirm.disabled = false;
      confirm.textContent = `Delete ${pipeline.name}`;
    }
  });
  return { element: form, close: () => undefined };
}

type AfterSave = "restart" | "restart-empty" | "none";

/** What the edited SQL would do to the pipeline's state, operator by operator. */
function showStatePlan(note: HTMLElement, plan: StatePlan | null | undefined): void {
  if (!plan || plan.state_version === null) {
    replace(note);
    return;
  }
  const lines = plan.dropped.map((o) => h("li", { "data-operator": o.operator },
    `${o.label} (${o.operator}): ${o.reasons.join("; ")}`));
  replace(note, plan.verdict === "incompatible"
    ? h("p", { class: "warning" }, `Keeping state is not offered: the new SQL cannot read the state `
      + `of version ${plan.state_version}.`)
    : h("p", { class: "muted" }, `The new SQL can keep the state of version ${plan.state_version}`
      + `${plan.dropped.length ? "; the state of operators it no longer has is dropped" : ""}.`),
    lines.length ? h("ul", {}, lines) : null);
}

/** "Edit SQL": the SQL in the editor with live diagnostics; saving adds the next version,
 * then restarts the job with or without its state, or leaves it running the old one.
 * Keeping state is offered only while the API says the edited SQL can read it. */
export function editPanel(pipeline: Pipeline, onSaved: (notice: string, done: Done | null) => void,
                          onClose: () => void): Panel {
  const editorBox = h("div", { class: "editor" });
  const diagnostics = h("ul", { class: "diagnostics", "aria-live": "polite", "aria-label": "Diagnostics" });
  const stateNote = h("div", { class: "state-plan", "aria-live": "polite", "aria-label": "State" });
  const message = h("p", { role: "alert", class: "error", hidden: true });
  const running = pipeline.desired_state === "running";
  const verb = running ? "Restart" : "Start";
  const choices: [AfterSave, string, string][] = [
    ["restart", `${verb} now, keeping state`,
      "The new version starts from the state and source offsets the job has now."],
    ["restart-empty", `${verb} now from empty state`,
      "State and source offsets are dropped: the new SQL starts over."],
    ["none", running ? "Do not restart" : "Keep it stopped",
      running ? `The job keeps running version ${pipeline.version} until it is restarted.`
        : "The new version runs when the pipeline is next started."],
  ];
  const inputs = new Map<AfterSave, HTMLInputElement>();
  const radios = choices.map(([value, label, hint], index) => {
    const id = `after-save-${value}`;
    const input = h("input", { type: "radio", name: "after_save", id, value, checked: index === 0,
      "aria-describedby": `${id}-hint` });
    inputs.set(value, input);
    return h("div", { class: "choice" }, input,
      h("label", { for: id }, label), h("small", { id: `${id}-hint`, class: "muted" }, hint));
  });
  const keep = inputs.get("restart") as HTMLInputElement;
  const offer = (plan: StatePlan | null | undefined) => {
    const blocked = plan?.verdict === "incompatible";
    keep.disabled = blocked;
    if (blocked && keep.checked) (inputs.get("restart-empty") as HTMLInputElement).checked = true;
    showStatePlan(stateNote, plan);
  };
  const save = h("button", { type: "submit" }, `Save as version ${pipeline.version + 1}`);
  const form = h("form", { class: "card", "aria-labelledby": "edit-title" },
    h("h2", { id: "edit-title" }, "Edit SQL"),
    h("p", { class: "muted", id: "edit-hint" },
      `Saving adds version ${pipeline.version + 1}; version ${pipeline.version} stays in the history. `
      + "Tab indents; press Esc, then Tab, to leave the editor."),
    editorBox, diagnostics,
    stateNote,
    h("fieldset", { class: "choices" }, h("legend", {}, "After saving"), radios),
    message,
    h("div", { class: "actions" }, save,
      h("button", { type: "button", class: "secondary", onclick: () => onClose() }, "Cancel")));
  const view: EditorView = createSqlEditor({
    parent: editorBox, doc: pipeline.sql, label: "Pipeline SQL", describedBy: "edit-hint",
    pipeline: pipeline.name,
    onValidated: (result, error) => {
      showDiagnostics(diagnostics, result, error);
      if (result?.valid) offer(result.state);
    },
    // A refusal was about the SQL as it was: an edit makes it stale.
    onChange: () => {
      message.hidden = true;
    },
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.hidden = true;
    const after = (form.querySelector("input[name=after_save]:checked") as HTMLInputElement).value as AfterSave;
    const path = `/pipelines/${encodeURIComponent(pipeline.name)}`;
    const sql = view.state.doc.toString();
    save.disabled = true;
    const jobBefore = pipeline.job?.id ?? null;
    try {
      if (after === "restart") {
        // Asked again at the moment of saving: the answer may predate the last keystroke.
        const plan = await post<StatePlan>(`${path}/plan-update`, { sql });
        if (plan.verdict === "incompatible") {
          offer(plan);
          throw new Error("the new SQL cannot keep the pipeline's state; choose how to go on");
        }
      }
      const version = await post<PipelineVersion>(`${path}/versions`, { sql });
      if (after !== "none") await post(`${path}/restart`, { with_state: after === "restart" });
      const saved = version.version === pipeline.version
        ? `The SQL is unchanged: still version ${version.version}`
        : `Version ${version.version} saved`;
      // A restart's notice goes once a job runs the new version.
      const settled = newJobSettled(jobBefore);
      onSaved(`${saved}${after === "none" ? "." : `; ${verb.toLowerCase()} requested${
        after === "restart-empty" ? " from empty state" : ""}.`}`, after === "none" ? null
        : (p, run) => settled(p, run) && run?.pipeline_version === version.version);
    } catch (error) {
      message.textContent = `Not saved: ${describe(error)}`;
      message.hidden = false;
      save.disabled = false;
    }
  });
  return { element: form, close: () => view.destroy() };
}

/** The versions of a pipeline, newest first, the current one marked. */
export function versionRows(versions: PipelineVersion[], current: number,
                            running: number | null): HTMLElement[] {
  return [...versions].reverse().map((v) => h("tr", { "data-version": v.version },
    h("td", { class: "num" }, v.version),
    h("td", {}, new Date(v.created_at).toLocaleString()),
    h("td", {}, [v.version === current ? "current" : null, v.version === running ? "running" : null]
      .filter(Boolean).join("; ")),
    h("td", {}, h("details", {}, h("summary", {}, "SQL"), h("pre", { class: "sql" }, v.sql)))));
}
