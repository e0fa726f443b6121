// UDFs: the tenant's Python UDFs (one file each, stored under the SQL name of the one
// function it declares). The editor checks the file as you type (and on Validate) with
// the API's own check, which never runs it: each problem is marked at its line. Save
// stores it (a new UDF, or its next version); Delete asks first, and says which running
// pipelines hold it when the API refuses.

import { indentWithTab } from "@codemirror/commands";
import { indentUnit } from "@codemirror/language";
import { linter, lintGutter } from "@codemirror/lint";
import { EditorView, keymap } from "@codemirror/view";
import { basicSetup } from "codemirror";

import { ApiError, del, describe, get, type Page, post, type Udf, type UdfValidation } from "../api";
import { field, h, replace } from "../dom";
import { formatTime } from "../format";
import { callerRole, gate, roleNote } from "../roles";
import { toCodeMirror } from "../sqlEditor";

/** The name a UDF is stored and called under: its function's, in lower case. */
const UDF_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const TEMPLATE = (name: string) => `from typing import Optional

from spate.engine.udf import udf


@udf
def ${name || "my_function"}(a: int, b: Optional[int]) -> Optional[float]:
    return None if not b else a / b
`;

export async function udfsPage(main: HTMLElement): Promise<() => void> {
  const role = await callerRole();
  const list = h("tbody");
  const notice = h("p", { role: "status", class: "muted" });
  const editor = udfEditor(role, async (saved) => {
    replace(notice);
    await load(saved);
  });
  const load = async (highlight?: string) => {
    const udfs = (await get<Page<Udf>>("/udfs?limit=200")).items;
    replace(list, udfs.length === 0
      ? h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No UDFs yet: write one below."))
      : udfs.map((udf) => udfRow(udf, role, { notice, editor, reload: load })));
    if (highlight) list.querySelector(`tr[data-udf='${highlight}']`)?.classList.add("saved");
  };
  replace(main, h("h1", {}, "UDFs"),
    roleNote(role, "write", "read the UDFs and check a file", "saving or deleting one"),
    h("p", { class: "muted" }, "Python functions your pipelines call by name: one file each, declaring one ",
      h("code", {}, "@udf"), ", ", h("code", {}, "@vectorized_udf(...)"), " or ", h("code", {}, "@udaf"),
      " named as the UDF is stored. The file is checked, never run, here; jobs run it in your compute unit."),
    h("table", { class: "data", "aria-label": "UDFs" },
      h("thead", {}, h("tr", {}, ["Name", "Kind", "Signature", "Version", "Updated", ""]
        .map((label) => h("th", { scope: "col" }, label)))), list),
    notice,
    editor.element);
  await load();
  return () => editor.destroy();
}

interface RowContext {
  notice: HTMLElement;
  editor: UdfEditor;
  reload: () => Promise<void>;
}

