// The options part of a connection form, built from what the connector declares
// (GET /connectors): a field per option its tables of the chosen role accept, of the
// option's type (a list for choices and booleans, a number field for numbers), with
// its meaning, default and whether it is required under it; secret ones as password
// fields (stored encrypted, never shown again), and any other option may be kept
// encrypted too (a path or URL that carries a token).

import type { ConnectorInfo, ConnectorOption } from "../api";
import { field, h, replace } from "../dom";

/** Set by the table's role (the Role field), not as an option of its own. */
const ROLE_OPTION = "type";

export interface OptionFields {
  element: HTMLElement;
  /** Show the fields of ``connector``'s options for tables of ``role`` (null: any, a
   * profile's); values typed for an option that stays are kept. */
  show: (connector: ConnectorInfo | undefined, role: string | null) => void;
  /** The options as the API takes them; an Error naming an option that is not valid. */
  values: () => { config: Record<string, string>; secrets: Record<string, string> };
  clear: () => void;
}

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

/** ``prefix`` keeps the ids of two forms on one page apart. */
export function optionFields(prefix: string): OptionFields {
  const grid = h("div", { class: "option-grid" });
  const legend = h("legend", {}, "Options");
  const none = h("p", { class: "muted", hidden: true }, "This connector has no options to set here.");
  const encrypted = h("textarea", { id: `${prefix}encrypted`, rows: 2, autocomplete: "off", spellcheck: "false",
    placeholder: "path = s3://bucket/key?token=…" });
  const element = h("fieldset", { class: "options" }, legend, none, grid,
    h("details", {}, h("summary", {}, "Keep other options encrypted"),
      field(`Encrypted options (${prefix.replace(/-$/, "")})`, encrypted,
        "One 'option = value' per line: stored encrypted like a password and never shown again, "
        + "for a value that carries a credential (a path or URL with a token).")));
  let shown: ConnectorOption[] = [];
  const inputs = new Map<string, HTMLInputElement | HTMLSelectElement>();

  const show: OptionFields["show"] = (connector, role) => {
    shown = (connector?.options ?? []).filter((o) => o.name !== ROLE_OPTION
      && (role === null || o.roles.includes(role)));
    legend.textContent = connector ? `Options of ${connector.name}${role ? ` (${role})` : ""}` : "Options";
    const kept = new Map([...inputs].map(([name, input]) => [name, input.value]));
    inputs.clear();
    replace(grid, shown.map((option) => {
      const id = `${prefix}option-${option.name.replace(/[^a-z0-9]+/gi, "-")}`;
      const input = control(option, id, kept.get(option.name) ?? "");
      inputs.set(option.name, input);
      return field(option.name, input, hint(option));
    }));
    none.hidden = shown.length > 0;
  };
  const values: OptionFields["values"] = () => {
    const config: Record<string, string> = {};
    const secrets = parseOptions(encrypted.value);
    for (const option of shown) {
      const value = inputs.get(option.name)?.value.trim() ?? "";
      if (!value) continue;
      if (option.name in secrets) throw new Error(`option ${option.name} is given twice`);
      (option.secret ? secrets : config)[option.name] = value;
    }
    return { config, secrets };
  };
  const clear = () => {
    for (const input of inputs.values()) input.value = "";
    encrypted.value = "";
  };
  return { element, show, values, clear };
}

/** The default as the form shows it ("" when there is none). */
function shownDefault(option: ConnectorOption): string {
  return option.default ?? (option.default_text ?? "").replace(/`/g, "");
}

/** The field for one option: a list of its values, a number field or a text field. */
function control(option: ConnectorOption, id: string, value: string): HTMLInputElement | HTMLSelectElement {
  const values = option.kind === "choice" ? option.choices
    : option.kind === "boolean" ? ["true", "false"] : null;
  if (values) {
    const fallback = shownDefault(option);
    const select = h("select", { id, name: option.name },
      h("option", { value: "" }, fallback ? `(default: ${fallback})` : "(not set)"),
      values.map((choice) => h("option", { value: choice }, choice)));
    select.value = values.includes(value) ? value : "";
    return select;
  }
  const numeric = option.kind === "integer" || option.kind === "number";
  return h("input", {
    type: option.secret ? "password" : numeric ? "number" : "text", id, name: option.name,
    step: option.kind === "integer" ? 1 : numeric ? "any" : null,
    autocomplete: option.secret ? "new-password" : "off", spellcheck: "false",
    placeholder: shownDefault(option) || (option.kind === "duration" ? "e.g. 10s"
      : option.kind === "size" ? "e.g. 64MB" : null),
    value,
  });
}

/** What goes under a field: the option's meaning, whether it is required, its default. */
function hint(option: ConnectorOption): string {
  const parts = [option.description.replace(/`/g, "").replace(/\[([^\]]+)\]\([^)]*\)/g, "$1")];
  if (option.required) parts.push("Required.");
  else if (option.required_when) parts.push(`Required ${option.required_when.replace(/`/g, "")}.`);
  const fallback = shownDefault(option);
  if (fallback) parts.push(`Default: ${fallback}.`);
  if (option.secret) parts.push("Secret: stored encrypted, never shown again.");
  return parts.filter(Boolean).join(" ");
}
