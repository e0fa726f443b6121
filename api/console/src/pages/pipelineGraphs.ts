// The operator graphs on a pipeline's page: the plan its job runs, each operator with its
// own live figures; while a new version waits for a restart (or its job starts), the new
// version's plan beside it, without figures; and a stopped pipeline's plan with none.

import { describe, type OperatorMetrics, post, type Validation } from "../api";
import { h, replace } from "../dom";
import { drawGraph, type GraphView } from "../graph";

/** One graph to show: a version's plan, what it is doing, and its job's figures (null:
 * no job runs it, and ``word`` says why). */
export interface GraphPanel {
  version: number;
  caption: string;
  operators: OperatorMetrics[] | null;
  word: string;
}

interface Drawn { element: HTMLElement; caption: HTMLElement; graph: GraphView | null }

export interface PipelineGraphs {
  element: HTMLElement;
  /** Show ``panels``, in order; a version's plan is drawn once and then only updated. */
  show: (panels: GraphPanel[]) => Promise<void>;
}

/** ``sqlOf`` gives a version's SQL. */
export function pipelineGraphs(sqlOf: (version: number) => Promise<string>): PipelineGraphs {
  const element = h("div", { class: "graphs" });
  const drawn = new Map<number, Drawn>();
  let order = "";
  const draw = async (version: number): Promise<Drawn> => {
    const known = drawn.get(version);
    if (known) return known;
    const caption = h("figcaption", { "data-testid": "graph-caption" });
    const box = h("div", { class: "graph-box" });
    const made: Drawn = { element: h("figure", { class: "graph-panel", "data-version": version }, caption, box),
      caption, graph: await planGraph(await sqlOf(version), box) };
    drawn.set(version, made);
    return made;
  };
  const show = async (panels: GraphPanel[]) => {
    const shown = await Promise.all(panels.map((panel) => draw(panel.version)));
    panels.forEach((panel, index) => {
      const one = shown[index];
      one.caption.textContent = panel.caption;
      if (panel.operators) one.graph?.update(panel.operators);
      else one.graph?.still(panel.word);
    });
    // Re-placed only when the set changes, so the page does not jump on every refresh.
    const now = panels.map((panel) => panel.version).join(",");
    if (now !== order) {
      order = now;
      replace(element, shown.map((one) => one.element));
    }
  };
  return { element, show };
}

async function planGraph(sql: string, box: HTMLElement): Promise<GraphView | null> {
  try {
    const validation = await post<Validation>("/pipelines/validate", { sql });
    if (!validation.plan) {
      replace(box, h("p", { class: "error-text" },
        validation.diagnostics.map((d) => `Line ${d.line}, column ${d.column}: ${d.message}`).join("; ")));
      return null;
    }
    const graph = drawGraph(validation.plan);
    replace(box, graph.element);
    return graph;
  } catch (error) {
    replace(box, h("p", { class: "error-text" }, `No graph: ${describe(error)}`));
    return null;
  }
}
