// The console's charts (Chart.js): rows per second over time, from a job's committed
// epochs; and series over time (usage by pipeline, cost against a budget).

import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, LineController, LineElement,
  type Plugin, PointElement, Tooltip } from "chart.js";

import type { Checkpoint } from "./api";
import { formatRate, type Unit } from "./format";

Chart.register(BarController, BarElement, LineController, LineElement, PointElement, LinearScale,
  CategoryScale, Legend, Tooltip);

const INPUT = "#0e7490";
const OUTPUT = "#c2410c";
/** At most this many epochs are drawn: the latest ones. */
const MAX_POINTS = 120;

/** Writes a chart's y axes, titles and tick labels as drawn (after every update and
 * resize), on its canvas as ``data-axes``: what a reader of the picture sees, for tests
 * and tools that cannot read pixels. */
const axesDescribed: Plugin = {
  id: "spate-axes-described",
  afterUpdate: (chart) => {
    const axes = Object.values(chart.scales).filter((scale) => scale.axis === "y").map((scale) => ({
      title: String((scale.options as { title?: { text?: unknown } }).title?.text ?? ""),
      ticks: scale.ticks.map((tick) => String(tick.label ?? "")),
    }));
    chart.canvas.dataset.axes = JSON.stringify(axes);
  },
};

export interface RateSample { label: string; rowsInPerS: number; rowsOutPerS: number }

/** Input and output rows/s over the checkpoints of the last ``windowMs`` (at least two):
 * steadier than the latest epoch's, which is 0 for a window operator between firings. */
export function recentRates(checkpoints: Checkpoint[], windowMs = 60_000): { rowsIn: number; rowsOut: number } | null {
  if (checkpoints.length < 2) return null;
  const last = Date.parse(checkpoints[checkpoints.length - 1].committed_at);
  const recent = checkpoints.filter((c) => Date.parse(c.committed_at) >= last - windowMs);
  const first = recent.length >= 2 ? recent[0] : checkpoints[checkpoints.length - 2];
  const counted = checkpoints.slice(checkpoints.indexOf(first) + 1);
  const seconds = (last - Date.parse(first.committed_at)) / 1000;
  if (seconds <= 0) return null;
  return { rowsIn: counted.reduce((sum, c) => sum + c.rows_in, 0) / seconds,
           rowsOut: counted.reduce((sum, c) => sum + c.rows_out, 0) / seconds };
}

/** Rows/s of each epoch: its rows over the time since the previous epoch committed. */
export function ratesOf(checkpoints: Checkpoint[]): RateSample[] {
  const samples: RateSample[] = [];
  for (let i = 1; i < checkpoints.length; i++) {
    const seconds = (Date.parse(checkpoints[i].committed_at) - Date.parse(checkpoints[i - 1].committed_at)) / 1000;
    if (seconds <= 0) continue;
    samples.push({ label: new Date(checkpoints[i].committed_at).toLocaleTimeString(),
      rowsInPerS: checkpoints[i].rows_in / seconds, rowsOutPerS: checkpoints[i].rows_out / seconds });
  }
  return samples.slice(-MAX_POINTS);
}

export interface RatesChart { draw: (samples: RateSample[]) => void; destroy: () => void }

/** Input and output on axes of their own (left and right): a pipeline that reads
 * thousands of rows and writes a few would otherwise draw its output as a flat line. */
export function ratesChart(canvas: HTMLCanvasElement): RatesChart {
  const axis = (text: string, colour: string, position: "left" | "right") => ({
    position, beginAtZero: true,
    title: { display: true, text, color: colour },
    ticks: { color: colour, callback: (value: number | string) => formatRate(Number(value)) },
    // One grid is enough: the right axis's lines would not meet the left's ticks.
    grid: { drawOnChartArea: position === "left" },
  });
  const chart = new Chart<"line", number[], string>(canvas, {
    type: "line",
    plugins: [axesDescribed],
    data: { labels: [], datasets: [
      { label: "Input rows/s", data: [], borderColor: INPUT, backgroundColor: INPUT, tension: 0.2,
        yAxisID: "input" },
      { label: "Output rows/s", data: [], borderColor: OUTPUT, backgroundColor: OUTPUT, tension: 0.2,
        yAxisID: "output" },
    ] },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      scales: { input: axis("input rows/s", INPUT, "left"), output: axis("output rows/s", OUTPUT, "right") },
      plugins: { tooltip: { callbacks: {
        label: (item) => `${item.dataset.label}: ${formatRate(item.parsed.y)}`,
      } } },
    },
  });
  const draw = (samples: RateSample[]) => {
    chart.data.labels = samples.map((s) => s.label);
    chart.data.datasets[0].data = samples.map((s) => s.rowsInPerS);
    chart.data.datasets[1].data = samples.map((s) => s.rowsOutPerS);
    chart.update();
  };
  return { draw, destroy: () => chart.destroy() };
}

