// The operator graph of a plan, drawn as SVG: columns by depth from the sources,
// each node marked as native Spark or a Spate operator and named in the SQL's terms
// (planLabels), with its rows per second and the job's backpressure as its fill. It
// shrinks to fit its box, within reason, and scrolls past that.

import type { OperatorMetrics, PlanGraph, PlanNode } from "./api";
import { formatRate } from "./format";
import { nodeTexts } from "./planLabels";

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 200;
const NODE_H = 80;
const GAP_X = 40;
const GAP_Y = 20;
const MARGIN = 10;
/** Characters of a node's name and second line that fit in NODE_W at their font sizes. */
const NAME_CHARS = 27;
const DETAIL_CHARS = 32;
/** The graph shrinks to fit its box down to this share of its size, then scrolls. */
const MIN_SCALE = 0.8;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>,
                                                  text?: string): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/** Each node's column: the longest path to it from a source. */
function depths(graph: PlanGraph): Map<string, number> {
  const depth = new Map(graph.nodes.map((n) => [n.id, 0]));
  // A plan is a DAG of at most a few dozen nodes: relaxing edges |nodes| times settles it.
  for (let round = 0; round < graph.nodes.length; round++) {
    for (const edge of graph.edges) {
      const next = (depth.get(edge.source) ?? 0) + 1;
      if (next > (depth.get(edge.target) ?? 0)) depth.set(edge.target, next);
    }
  }
  return depth;
}

export interface GraphView {
  element: SVGSVGElement;
  /** Show each node's rows/s and busy ratio over the job's last minute, from its own
   * operator's figures, and fill it by that busy ratio (nodes without one stay unfilled). */
  update: (operators: OperatorMetrics[]) => void;
  /** No job runs this plan (``word``: stopped, starting, …): no figures, no fill. */
  still: (word: string) => void;
}

/** What one node shows while its job runs. */
interface NodeFigures { rowsPerS: number | null; busy: number | null }

/** Tells graphs apart on one page (their ids must differ). */
let drawn = 0;

