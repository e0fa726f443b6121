// Connections: profiles and tables, each with a Test button. The forms are built from
// the connector's declared options (a field each; secret ones write-only), and Test
// checks what the form says before anything is stored. Secret options are write-only:
// the API lists only which are set (masked), and this page never shows more. A table's
// columns are typed in or inferred from a JSON sample. Every outcome is shown where it
// was asked for — a test's in its row or its form, an add's in its form — and goes when
// what it was about changes.

import { type Check, type ConnectionTable, type ConnectorInfo, del, describe, get, type Page, post,
  type Profile } from "../api";
import { field, h, replace } from "../dom";
import { callerRole, gate, roleNote } from "../roles";
import { columnsEditor } from "./columnsEditor";
import { optionFields } from "./connectorOptions";

type Resource = "connection-profiles" | "connection-tables";
type Kind = "profile" | "table";

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
  const [connectors, role] = await Promise.all([
    get<{ items: ConnectorInfo[] }>("/connectors").then((list) => list.items), callerRole()]);
  let known: Profile[] = [];
  const reload = async () => {
    const [p, t] = await Promise.all([get<Page<Profile>>("/connection-profiles?limit=200"),
      get<Page<ConnectionTable>>("/connection-tables?limit=200")]);
    known = p.items;
    tableForm.profilesChanged();
    const actions = (resource: Resource, name: string, notice: HTMLElement) =>
      rowActions(resource, name, { results, notice, reload, role });
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
  const profileForm = createForm("profile", connectors, () => known, reload, role);
  const tableForm = createForm("table", connectors, () => known, reload, role);
  const head = (labels: string[]) => h("thead", {}, h("tr", {}, labels.map((l) => h("th", { scope: "col" }, l))));
  replace(main, h("h1", {}, "Connections"),
    roleNote(role, "write", "read the connections", "adding, testing or deleting them"),
    h("section", { "aria-labelledby": "profiles-title" }, h("h2", { id: "profiles-title" }, "Profiles"),
      h("p", { class: "muted" }, "Options that several tables share, such as a server and its credentials."),
      h("table", { class: "data", "aria-labelledby": "profiles-title" },
        head(["Name", "Connector", "Options", ""]), profiles),
      profileNotice,
      profileForm.element),
    h("section", { "aria-labelledby": "tables-title" }, h("h2", { id: "tables-title" }, "Tables"),
      h("p", { class: "muted" }, "Sources and sinks that pipelines use by name, without CREATE TABLE."),
      h("table", { class: "data", "aria-labelledby": "tables-title" },
        head(["Name", "Connector", "Role", "Profile", "Options", "Columns", ""]), tables),
      tableNotice,
      tableForm.element));
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
  role: string | null;
}

