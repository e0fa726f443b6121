// The columns of a new connection table: typed in row by row, or inferred from a
// pasted JSON sample and then checked and edited here.

import { field, h, replace } from "../dom";
import { type Column, inferColumns, parseSample, SampleError } from "../inferSchema";

/** Types offered as the user types (any type of the dialect may be written). */
const COMMON_TYPES = ["BIGINT", "INT", "DOUBLE", "FLOAT", "DECIMAL(10, 2)", "BOOLEAN", "TEXT", "JSON",
  "TIMESTAMP", "DATE", "BYTEA", "TEXT[]", "BIGINT[]", "STRUCT<name TEXT>"];
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface ColumnsEditor {
  element: HTMLElement;
  /** The columns as entered; an Error naming the first one that is not valid. */
  columns: () => Column[];
  clear: () => void;
}

export function columnsEditor(prefix: string): ColumnsEditor {
  const body = h("tbody");
  const empty = h("p", { class: "muted" },
    "No columns: the connector's own (nexmark, impulse) or none (a sink takes the query's).");
  const sample = h("textarea", { id: `${prefix}sample`, rows: 4, spellcheck: "false",
    placeholder: '{"auction": 1001, "price": 12.5, "bidder": "ann", "at": "2026-01-05T10:00:00Z"}' });
  const sampleStatus = h("p", { role: "status", class: "muted", id: `${prefix}sample-status` });
  const infer = h("button", { type: "button", class: "secondary" }, "Infer columns");
  const add = h("button", { type: "button", class: "secondary" }, "Add column");
  const typeList = h("datalist", { id: `${prefix}types` }, COMMON_TYPES.map((t) => h("option", { value: t })));
  const table = h("table", { class: "data columns", "aria-label": "Columns of the table" },
    h("thead", {}, h("tr", {}, ["Column", "Type", "Nullable", ""].map((l) => h("th", { scope: "col" }, l)))),
    body);

  const rows = () => [...body.querySelectorAll<HTMLTableRowElement>("tr")];
  const renumber = () => {
    rows().forEach((row, index) => {
      const n = index + 1;
      row.querySelector(".col-name")?.setAttribute("aria-label", `Column ${n} name`);
      row.querySelector(".col-type")?.setAttribute("aria-label", `Column ${n} type`);
      row.querySelector(".col-nullable")?.setAttribute("aria-label", `Column ${n} nullable`);
      row.querySelector(".col-remove")?.setAttribute("aria-label", `Remove column ${n}`);
    });
    table.hidden = rows().length === 0;
    empty.hidden = rows().length > 0;
  };
  const addRow = (column: Column) => {
    const row = h("tr", {},
      h("td", {}, h("input", { type: "text", class: "col-name", value: column.name, autocomplete: "off",
        spellcheck: "false" })),
      h("td", {}, h("input", { type: "text", class: "col-type", value: column.type, list: `${prefix}types`,
        autocomplete: "off", spellcheck: "false" })),
      h("td", {}, h("input", { type: "checkbox", class: "col-nullable", checked: column.nullable })),
      h("td", {}, h("button", { type: "button", class: "link col-remove", onclick: () => {
        row.remove();
        renumber();
      } }, "Remove")));
    body.appendChild(row);
    return row;
  };
  add.addEventListener("click", () => {
    addRow({ name: "", type: "TEXT", nullable: true });
    renumber();
    rows().at(-1)?.querySelector<HTMLInputElement>(".col-name")?.focus();
  });
  infer.addEventListener("click", () => {
    try {
      const records = parseSample(sample.value);
      const inferred = inferColumns(records);
      replace(body);
      inferred.forEach(addRow);
      renumber();
      sampleStatus.className = "ok";
      sampleStatus.textContent = `${inferred.length} column${inferred.length === 1 ? "" : "s"} from `
        + `${records.length} record${records.length === 1 ? "" : "s"}: check the types below, then add the table.`;
    } catch (error) {
      sampleStatus.className = "error";
      sampleStatus.textContent = error instanceof SampleError ? error.message : String(error);
    }
  });

  const columns = (): Column[] => rows().map((row, index) => {
    const name = row.querySelector<HTMLInputElement>(".col-name")!.value.trim();
    const type = row.querySelector<HTMLInputElement>(".col-type")!.value.trim();
    if (!IDENTIFIER.test(name)) {
      throw new Error(`column ${index + 1}: "${name}" is not a column name (letters, digits and _, `
        + "not starting with a digit)");
    }
    if (!type) throw new Error(`column ${index + 1} (${name}) has no type`);
    return { name, type, nullable: row.querySelector<HTMLInputElement>(".col-nullable")!.checked };
  });
  const clear = () => {
    replace(body);
    sample.value = "";
    sampleStatus.textContent = "";
    renumber();
  };
  renumber();

  const element = h("fieldset", { class: "columns-editor" },
    h("legend", {}, "Columns"),
    field("JSON sample", sample, "Paste a record or a few (an object, an array, or one per line); "
      + "Infer columns reads their names and types."),
    h("div", { class: "actions" }, infer),
    sampleStatus,
    empty, table, typeList,
    h("div", { class: "actions" }, add));
  return { element, columns, clear };
}