export function drawGraph(graph: PlanGraph): GraphView {
  const depth = depths(graph);
  const columns = new Map<number, PlanNode[]>();
  for (const node of graph.nodes) {
    const d = depth.get(node.id) ?? 0;
    columns.set(d, [...(columns.get(d) ?? []), node]);
  }
  const tallest = Math.max(...[...columns.values()].map((c) => c.length), 1);
  const width = columns.size * (NODE_W + GAP_X) - GAP_X + 2 * MARGIN;
  const height = tallest * (NODE_H + GAP_Y) - GAP_Y + 2 * MARGIN;
  const texts = nodeTexts(graph);
  const ids = `graph-${++drawn}`;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-labelledby": `${ids}-title`, class: "graph" });
  // As wide as the box allows, never wider than drawn, and never so small that the text
  // cannot be read: past that, the box scrolls (.graph-box has overflow: auto).
  root.style.width = "100%";
  root.style.maxWidth = `${width}px`;
  root.style.minWidth = `${Math.round(width * MIN_SCALE)}px`;
  root.appendChild(svg("title", { id: `${ids}-title` },
    `Operator graph: ${graph.nodes.map((n) => `${texts.get(n.id)?.name ?? n.label} (${n.runs_on})`).join(", ")}`));
  const defs = svg("defs", {});
  const marker = svg("marker", { id: `${ids}-arrow`, viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" });
  marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }));
  defs.appendChild(marker);
  root.appendChild(defs);

  const position = new Map<string, { x: number; y: number }>();
  for (const [d, nodes] of columns) {
    const offset = ((tallest - nodes.length) * (NODE_H + GAP_Y)) / 2;
    nodes.forEach((node, index) => position.set(node.id,
      { x: MARGIN + d * (NODE_W + GAP_X), y: MARGIN + offset + index * (NODE_H + GAP_Y) }));
  }
  for (const edge of graph.edges) {
    const from = position.get(edge.source);
    const to = position.get(edge.target);
    if (!from || !to) continue;
    const x1 = from.x + NODE_W;
    const y1 = from.y + NODE_H / 2;
    const x2 = to.x;
    const y2 = to.y + NODE_H / 2;
    const mid = (x1 + x2) / 2;
    root.appendChild(svg("path", { d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`,
      class: "edge", "marker-end": `url(#${ids}-arrow)` }));
  }
  const rates = new Map<string, SVGTextElement>();
  const boxes = new Map<string, SVGRectElement>();
  const hovers = new Map<string, SVGTitleElement>();
  for (const node of graph.nodes) {
    const at = position.get(node.id)!;
    const text = texts.get(node.id)!;
    const group = svg("g", { class: `node ${node.runs_on}`, "data-node": node.id, "data-kind": node.kind,
      "data-runs-on": node.runs_on, transform: `translate(${at.x},${at.y})` });
    const hover = svg("title", {}, text.tooltip);
    group.appendChild(hover);
    hovers.set(node.id, hover);
    const box = svg("rect", { width: NODE_W, height: NODE_H, rx: 6, class: "box", "data-pressure": "none" });
    group.appendChild(box);
    group.appendChild(svg("text", { x: 8, y: 17, class: "badge" }, text.badge));
    group.appendChild(svg("text", { x: 8, y: 35, class: "name" }, truncate(text.name, NAME_CHARS)));
    group.appendChild(svg("text", { x: 8, y: 52, class: "detail" }, truncate(text.detail, DETAIL_CHARS)));
    const rate = svg("text", { x: 8, y: 70, class: "rate" }, "— rows/s");
    group.appendChild(rate);
    root.appendChild(group);
    rates.set(node.id, rate);
    boxes.set(node.id, box);
  }
  const show = (id: string, rate: string, level: string, said: string) => {
    rates.get(id)!.textContent = rate;
    boxes.get(id)!.setAttribute("data-pressure", level);
    hovers.get(id)!.textContent = `${texts.get(id)!.tooltip}\n${said}`;
  };
  const update: GraphView["update"] = (operators) => {
    const byNode = figuresByNode(graph, operators);
    for (const node of graph.nodes) {
      const figures = byNode.get(node.id);
      const rows = figures?.rowsPerS ?? null;
      const busy = figures?.busy ?? null;
      const rate = `${formatRate(rows)} rows/s${busy === null ? "" : ` · busy ${busy.toFixed(2)}`}`;
      show(node.id, rate, pressure(busy), busy !== null
        ? `Over the last minute: ${formatRate(rows)} rows/s; busy ${busy.toFixed(2)} of the time.`
        : `Over the last minute: ${formatRate(rows)} rows/s. ${NO_BUSY[node.kind] ?? ""}`.trim());
    }
  };
  const still: GraphView["still"] = (word) => {
    for (const node of graph.nodes) show(node.id, word, "none", `The pipeline is ${word}: no live figures.`);
  };
  still("not running");
  return { element: root, update, still };
}

/** Why a node has no busy ratio of its own. */
const NO_BUSY: Record<string, string> = {
  source: "Its reading runs inside the Spark jobs of the operators and sinks after it.",
  pre_aggregate: "Native Spark: it runs inside the job of the Spate operator after it.",
  projection: "Native Spark: it runs inside the job that writes its sink.",
};

/** A busy ratio as the box's fill: none without one. */
function pressure(busy: number | null): string {
  if (busy === null) return "none";
  return busy >= 0.8 ? "high" : busy >= 0.5 ? "medium" : "low";
}

/** Each plan node's figures from its own operator's: sources and sinks carry their
 * node's id; the runner reports queries in plan order, one entry per query, and a query's
 * busy ratio is its Spate operators' (its native steps have none of their own). */
function figuresByNode(graph: PlanGraph, operators: OperatorMetrics[]): Map<string, NodeFigures> {
  const result = new Map<string, NodeFigures>();
  const queries = operators.filter((o) => !o.operator.startsWith("source:") && !o.operator.startsWith("sink:"));
  for (const operator of operators) {
    if (operator.operator.startsWith("source:")) {
      result.set(operator.operator, { rowsPerS: operator.rows_out_per_s, busy: null });
    }
    if (operator.operator.startsWith("sink:")) {
      result.set(operator.operator, { rowsPerS: operator.rows_in_per_s, busy: operator.busy_ratio });
    }
  }
  // Query nodes are named "q<index>:…", in plan order like the runner's reports.
  const prefixes = [...new Set(graph.nodes.map((n) => /^q\d+:/.exec(n.id)?.[0]).filter(Boolean))];
  queries.forEach((query, position) => {
    const prefix = prefixes[position];
    for (const node of graph.nodes.filter((n) => prefix && n.id.startsWith(prefix))) {
      result.set(node.id, {
        rowsPerS: node.kind === "projection" ? query.rows_out_per_s : query.rows_in_per_s,
        busy: node.runs_on === "spate" ? query.busy_ratio : null });
    }
  });
  return result;
}

function truncate(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}
