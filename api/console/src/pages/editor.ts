// The pipeline editor: SQL with live diagnostics, the tenant's catalog, a live
// preview of the first rows, then Start (creates the pipeline, which runs).

import type { EditorView } from "@codemirror/view";

import { type ConnectionTable, type ConnectorInfo, get, type Page, type Pipeline, post,
  postEventStream, type Validation, describe } from "../api";
import { field, h, replace } from "../dom";
import { formatCell } from "../format";
import { callerRole, gate, roleNote } from "../roles";
import { navigate } from "../router";
import { createSqlEditor, insertAtCursor } from "../sqlEditor";

const EXAMPLE = `-- Declare tables, then INSERT INTO a sink (or SELECT to preview).
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
`;
const PREVIEW_LIMIT = 100;
const PREVIEW_TIMEOUT_S = 300;

export function editorPage(main: HTMLElement): () => void {
  const name = h("input", { type: "text", name: "name", required: true, autocomplete: "off",
    pattern: "[a-z][a-z0-9_\\-]*", maxlength: 100 });
  const parallelism = h("input", { type: "number", name: "parallelism", min: 1, max: 128, value: 1, required: true });
  const editorBox = h("div", { class: "editor", id: "sql-editor" });
  const diagnostics = h("ul", { class: "diagnostics", "aria-live": "polite", "aria-label": "Diagnostics" });
  const formError = h("p", { role: "alert", class: "error", hidden: true });
  const preview = previewPanel(() => view.state.doc.toString(), () => Number(parallelism.value) || 1);
  const startButton = h("button", { type: "submit" }, "Start pipeline");
  const form = h("form", { class: "editor-form", "aria-label": "New pipeline" },
    h("div", { class: "row" },
      field("Pipeline name", name, "Lower-case letters, digits, '_' and '-', starting with a letter."),
      field("Parallelism", parallelism)),
    h("p", { class: "label", id: "sql-label" }, "SQL"),
    h("small", { class: "muted", id: "sql-hint" }, "Tab indents; press Esc, then Tab, to leave the editor."),
    editorBox,
    diagnostics,
    formError,
    h("div", { class: "actions" },
      startButton, preview.runButton, preview.stopButton));
  const catalog = h("aside", { class: "catalog", "aria-labelledby": "catalog-title" },
    h("h2", { id: "catalog-title" }, "Catalog"), h("p", { class: "muted" }, "Loading…"));
  const heading = h("h1", {}, "New pipeline");
  replace(main, heading,
    h("div", { class: "editor-layout" }, h("div", {}, form, preview.section), catalog));
  // Anyone may write and check SQL; starting it, or a preview, takes a developer's key.
  void callerRole().then((role) => {
    gate(role, "write", startButton, preview.runButton);
    heading.after(roleNote(role, "write", "write and check SQL", "starting a pipeline or a preview") ?? "");
  });

  // A refusal is about the name and SQL as they were: a change makes it stale.
  const clearRefusal = () => {
    formError.hidden = true;
  };
  name.addEventListener("input", clearRefusal);
  parallelism.addEventListener("input", clearRefusal);
  const view: EditorView = createSqlEditor({
    parent: editorBox, doc: EXAMPLE, label: "Pipeline SQL", describedBy: "sql-hint",
    onValidated: (result, error) => showDiagnostics(diagnostics, result, error),
    onChange: () => {
      clearRefusal();
      preview.sqlChanged();
    },
  });
  void loadCatalog(catalog, view);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    formError.hidden = true;
    try {
      const created = await post<Pipeline>("/pipelines", {
        name: name.value.trim(), sql: view.state.doc.toString(), parallelism: Number(parallelism.value) });
      navigate(`/pipelines/${encodeURIComponent(created.name)}`);
    } catch (error) {
      formError.textContent = describe(error);
      formError.hidden = false;
    }
  });
  name.focus();
  return () => {
    preview.stop();
    view.destroy();
  };
}

/** The validation's outcome under an SQL editor: valid, or each problem with its place. */
export function showDiagnostics(list: HTMLElement, result: Validation | null, error: Error | null): void {
  if (error) {
    replace(list, h("li", { class: "error" }, `Could not check the SQL: ${error.message}`));
  } else if (!result) {
    replace(list);
  } else if (result.valid) {
    const count = result.plan?.nodes.length ?? 0;
    replace(list, h("li", { class: "ok" },
      `Valid: ${count} operators${result.plan?.bounded ? ", bounded input" : ""}.`));
  } else {
    replace(list, result.diagnostics.map((d) => h("li", { class: "error", "data-line": d.line },
      `Line ${d.line}, column ${d.column}: ${d.message}`)));
  }
}

async function loadCatalog(catalog: HTMLElement, view: EditorView): Promise<void> {
  const [tables, connectors] = await Promise.all([
    get<Page<ConnectionTable>>("/connection-tables?limit=100"),
    get<{ items: ConnectorInfo[] }>("/connectors"),
  ]);
  const insert = (text: string, label: string, shown = text) => h("button", {
    type: "button", class: "link", "aria-label": label, onclick: () => insertAtCursor(view, text) }, shown);
  replace(catalog, h("h2", { id: "catalog-title" }, "Catalog"),
    h("h3", {}, "Connection tables"),
    tables.items.length === 0
      ? h("p", { class: "muted" }, "None yet: add them under Connections.")
      : h("ul", {}, tables.items.map((t) => h("li", {},
          insert(t.name, `Insert table ${t.name}`),
          h("span", { class: "muted" }, ` ${t.role} · ${t.connector}`),
          t.fields.length ? h("div", { class: "fields" }, t.fields.map((f) => `${f.name} ${f.type}${f.nullable ? "" : " NOT NULL"}`).join(", ")) : null))),
    h("h3", {}, "Connectors"),
    h("ul", {}, connectors.items.map((c) => h("li", {},
      insert(`CREATE TABLE t WITH (connector = '${c.name}');\n`, `Insert CREATE TABLE for ${c.name}`, c.name),
      h("span", { class: "muted" }, ` ${c.roles.join(" and ")}`)))));
}

