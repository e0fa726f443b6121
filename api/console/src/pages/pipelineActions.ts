// What a pipeline's page can do to it besides run and stop it: edit its SQL (a new
// version, then a restart with or without state, or none) and delete it (after a
// confirmation). Each panel shows its own outcome and errors inside itself.

import type { EditorView } from "@codemirror/view";

import { type Pipeline, type PipelineVersion, del, describe, post } from "../api";
import { h } from "../dom";
import { navigate } from "../router";
import { createSqlEditor } from "../sqlEditor";
import { showDiagnostics } from "./editor";

/** Job states in which a job still runs (or is about to): deleting must stop it first. */
const ACTIVE_JOB_STATES = new Set(["created", "starting", "running", "stopping", "restarting"]);

export function jobIsActive(pipeline: Pipeline): boolean {
  return pipeline.job !== null && ACTIVE_JOB_STATES.has(pipeline.job.state);
}

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

/** "Edit SQL": the SQL in the editor with live diagnostics; saving adds the next version,
 * then restarts the job with or without its state, or leaves it running the old one. */
export function editPanel(pipeline: Pipeline, onSaved: (notice: string) => void,
                          onClose: () => void): Panel {
  const editorBox = h("div", { class: "editor" });
  const diagnostics = h("ul", { class: "diagnostics", "aria-live": "polite", "aria-label": "Diagnostics" });
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
  const radios = choices.map(([value, label, hint], index) => {
    const id = `after-save-${value}`;
    return h("div", { class: "choice" },
      h("input", { type: "radio", name: "after_save", id, value, checked: index === 0,
        "aria-describedby": `${id}-hint` }),
      h("label", { for: id }, label), h("small", { id: `${id}-hint`, class: "muted" }, hint));
  });
  const save = h("button", { type: "submit" }, `Save as version ${pipeline.version + 1}`);
  const form = h("form", { class: "card", "aria-labelledby": "edit-title" },
    h("h2", { id: "edit-title" }, "Edit SQL"),
    h("p", { class: "muted", id: "edit-hint" },
      `Saving adds version ${pipeline.version + 1}; version ${pipeline.version} stays in the history. `
      + "Tab indents; press Esc, then Tab, to leave the editor."),
    editorBox, diagnostics,
    h("fieldset", { class: "choices" }, h("legend", {}, "After saving"), radios),
    message,
    h("div", { class: "actions" }, save,
      h("button", { type: "button", class: "secondary", onclick: () => onClose() }, "Cancel")));
  const view: EditorView = createSqlEditor({
    parent: editorBox, doc: pipeline.sql, label: "Pipeline SQL", describedBy: "edit-hint",
    onValidated: (result, error) => showDiagnostics(diagnostics, result, error),
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.hidden = true;
    const after = (form.querySelector("input[name=after_save]:checked") as HTMLInputElement).value as AfterSave;
    const path = `/pipelines/${encodeURIComponent(pipeline.name)}`;
    save.disabled = true;
    try {
      const version = await post<PipelineVersion>(`${path}/versions`, { sql: view.state.doc.toString() });
      if (after !== "none") await post(`${path}/restart`, { with_state: after === "restart" });
      const saved = version.version === pipeline.version
        ? `The SQL is unchanged: still version ${version.version}`
        : `Version ${version.version} saved`;
      onSaved(`${saved}${after === "none" ? "." : `; ${verb.toLowerCase()} requested${
        after === "restart-empty" ? " from empty state" : ""}.`}`);
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