function rowActions(resource: Resource, name: string, context: RowContext): HTMLElement[] {
  const key = `${resource}/${name}`;
  const previous = context.results.get(key);
  const result = h("div", { role: "status", class: `row-result ${previous?.ok ? "ok" : "error"}` },
    previous?.text ?? "");
  const test = h("button", { type: "button", class: "secondary", "aria-label": `Test ${name}` }, "Test");
  test.addEventListener("click", async () => {
    say(result, `Testing ${name}…`, "muted", "row-result");
    context.results.set(key, { text: "", ok: true });
    const outcome = await check(`/${resource}/${encodeURIComponent(name)}/test`, undefined);
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
  gate(context.role, "write", test, remove);
  return [h("div", { class: "row-buttons" }, test, remove), result];
}

/** A check's outcome as a line: OK or Failed, and the API's message. */
async function check(path: string, body: unknown): Promise<{ text: string; ok: boolean }> {
  try {
    const answer = await post<Check>(path, body);
    return { text: `${answer.ok ? "OK" : "Failed"}: ${answer.message}`, ok: answer.ok };
  } catch (error) {
    return { text: `Failed: ${describe(error)}`, ok: false };
  }
}

interface CreateForm { element: HTMLElement; profilesChanged: () => void }

/** Add a profile or a table: its name, connector (and a table's role and profile), the
 * connector's options, a table's columns; Test checks it as it stands, unsaved. */
function createForm(kind: Kind, connectors: ConnectorInfo[], profiles: () => Profile[],
                    reload: () => Promise<void>, role: string | null): CreateForm {
  const title = kind === "profile" ? "Add a profile" : "Add a table";
  const prefix = `${kind}-`;
  const name = h("input", { type: "text", id: `${prefix}name`, required: true, autocomplete: "off" });
  const connector = h("select", { id: `${prefix}connector` },
    connectors.map((c) => h("option", { value: c.name }, `${c.name} (${c.roles.join(", ")})`)));
  const tableRole = h("select", { id: `${prefix}role` });
  const profile = h("select", { id: `${prefix}profile` });
  const fields = optionFields(prefix);
  const columns = kind === "table" ? columnsEditor(prefix) : null;
  const status = h("p", { role: "status", class: "muted", "data-testid": `${kind}-form-status` });
  const test = h("button", { type: "button", class: "secondary" }, kind === "profile" ? "Test profile" : "Test table");
  const add = h("button", { type: "submit" }, kind === "profile" ? "Add profile" : "Add table");
  const chosen = () => connectors.find((c) => c.name === connector.value);
  const roleField = field("Role of the table", tableRole, "Whether pipelines read it, write it or look keys up in it.");
  const profileField = field("Profile (optional)", profile);
  const form = h("form", { class: "card", "aria-labelledby": `${prefix}form-title` },
    h("h3", { id: `${prefix}form-title` }, title),
    h("div", { class: "row" }, field(kind === "profile" ? "Profile name" : "Table name", name),
      field(`Connector of the ${kind}`, connector),
      kind === "table" ? roleField : null, kind === "table" ? profileField : null),
    fields.element,
    columns?.element,
    h("div", { class: "actions" }, add, test),
    status);

  // The fields follow the connector (and a table's role); a profile must be of its connector.
  const showRoles = () => {
    const roles = chosen()?.roles ?? [];
    const keep = tableRole.value;
    replace(tableRole, roles.map((r) => h("option", { value: r, selected: r === keep }, r)));
    roleField.hidden = roles.length < 2;
  };
  const profilesChanged = () => {
    const keep = profile.value;
    const usable = profiles().filter((p) => p.connector === connector.value);
    replace(profile, h("option", { value: "" }, usable.length ? "none" : `none (no ${connector.value} profiles)`),
      usable.map((p) => h("option", { value: p.name, selected: p.name === keep }, p.name)));
  };
  const refit = () => {
    if (kind === "table") {
      showRoles();
      profilesChanged();
    }
    fields.show(chosen(), kind === "table" ? tableRole.value || null : null);
  };
  connector.addEventListener("change", refit);
  tableRole.addEventListener("change", refit);
  refit();
  // Whatever was said about the form is about it as it was.
  form.addEventListener("input", () => say(status, "", "muted"));
  form.addEventListener("change", () => say(status, "", "muted"));

  const body = (): Record<string, unknown> => {
    const { config, secrets } = fields.values();
    const made: Record<string, unknown> = { name: name.value.trim(), connector: connector.value, config, secrets };
    if (kind === "table") {
      if ((chosen()?.roles.length ?? 0) > 1) config.type = tableRole.value;
      if (profile.value) made.profile = profile.value;
      if (columns) made.fields = columns.columns();
    }
    return made;
  };
  test.addEventListener("click", async () => {
    let request: Record<string, unknown>;
    try {
      request = body();
    } catch (error) {
      say(status, `Not tested: ${describe(error)}`, "error");
      return;
    }
    say(status, `Testing ${String(request.name) || `the ${kind}`}…`, "muted");
    const outcome = await check(`/connection-${kind === "profile" ? "profiles" : "tables"}/test`, request);
    say(status, `${outcome.text} (not stored yet)`, outcome.ok ? "ok" : "error");
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const added = name.value.trim();
    try {
      const request = body();
      say(status, `Adding ${added}…`, "muted");
      await post(`/connection-${kind === "profile" ? "profiles" : "tables"}`, request);
      form.reset();
      fields.clear();
      columns?.clear();
      refit();
      say(status, `${added} added.`, "ok");
      await reload();
    } catch (error) {
      say(status, `Not added: ${describe(error)}`, "error");
    }
  });
  gate(role, "write", add, test);
  return { element: form, profilesChanged };
}
