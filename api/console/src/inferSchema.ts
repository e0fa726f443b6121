// A table's columns guessed from a sample of its JSON records, for the person
// adding the table to check and edit: one object, an array of objects, or JSON
// lines (one object per line, as single_file reads them).

export interface Column { name: string; type: string; nullable: boolean }

/** A JSON value's SQL type as far as the sample shows it; ``null`` until a value says. */
type Inferred =
  | { kind: "null" }
  | { kind: "scalar"; type: "BOOLEAN" | "BIGINT" | "DOUBLE" | "TEXT" | "TIMESTAMP" | "JSON" }
  | { kind: "array"; element: Inferred }
  | { kind: "struct"; fields: Map<string, Inferred> };

const NULL: Inferred = { kind: "null" };
const scalar = (type: "BOOLEAN" | "BIGINT" | "DOUBLE" | "TEXT" | "TIMESTAMP" | "JSON"): Inferred =>
  ({ kind: "scalar", type });

/** RFC 3339 / ISO 8601 date-times, which the JSON reader takes as TIMESTAMP. */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/;
/** A name SQL can use unquoted, as a column or a struct field. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Something wrong with the sample, said so the person can fix it. */
export class SampleError extends Error {}

function typeOf(value: unknown): Inferred {
  if (value === null) return NULL;
  if (typeof value === "boolean") return scalar("BOOLEAN");
  if (typeof value === "number") return scalar(Number.isInteger(value) ? "BIGINT" : "DOUBLE");
  if (typeof value === "string") return scalar(TIMESTAMP.test(value) ? "TIMESTAMP" : "TEXT");
  if (Array.isArray(value)) return { kind: "array", element: value.map(typeOf).reduce(merge, NULL) };
  const fields = new Map<string, Inferred>();
  for (const [key, field] of Object.entries(value as Record<string, unknown>)) fields.set(key, typeOf(field));
  return { kind: "struct", fields };
}

/** The type that holds values of both ``a`` and ``b``: integers widen to DOUBLE, times to
 * TEXT, and values of unrelated kinds to JSON (their text). */
function merge(a: Inferred, b: Inferred): Inferred {
  if (a.kind === "null") return b;
  if (b.kind === "null") return a;
  if (a.kind === "scalar" && b.kind === "scalar") {
    if (a.type === b.type) return a;
    const pair = new Set([a.type, b.type]);
    if (pair.has("BIGINT") && pair.has("DOUBLE")) return scalar("DOUBLE");
    if (pair.has("TEXT") && pair.has("TIMESTAMP")) return scalar("TEXT");
    return scalar(pair.has("JSON") ? "JSON" : "TEXT");
  }
  if (a.kind === "array" && b.kind === "array") return { kind: "array", element: merge(a.element, b.element) };
  if (a.kind === "struct" && b.kind === "struct") {
    const fields = new Map(a.fields);
    for (const [key, type] of b.fields) fields.set(key, merge(fields.get(key) ?? NULL, type));
    return { kind: "struct", fields };
  }
  return scalar("JSON");
}

/** The SQL spelling of a type: ``BIGINT``, ``TEXT[]``, ``STRUCT<a BIGINT, b TEXT>``. */
function sqlType(type: Inferred): string {
  switch (type.kind) {
    case "null": return "TEXT";  // only nulls seen: text holds whatever comes
    case "scalar": return type.type;
    case "array": return `${sqlType(type.element)}[]`;
    case "struct": {
      // Fields SQL cannot name unquoted (or none at all): keep the object as JSON text.
      if (type.fields.size === 0 || [...type.fields.keys()].some((k) => !IDENTIFIER.test(k))) return "JSON";
      return `STRUCT<${[...type.fields].map(([name, field]) => `${name} ${sqlType(field)}`).join(", ")}>`;
    }
  }
}

/** The records of a sample: a JSON object, an array of them, or one object per line. */
export function parseSample(text: string): Record<string, unknown>[] {
  const trimmed = text.trim();
  if (!trimmed) throw new SampleError("Paste one or more JSON records first.");
  let values: unknown[];
  try {
    const whole: unknown = JSON.parse(trimmed);
    values = Array.isArray(whole) ? whole : [whole];
  } catch {
    values = trimmed.split("\n").map((line, index) => [line.trim(), index + 1] as const)
      .filter(([line]) => line !== "")
      .map(([line, number]) => {
        try {
          return JSON.parse(line) as unknown;
        } catch (error) {
          throw new SampleError(`Line ${number} is not JSON (${(error as Error).message}); paste `
            + "one JSON object, an array of objects, or one object per line.");
        }
      });
  }
  values.forEach((value, index) => {
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new SampleError(`Record ${index + 1} is not a JSON object: each record is one row, `
        + "an object of column names and values.");
    }
  });
  return values as Record<string, unknown>[];
}

/** The columns of the sample's records, in the order their names first appear. Every
 * column is nullable: a sample cannot show that a value is never missing, and a NOT NULL
 * column refuses the first record without one (the person may still untick it). */
export function inferColumns(records: Record<string, unknown>[]): Column[] {
  const types = new Map<string, Inferred>();
  for (const record of records) {
    for (const [name, value] of Object.entries(record)) {
      types.set(name, merge(types.get(name) ?? NULL, typeOf(value)));
    }
  }
  return [...types].map(([name, type]) => ({ name, type: sqlType(type), nullable: true }));
}
