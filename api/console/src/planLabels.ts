// Readable names for the nodes of a plan graph. The API describes a plan as the
// planner sees it: keys and aggregate inputs under internal names (k0, a0), windows
// in microseconds, each query by its number. This module says the same in the
// user's terms: "TUMBLE 5 s", "pre-aggregate by auction", "SELECT into hot_auctions".

import type { PlanGraph, PlanNode } from "./api";
import { formatDuration } from "./format";

/** What a node shows: its kind, its name, a second line, and everything on hover. */
export interface NodeText { badge: string; name: string; detail: string; tooltip: string }

/** The preview's sink: a bare SELECT's rows go to the preview, not to a table. */
const PREVIEW_SINK = "preview";

const KINDS: Record<string, string> = {
  source: "source", sink: "sink", projection: "select", pre_aggregate: "pre-aggregate",
  window_aggregate: "window aggregate", operator: "operator",
};

/** What an aggregate is called in SQL, where the planner's name differs. */
const AGGREGATES: Record<string, (argument: string) => string> = {
  count_star: () => "count(*)",
  count_distinct: (argument) => `count(DISTINCT ${argument})`,
};

/** ``SELECT `bid`.`auction` AS `k0`, …`` → {k0: "bid.auction"}: what each internal column
 * of a generated SELECT was computed from. */
function internalColumns(sql: string): Map<string, string> {
  const columns = new Map<string, string>();
  for (const match of sql.matchAll(/(?:SELECT|,)\s+(.+?)\s+AS\s+`([ak]\d+)`/g)) {
    columns.set(match[2], match[1].replace(/`/g, ""));
  }
  return columns;
}

/** ``… `k0` AS `auction` …`` → {k0: "auction"}: the names the user gave internal columns. */
function userNames(sql: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const match of sql.matchAll(/`([ak]\d+)`\s+AS\s+`([^`]+)`/g)) {
    if (!names.has(match[1])) names.set(match[1], match[2]);
  }
  return names;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function numberOf(value: unknown): number {
  return typeof value === "number" ? value : 0;
}

/** ``TUMBLE 5 s``, ``HOP 1 min every 10 s``, ``SESSION gap 30 s``. */
export function windowName(detail: Record<string, unknown>): string {
  const width = formatDuration(numberOf(detail.width_us));
  switch (detail.window) {
    case "session": return `SESSION gap ${formatDuration(numberOf(detail.gap_us))}`;
    case "hop": return `HOP ${width} every ${formatDuration(numberOf(detail.slide_us))}`;
    default: return `TUMBLE ${width}`;
  }
}

/** The readable text of every node of ``graph``, by node id. */
export function nodeTexts(graph: PlanGraph): Map<string, NodeText> {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const next = (node: PlanNode) => graph.edges.filter((e) => e.source === node.id)
    .map((e) => byId.get(e.target)).filter((n): n is PlanNode => n !== undefined);
  // A query's nodes share the prefix ``q<index>:``; its projection names the keys.
  const queryOf = (node: PlanNode) => /^q\d+:/.exec(node.id)?.[0] ?? null;
  const projectionSql = (prefix: string | null) => text(byId.get(`${prefix}project`)?.detail.sql);
  const preAggregateSql = (prefix: string | null) => text(byId.get(`${prefix}pre_aggregate`)?.detail.sql);
  const columnName = (prefix: string | null, column: string) =>
    userNames(projectionSql(prefix)).get(column) ?? internalColumns(preAggregateSql(prefix)).get(column) ?? column;

  const describe = (node: PlanNode): Omit<NodeText, "badge" | "tooltip"> & { tooltip?: string } => {
    const prefix = queryOf(node);
    switch (node.kind) {
      case "source":
        return { name: node.label,
          detail: `${text(node.detail.connector)}${node.detail.bounded ? ", bounded" : ""}` };
      case "sink":
        return { name: node.label === PREVIEW_SINK ? "preview" : node.label,
          detail: text(node.detail.connector) === PREVIEW_SINK ? "rows to the preview" : text(node.detail.connector) };
      case "pre_aggregate": {
        const keys = (Array.isArray(node.detail.keys) ? node.detail.keys : []).map((k) => columnName(prefix, String(k)));
        const window = next(node).find((n) => n.kind === "window_aggregate");
        const slide = window ? formatDuration(numberOf(window.detail.slide_us)) : "";
        return { name: keys.length ? `pre-aggregate by ${keys.join(", ")}` : "pre-aggregate (no keys)",
          detail: window && window.detail.window !== "session" ? `native, into ${slide} panes` : "native partial aggregates" };
      }
      case "window_aggregate": {
        const inputs = internalColumns(preAggregateSql(prefix));
        const aggregates = (Array.isArray(node.detail.aggregates) ? node.detail.aggregates : []).map((call) => {
          const match = /^(\w+)\((.*)\)$/.exec(String(call));
          if (!match) return String(call);
          const argument = inputs.get(match[2]) ?? match[2];
          return AGGREGATES[match[1]]?.(argument) ?? `${match[1]}(${argument})`;
        });
        return { name: windowName(node.detail), detail: aggregates.join(", ") };
      }
      case "projection": {
        const sink = next(node).find((n) => n.kind === "sink");
        const columns = Array.isArray(node.detail.columns) ? node.detail.columns.map(String) : [];
        const target = !sink ? "" : sink.label === PREVIEW_SINK ? " for the preview" : ` into ${sink.label}`;
        return { name: `SELECT${target}`, detail: columns.join(", ") };
      }
      default: {
        // "<operator id>: <what it does>; <how it keeps state>": the middle part.
        const what = node.label.replace(/^\w+:\s*/, "").split(";")[0];
        return { name: what, detail: "" };
      }
    }
  };

  const texts = new Map<string, NodeText>();
  for (const node of graph.nodes) {
    const described = describe(node);
    const badge = `${node.runs_on === "spark" ? "Spark" : "Spate"} · ${KINDS[node.kind] ?? node.kind}`;
    const sql = text(node.detail.sql);
    const tooltip = [badge, described.name, described.detail, node.kind === "operator" ? node.label : "",
      sql ? `Spark SQL: ${sql.replace(/`/g, "")}` : ""].filter(Boolean).join("\n");
    texts.set(node.id, { badge, name: described.name, detail: described.detail, tooltip });
  }
  return texts;
}