interface PreviewPanel {
  section: HTMLElement; runButton: HTMLButtonElement; stopButton: HTMLButtonElement; stop: () => void;
  /** The SQL was edited: what the last preview said is about the SQL as it was. */
  sqlChanged: () => void;
}

const PREVIEW_HINT = "Run a preview to see the first rows.";

/** What a preview waits for, by its job's state. */
const WAITING: Record<string, string> = {
  created: "Waiting for the scheduler to start a preview job",
  starting: "Starting the preview job and its Spark application",
  running: "Running: waiting for the first epoch to commit",
};

/** The live preview: rows streamed from POST /pipelines/preview into a table, and until
 * they come, what it waits for and for how long. */
function previewPanel(sqlText: () => string, parallelism: () => number): PreviewPanel {
  const status = h("p", { role: "status", class: "muted", "data-testid": "preview-status" }, PREVIEW_HINT);
  const table = h("table", { class: "data", "aria-label": "Preview rows" });
  const utcNote = h("small", { class: "muted", hidden: true }, "Times are in UTC.");
  const section = h("section", { "aria-labelledby": "preview-title", class: "preview" },
    h("h2", { id: "preview-title" }, "Preview"), status,
    utcNote,
    h("div", { class: "scroll" }, table));
  const runButton = h("button", { type: "button", class: "secondary" }, "Run preview");
  const stopButton = h("button", { type: "button", class: "secondary", disabled: true }, "Stop preview");
  let controller: AbortController | null = null;
  let rowsShown = 0;
  let outcome: "none" | "failed" | "rows" = "none";
  const stop = () => controller?.abort();
  stopButton.addEventListener("click", stop);
  runButton.addEventListener("click", async () => {
    stop();
    const mine = new AbortController();
    controller = mine;
    const rows: Record<string, unknown>[] = [];
    replace(table);
    utcNote.hidden = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    // Until rows come: what the preview waits for, and for how long (ticking each second).
    const started = Date.now();
    let waiting = "Asking for a preview";
    let failure: string | null = null;
    const tick = () => {
      if (rows.length === 0) status.textContent = `${waiting}… ${Math.floor((Date.now() - started) / 1000)} s`;
    };
    tick();
    const timer = window.setInterval(tick, 1000);
    try {
      await postEventStream("/pipelines/preview",
        { sql: sqlText(), limit: PREVIEW_LIMIT, parallelism: parallelism(), timeout_s: PREVIEW_TIMEOUT_S },
        mine.signal, (event) => {
          if (event.event === "status") {
            const state = (event.data as { state: string }).state;
            waiting = WAITING[state] ?? `The preview job is ${state}`;
            tick();
          } else if (event.event === "epoch") {
            const epoch = event.data as { epoch: number; rows_in: number | null; rows_out: number | null };
            waiting = `Epoch ${epoch.epoch} committed (${countRows(epoch.rows_in ?? 0)} read, none out yet: `
              + "a window writes when it closes); waiting for rows";
            tick();
          } else if (event.event === "rows") {
            rows.push(...(event.data as Record<string, unknown>[]));
            renderRows(table, rows);
            utcNote.hidden = false;
            status.textContent = countRows(rows.length);
          } else if (event.event === "error") {
            failure = (event.data as { message: string }).message;
            status.textContent = `Preview failed: ${failure}`;
          } else if (event.event === "end") {
            const end = event.data as { reason: string; rows: number };
            // The failure stays in view: it is what the user needs to read.
            status.textContent = failure === null ? `${countRows(rows.length)}; preview ended (${end.reason}).`
              : `Preview failed${rows.length ? ` after ${countRows(rows.length)}` : ""}: ${failure}`;
          }
        });
      outcome = failure !== null ? "failed" : rows.length ? "rows" : "none";
    } catch (error) {
      outcome = mine.signal.aborted ? (rows.length ? "rows" : "none") : "failed";
      status.textContent = mine.signal.aborted ? `${countRows(rows.length)}; preview stopped.` : `Preview failed: ${describe(error)}`;
    } finally {
      window.clearInterval(timer);
      rowsShown = rows.length;
      if (controller === mine) {
        controller = null;
        runButton.disabled = false;
        stopButton.disabled = true;
      }
    }
  });
  const sqlChanged = () => {
    if (controller) return;  // a running preview says what it does until it ends
    if (outcome === "failed" || (outcome === "none" && status.textContent !== PREVIEW_HINT)) {
      status.textContent = PREVIEW_HINT;
    } else if (outcome === "rows") {
      status.textContent = `${countRows(rowsShown)} of the SQL before your last edit: run the preview again `
        + "to see the new SQL's.";
    }
    outcome = outcome === "rows" ? "rows" : "none";
  };
  return { section, runButton, stopButton, stop, sqlChanged };
}

function countRows(count: number): string {
  return `${count} row${count === 1 ? "" : "s"}`;
}

function renderRows(table: HTMLElement, rows: Record<string, unknown>[]): void {
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  replace(table,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => cell(row[c]))))));
}

/** A value as people read it (windows and timestamps as times); the raw JSON on hover
 * where the two differ. */
function cell(value: unknown): HTMLElement {
  const shown = formatCell(value);
  const raw = value !== null && typeof value === "object" ? JSON.stringify(value) : String(value ?? "");
  return h("td", { title: raw !== shown ? raw : null }, shown);
}