/** Colours of series (pipelines), in order; the console's own two first. */
const PALETTE = [INPUT, OUTPUT, "#7c3aed", "#15803d", "#b45309", "#be185d", "#1d4ed8", "#4d7c0f", "#64748b"];

export interface SeriesLine {
  label: string; data: (number | null)[];
  /** Drawn dashed: a forecast or a limit, not a measurement. */
  dashed?: boolean;
  colour?: string;
}

export interface SeriesChart {
  draw: (labels: string[], series: SeriesLine[]) => void;
  destroy: () => void;
}

/** How an axis shows its values: ``unit`` picks, from the largest value drawn, what the
 * values are divided by and the axis is titled (e.g. SCU-minutes when a month's use is a
 * few minutes); ``format`` writes a value (in that unit) on a tick and in the tooltip. */
export interface AxisScale {
  unit?: (max: number) => Unit;
  /** The axis's title; ``{unit}`` is replaced by the unit's name. */
  title: string;
  format: (value: number) => string;
}

/** The largest value an axis must reach: of each period's sum when the series stack. */
function largest(series: SeriesLine[], stacked: boolean): number {
  const length = Math.max(0, ...series.map((one) => one.data.length));
  let max = 0;
  for (let i = 0; i < length; i++) {
    const values = series.map((one) => one.data[i] ?? 0);
    max = Math.max(max, stacked ? values.reduce((a, b) => a + b, 0) : Math.max(0, ...values));
  }
  return max;
}

/** Series over time on one axis: ``stacked`` bars (each pipeline's share of a period), or
 * lines. The axis's ticks and the tooltips are written by ``axis``, in the unit it picks. */
export function seriesChart(canvas: HTMLCanvasElement, options: {
  kind: "bar" | "line"; stacked: boolean; axis: AxisScale;
}): SeriesChart {
  let unit: Unit = { name: "", size: 1 };
  const title = () => options.axis.title.replace("{unit}", unit.name);
  const chart = new Chart<"bar" | "line", (number | null)[], string>(canvas, {
    type: options.kind,
    data: { labels: [], datasets: [] },
    plugins: [axesDescribed],
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      scales: {
        x: { stacked: options.stacked },
        y: { stacked: options.stacked, beginAtZero: true, title: { display: true, text: title() },
          ticks: { callback: (value) => options.axis.format(Number(value)) } },
      },
      plugins: {
        // A line's key is drawn as a line (dashed for a forecast or a limit), not a box.
        legend: { labels: { boxHeight: options.kind === "line" ? 2 : 12 } },
        tooltip: { callbacks: {
          label: (item) => `${item.dataset.label}: ${item.parsed.y === null ? "—"
            : `${options.axis.format(item.parsed.y)}${unit.name ? ` ${unit.name}` : ""}`}`,
        } },
      },
    },
  });
  const draw = (labels: string[], series: SeriesLine[]) => {
    unit = options.axis.unit?.(largest(series, options.stacked)) ?? { name: "", size: 1 };
    const yAxis = chart.options.scales?.y;
    if (yAxis?.title) yAxis.title.text = title();
    chart.data.labels = labels;
    chart.data.datasets = series.map((one, i) => {
      const colour = one.colour ?? PALETTE[i % PALETTE.length];
      return { label: one.label, data: one.data.map((v) => v === null ? null : v / unit.size),
        borderColor: colour, backgroundColor: colour,
        // Points only where they can be told apart (a month's days, not two hours' minutes).
        borderDash: one.dashed ? [6, 4] : [], pointRadius: one.dashed || labels.length > 40 ? 0 : 2,
        tension: 0, spanGaps: false };
    });
    chart.update();
  };
  return { draw, destroy: () => chart.destroy() };
}
