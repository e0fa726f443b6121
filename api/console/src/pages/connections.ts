// Connections: profiles and tables, each with a Test button. Secret options are
// write-only: the API lists only which are set (masked), and this page never shows more.
// A table's columns are typed in or inferred from a JSON sample. Every outcome is shown
// where it was asked for: a test's in its row, an add's in its form.

import { type Check, type ConnectionTable, type ConnectorInfo, del, get, type Page, post,
  type Profile, describe } from "../api";
import { field, h, replace } from "../dom";
import { columnsEditor } from "./columnsEditor";

type Resource = "connection-profiles" | "connection-tables";

/** ``key = value`` lines into an options object (blank lines and # comments skipped). */
export function parseOptions(text: string): Record<string, string> {
  const options: Record<string, string> = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const equals = line.indexOf("=");
    if (equals <= 0) throw new Error(`"${line}" is not "option = value"`);
    options[line.slice(0, equals).trim()] = line.slice(equals + 1).trim();
  }
  return options;
}

function options(config: Record<string, string>, secrets: Record<string, string>): string {
  return [...Object.entries(config).map(([k, v]) => `${k} = ${v}`),
          ...Object.entries(secrets).map(([k, v]) => `${k} = ${v}`)].join(", ");
}

/** A status line; ``kind`` colours it as news, success or failure. */
function say(line: HTMLElement, text: string, kind: "muted" | "ok" | "error", base = ""): void {
  line.className = `${base} ${kind}`.trim();
  line.textContent = text;
}

export async function connectionsPage(main: HTMLElement): Promise<void> {
  const profiles = h("tbody");
  const tables = h("tbody");
  const profileNotice = h("p", { role: "status", class: "muted" });
  const tableNotice = h("p", { role: "status", class: "muted" });
  // A test's outcome stays in its row across reloads of the list.
  const results = new Map<string, { text: string; ok: boolean }>();
  const connectors = (await get<{ items: ConnectorInfo[] }>("/connectors")).items;
  const reload = async () => {
    const [p, t] = await Promise.all([get<Page<Profile>>("/connection-profiles?limit=200"),
      get<Page<ConnectionTable>>("/connection-tables?limit=200")]);
    const actions = (resource: Resource, name: string, notice: HTMLElement) =>
      rowActions(resource, name, { results, notice, reload });
    replace(profiles, p.items.length === 0 ? none(4, "No profiles yet.") : p.items.map((profile) => h("tr", { "data-profile": profile.name },
      h("th", { scope: "row" }, profile.name), h("td", {}, profile.connector),
      h("td", {}, options(profile.config, profile.secrets)),
      h("td", {}, actions("connection-profiles", profile.name, profileNotice)))));
    replace(tables, t.items.length === 0 ? none(7, "No tables yet.") : t.items.map((table) => h("tr", { "data-table": table.name },
      h("th", { scope: "row" }, table.name), h("td", {}, table.connector), h("td", {}, table.role),
      h("td", {}, table.profile ?? ""), h("td", {}, options(table.config, table.secrets)),
      h("td", { class: "fields" }, table.fields.map((f) => `${f.name} ${f.type}${f.nullable ? "" : " NOT NULL"}`)
        .join(", ")),
      h("td", {}, actions("connection-tables", table.name, tableNotice)))));
  };
  const head = (labels: string[]) => h("thead", {}, h("tr", {}, labels.map((l) => h("th", { scope: "col" }, l))));
  replace(main, h("h1", {}, "Connections"),
    h("section", { "aria-labelledby": "profiles-title" }, h("h2", { id: "profiles-title" }, "Profiles"),
      h("p", { class: "muted" }, "Options that several tables share, such as a server and its credentials."),
      h("table", { class: "data", "aria-labelledby": "profiles-title" },
        head(["Name", "Connector", "Options", ""]), profiles),
      profileNotice,
      createForm("profile", connectors, reload)),
    h("section", { "aria-labelledby": "tables-title" }, h("h2", { id: "tables-title" }, "Tables"),
      h("p", { class: "muted" }, "Sources and sinks that pipelines use by name, without CREATE TABLE."),
      h("table", { class: "data", "aria-labelledby": "tables-title" },
        head(["Name", "Connector", "Role", "Profile", "Options", "Columns", ""]), tables),
      tableNotice,
      createForm("table", connectors, reload)));
  await reload();
}

