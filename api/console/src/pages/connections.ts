// Connections: profiles and tables, each with a Test button. Secret options are
// write-only: the API lists only which are set (masked), and this page never shows more.

import { type Check, type ConnectionTable, type ConnectorInfo, del, get, type Page, post,
  type Profile, describe } from "../api";
import { field, h, replace } from "../dom";

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

export async function connectionsPage(main: HTMLElement): Promise<void> {
  const notice = h("p", { role: "status", class: "muted", "aria-live": "polite" });
  const profiles = h("tbody");
  const tables = h("tbody");
  const connectors = (await get<{ items: ConnectorInfo[] }>("/connectors")).items;
  const reload = async () => {
    const [p, t] = await Promise.all([get<Page<Profile>>("/connection-profiles?limit=200"),
      get<Page<ConnectionTable>>("/connection-tables?limit=200")]);
    replace(profiles, p.items.map((profile) => h("tr", { "data-profile": profile.name },
      h("th", { scope: "row" }, profile.name), h("td", {}, profile.connector),
      h("td", {}, options(profile.config, profile.secrets)),
      h("td", {}, rowActions("connection-profiles", profile.name, notice, reload)))));
    replace(tables, t.items.map((table) => h("tr", { "data-table": table.name },
      h("th", { scope: "row" }, table.name), h("td", {}, table.connector), h("td", {}, table.role),
      h("td", {}, table.profile ?? ""), h("td", {}, options(table.config, table.secrets)),
      h("td", {}, rowActions("connection-tables", table.name, notice, reload)))));
  };
  const head = (labels: string[]) => h("thead", {}, h("tr", {}, labels.map((l) => h("th", { scope: "col" }, l))));
  replace(main, h("h1", {}, "Connections"), notice,
    h("section", { "aria-labelledby": "profiles-title" }, h("h2", { id: "profiles-title" }, "Profiles"),
      h("table", { class: "data", "aria-labelledby": "profiles-title" },
        head(["Name", "Connector", "Options", ""]), profiles),
      createForm("profile", connectors, notice, reload)),
    h("section", { "aria-labelledby": "tables-title" }, h("h2", { id: "tables-title" }, "Tables"),
      h("table", { class: "data", "aria-labelledby": "tables-title" },
        head(["Name", "Connector", "Role", "Profile", "Options", ""]), tables),
      createForm("table", connectors, notice, reload)));
  await reload();
}

function rowActions(resource: string, name: string, notice: HTMLElement,
                    reload: () => Promise<void>): (HTMLElement | string)[] {
  const test = h("button", { type: "button", class: "secondary", "aria-label": `Test ${name}` }, "Test");
  test.addEventListener("click", async () => {
    notice.textContent = `Testing ${name}…`;
    try {
      const check = await post<Check>(`/${resource}/${encodeURIComponent(name)}/test`);
      notice.textContent = `${name}: ${check.ok ? "OK" : "failed"}: ${check.message}`;
    } catch (error) {
      notice.textContent = `${name}: ${describe(error)}`;
    }
  });
  const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${name}` }, "Delete");
  remove.addEventListener("click", async () => {
    try {
      await del(`/${resource}/${encodeURIComponent(name)}`);
      notice.textContent = `${name} deleted.`;
      await reload();
    } catch (error) {
      notice.textContent = `${name}: ${describe(error)}`;
    }
  });
  return [test, " ", remove];
}

function createForm(kind: "profile" | "table", connectors: ConnectorInfo[], notice: HTMLElement,
                    reload: () => Promise<void>): HTMLElement {
  const title = kind === "profile" ? "Add a profile" : "Add a table";
  const prefix = `${kind}-`;
  const name = h("input", { type: "text", id: `${prefix}name`, required: true, autocomplete: "off" });
  const connector = h("select", { id: `${prefix}connector` },
    connectors.map((c) => h("option", { value: c.name }, `${c.name} (${c.roles.join(", ")})`)));
  const profile = h("input", { type: "text", id: `${prefix}profile`, autocomplete: "off" });
  const config = h("textarea", { id: `${prefix}config`, rows: 3, placeholder: "path = /data/in.jsonl\nformat = json" });
  const secrets = h("textarea", { id: `${prefix}secrets`, rows: 2, autocomplete: "off" });
  const form = h("form", { class: "card", "aria-labelledby": `${prefix}form-title` },
    h("h3", { id: `${prefix}form-title` }, title),
    h("div", { class: "row" }, field(kind === "profile" ? "Profile name" : "Table name", name),
      field(`Connector of the ${kind}`, connector),
      kind === "table" ? field("Profile (optional)", profile) : null),
    h("div", { class: "row" },
      field(`Options of the ${kind}`, config, "One 'option = value' per line (the WITH options)."),
      field(`Secret options of the ${kind}`, secrets, "Stored encrypted; never shown again.")),
    h("button", { type: "submit" }, kind === "profile" ? "Add profile" : "Add table"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body: Record<string, unknown> = { name: name.value.trim(), connector: connector.value,
        config: parseOptions(config.value), secrets: parseOptions(secrets.value) };
      if (kind === "table" && profile.value.trim()) body.profile = profile.value.trim();
      await post(`/connection-${kind === "profile" ? "profiles" : "tables"}`, body);
      notice.textContent = `${name.value.trim()} added.`;
      form.reset();
      await reload();
    } catch (error) {
      notice.textContent = `Could not add it: ${describe(error)}`;
    }
  });
  return form;
}