function udfRow(udf: Udf, role: string | null, context: RowContext): HTMLElement {
  const result = h("div", { role: "status", class: "row-result error" });
  const edit = h("button", { type: "button", class: "secondary", "aria-label": `Edit ${udf.name}`,
    onclick: () => void context.editor.open(udf.name) }, "Edit");
  const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${udf.name}` }, "Delete");
  let armed = false;
  remove.addEventListener("click", async () => {
    if (!armed) {
      // A second click confirms: the UDF and all its versions go.
      armed = true;
      remove.textContent = "Confirm delete";
      remove.setAttribute("aria-label", `Confirm deleting ${udf.name}`);
      return;
    }
    try {
      await del(`/udfs/${encodeURIComponent(udf.name)}`);
      context.notice.textContent = `UDF ${udf.name} deleted, with its ${udf.versions.length} `
        + `version${udf.versions.length === 1 ? "" : "s"}.`;
      await context.reload();
    } catch (error) {
      armed = false;
      remove.textContent = "Delete";
      remove.setAttribute("aria-label", `Delete ${udf.name}`);
      replace(result, refusalOf(error));
    }
  });
  gate(role, "write", remove);
  return h("tr", { "data-udf": udf.name },
    h("th", { scope: "row" }, udf.name), h("td", {}, udf.kind),
    h("td", {}, h("code", { class: "signature" }, udf.signature)),
    h("td", { class: "num" }, udf.version), h("td", {}, formatTime(udf.updated_at)),
    h("td", {}, h("div", { class: "row-buttons" }, edit, remove), result));
}

/** Why a delete was refused; the running pipelines that call the UDF link to their pages. */
function refusalOf(error: unknown): (HTMLElement | string)[] {
  const callers = error instanceof ApiError && error.status === 409
    ? error.details.map((d) => d.pipeline).filter((p): p is string => typeof p === "string") : [];
  if (callers.length === 0) return [`Not deleted: ${describe(error)}`];
  return [`Not deleted: ${describe(error)}. Running pipelines that call it: `,
    ...callers.flatMap((name, i) => [i ? ", " : "",
      h("a", { href: `/pipelines/${encodeURIComponent(name)}` }, name)]), "."];
}

interface UdfEditor {
  element: HTMLElement;
  /** Load a stored UDF's current source to edit (saving adds a version). */
  open: (name: string) => Promise<void>;
  destroy: () => void;
}

/** The file's editor, checked as it is typed; Save stores it. ``onSaved`` hears the name. */
function udfEditor(role: string | null, onSaved: (name: string) => Promise<void>): UdfEditor {
  const title = h("h2", { id: "udf-editor-title" }, "New UDF");
  const name = h("input", { type: "text", id: "udf-name", required: true, autocomplete: "off", spellcheck: "false",
    pattern: UDF_NAME.source, maxlength: 63 });
  const box = h("div", { class: "editor", id: "udf-editor" });
  const diagnostics = h("ul", { class: "diagnostics", "aria-live": "polite", "aria-label": "Diagnostics",
    "data-testid": "udf-diagnostics" });
  const status = h("p", { role: "status", class: "muted", "data-testid": "udf-status" });
  const validate = h("button", { type: "button", class: "secondary" }, "Validate");
  const save = h("button", { type: "submit" }, "Save UDF");
  const fresh = h("button", { type: "button", class: "secondary" }, "New UDF");
  const form = h("form", { class: "card", "aria-labelledby": "udf-editor-title" },
    title,
    field("UDF name", name, "The function's name in lower case: how SQL calls it."),
    h("p", { class: "label", id: "udf-source-label" }, "Source"),
    h("small", { class: "muted", id: "udf-source-hint" },
      "Checked as you type. Tab indents; press Esc, then Tab, to leave the editor."),
    box, diagnostics,
    h("div", { class: "actions" }, save, validate, fresh),
    status);

  let checked = 0;
  const check = async (view: EditorView) => {
    const text = view.state.doc.toString();
    const udfName = name.value.trim();
    const mine = ++checked;
    if (!UDF_NAME.test(udfName)) {
      replace(diagnostics, h("li", { class: "muted" },
        "Name the UDF (lower-case letters, digits and _) to check the file."));
      return [];
    }
    try {
      const answer = await post<UdfValidation>("/udfs/validate", { name: udfName, source: text });
      if (mine !== checked || view.state.doc.toString() !== text) return [];
      showCheck(diagnostics, answer);
      return answer.diagnostics.map((d) => toCodeMirror(view.state.doc, d));
    } catch (error) {
      replace(diagnostics, h("li", { class: "error" }, `Could not check the file: ${describe(error)}`));
      return [];
    }
  };
  const lint = linter(check, { delay: 500 });
  const view = new EditorView({
    doc: TEMPLATE(""),
    parent: box,
    extensions: [
      basicSetup,
      indentUnit.of("    "),
      keymap.of([indentWithTab]),
      lintGutter(),
      lint,
      EditorView.updateListener.of((update) => {
        if (update.docChanged) replace(status);  // what was said is about the file as it was
      }),
      EditorView.contentAttributes.of({ "aria-label": "UDF source", "aria-multiline": "true",
        "aria-describedby": "udf-source-hint" }),
    ],
  });
  const setSource = (source: string) => view.dispatch({
    changes: { from: 0, to: view.state.doc.length, insert: source } });
  let lastName = "";
  name.addEventListener("input", () => {
    replace(status);
    // A new UDF's template follows its name until the file is edited.
    if (!name.readOnly && view.state.doc.toString() === TEMPLATE(lastName)) setSource(TEMPLATE(name.value.trim()));
    lastName = name.value.trim();
  });
  validate.addEventListener("click", async () => {
    await check(view);
  });
  fresh.addEventListener("click", () => {
    name.readOnly = false;
    name.value = "";
    lastName = "";
    title.textContent = "New UDF";
    setSource(TEMPLATE(""));
    replace(status);
    name.focus();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const udfName = name.value.trim();
    status.className = "muted";
    status.textContent = `Saving ${udfName}…`;
    try {
      const before = name.readOnly ? (await get<Udf>(`/udfs/${encodeURIComponent(udfName)}`)).version : 0;
      const stored = await post<Udf>("/udfs", { name: udfName, source: view.state.doc.toString() });
      status.className = "ok";
      status.textContent = stored.version === before ? `${udfName} is unchanged: still version ${stored.version}.`
        : `${udfName} saved as version ${stored.version}: jobs load it when they next start.`;
      open(stored);
      await onSaved(udfName);
    } catch (error) {
      status.className = "error";
      status.textContent = `Not saved: ${describe(error)}`;
      // The API's refusal locates each problem: mark them too.
      if (error instanceof ApiError && error.code === "invalid_udf") void check(view);
    }
  });
  const open = (udf: Udf) => {
    name.value = udf.name;
    name.readOnly = true;
    lastName = udf.name;
    title.textContent = `Edit ${udf.name} (version ${udf.version})`;
    if (view.state.doc.toString() !== udf.source) setSource(udf.source);
  };
  gate(role, "write", save);
  return {
    element: form,
    open: async (udfName) => {
      open(await get<Udf>(`/udfs/${encodeURIComponent(udfName)}`));
      replace(status);
      title.scrollIntoView({ block: "start" });
      view.focus();
    },
    destroy: () => view.destroy(),
  };
}

/** The check's answer under the editor: the UDF it declares, or each problem at its place. */
function showCheck(list: HTMLElement, answer: UdfValidation): void {
  if (answer.valid) {
    replace(list, h("li", { class: "ok" }, `Valid: ${answer.kind} UDF `, h("code", {}, answer.signature ?? "")));
    return;
  }
  replace(list, answer.diagnostics.map((d) => h("li", { class: "error", "data-line": d.line },
    `Line ${d.line}, column ${d.column}: ${d.message}`)));
}