/** The one row of an empty list, saying so. */
function none(columns: number, text: string): HTMLElement {
  return h("tr", {}, h("td", { colspan: columns, class: "muted" }, text));
}

interface RowContext {
  results: Map<string, { text: string; ok: boolean }>;
  /** Where a deletion is reported (its row is gone by then): under the list. */
  notice: HTMLElement;
  reload: () => Promise<void>;
}

function rowActions(resource: Resource, name: string, context: RowContext): HTMLElement[] {
  const key = `${resource}/${name}`;
  const previous = context.results.get(key);
  const result = h("div", { role: "status", class: `row-result ${previous?.ok ? "ok" : "error"}` },
    previous?.text ?? "");
  const test = h("button", { type: "button", class: "secondary", "aria-label": `Test ${name}` }, "Test");
  test.addEventListener("click", async () => {
    say(result, `Testing ${name}…`, "muted", "row-result");
    let outcome: { text: string; ok: boolean };
    try {
      const check = await post<Check>(`/${resource}/${encodeURIComponent(name)}/test`);
      outcome = { text: `${check.ok ? "OK" : "Failed"}: ${check.message}`, ok: check.ok };
    } catch (error) {
      outcome = { text: `Failed: ${describe(error)}`, ok: false };
    }
    context.results.set(key, outcome);
    say(result, outcome.text, outcome.ok ? "ok" : "error", "row-result");
  });
  const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${name}` }, "Delete");
  remove.addEventListener("click", async () => {
    try {
      await del(`/${resource}/${encodeURIComponent(name)}`);
      context.results.delete(key);
      say(context.notice, `${name} deleted.`, "muted");
      await context.reload();
    } catch (error) {
      say(result, `Not deleted: ${describe(error)}`, "error", "row-result");
    }
  });
  return [h("div", { class: "row-buttons" }, test, remove), result];
}

function createForm(kind: "profile" | "table", connectors: ConnectorInfo[],
                    reload: () => Promise<void>): HTMLElement {
  const title = kind === "profile" ? "Add a profile" : "Add a table";
  const prefix = `${kind}-`;
  const name = h("input", { type: "text", id: `${prefix}name`, required: true, autocomplete: "off" });
  const connector = h("select", { id: `${prefix}connector` },
    connectors.map((c) => h("option", { value: c.name }, `${c.name} (${c.roles.join(", ")})`)));
  const profile = h("input", { type: "text", id: `${prefix}profile`, autocomplete: "off" });
  const config = h("textarea", { id: `${prefix}config`, rows: 3,
    placeholder: "path = bids.jsonl\nformat = json\ntype = source" });
  const secrets = h("textarea", { id: `${prefix}secrets`, rows: 2, autocomplete: "off" });
  const columns = kind === "table" ? columnsEditor(prefix) : null;
  const status = h("p", { role: "status", class: "muted" });
  const form = h("form", { class: "card", "aria-labelledby": `${prefix}form-title` },
    h("h3", { id: `${prefix}form-title` }, title),
    h("div", { class: "row" }, field(kind === "profile" ? "Profile name" : "Table name", name),
      field(`Connector of the ${kind}`, connector),
      kind === "table" ? field("Profile (optional)", profile) : null),
    h("div", { class: "row" },
      field(`Options of the ${kind}`, config, "One 'option = value' per line (the WITH options)."),
      field(`Secret options of the ${kind}`, secrets, "Stored encrypted; never shown again.")),
    columns?.element,
    h("div", { class: "actions" }, h("button", { type: "submit" }, kind === "profile" ? "Add profile" : "Add table")),
    status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const added = name.value.trim();
    try {
      const body: Record<string, unknown> = { name: added, connector: connector.value,
        config: parseOptions(config.value), secrets: parseOptions(secrets.value) };
      if (kind === "table" && profile.value.trim()) body.profile = profile.value.trim();
      if (columns) body.fields = columns.columns();
      say(status, `Adding ${added}…`, "muted");
      await post(`/connection-${kind === "profile" ? "profiles" : "tables"}`, body);
      form.reset();
      columns?.clear();
      say(status, `${added} added.`, "ok");
      await reload();
    } catch (error) {
      say(status, `Not added: ${describe(error)}`, "error");
    }
  });
  return form;
}
